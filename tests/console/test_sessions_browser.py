"""Sessions in real headless Chromium against ``governance serve``: the sessions page at 1,400
and 390 px (axe-core, screenshots ``sessions.png`` and ``sessions-390.png``), a session's runs,
and a run's header leading to its session's and user's runs.

The browser, axe check and screenshot folder are those of :mod:`tests.console.test_browser`.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from tests.console.test_browser import (  # noqa: F401  (browser and shots are fixtures)
    NARROW,
    VIEWPORT,
    assert_accessible,
    browser,
    shots,
)
from tests.http.server import Served
from tests.storage.parties_world import PartiesWorld, build

SESSIONS = ("support-7f3a21", "support-91c2e0", "billing-22d04b", "onboarding-5e1b77",
            "support-a4c9f3", "billing-3b7e10", "returns-c0ffee42-2f6d-4f1b-9b7e-8d2a61f0c3d5")
USERS = ("user-1042", "user-2310", "user-0077", "maria.keller@example.com")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, PartiesWorld]]:
    db = tmp_path_factory.mktemp("sessions") / "console.db"
    with Governance.open(db, config=Config(cipher=PlaintextForTests())) as gov:
        made = build(gov, 60, now=datetime.now(UTC), sessions=SESSIONS, users=USERS,
                     later_parties=("support-e27b90", "user-5831"))
    server = Served(db)
    try:
        server.wait_ready()
        yield server, made
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, world: tuple[Served, PartiesWorld]) -> Iterator[Any]:  # noqa: F811
    """A fresh browser context, signed in; any script error or dialog fails the test."""
    server, made = world
    context = browser.new_context(viewport=VIEWPORT, base_url=server.base_url)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" else None)
    opened.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}"),
                                        dialog.accept()))
    opened.goto("/sign-in")
    opened.fill("#token", made.token)
    opened.press("#token", "Enter")
    opened.wait_for_url("**/")
    yield opened
    context.close()
    assert problems == []


def test_the_sessions_page_at_both_widths(page: Any, shots: Path) -> None:  # noqa: F811
    page.click("nav >> text=Sessions")
    page.wait_for_selector("table.sessions")
    assert page.inner_text("h1") == "Sessions"
    assert page.locator("nav a[aria-current=page]").inner_text() == "Sessions"
    for width, name in ((VIEWPORT["width"], "sessions.png"), (NARROW["width"], "sessions-390.png")):
        page.set_viewport_size({"width": width, "height": 900})
        assert page.evaluate("document.documentElement.scrollWidth") <= width
        assert_accessible(page, f"sessions page at {width} px")
        page.screenshot(path=shots / name, full_page=True)
    page.set_viewport_size(VIEWPORT)
    page.select_option("select[name=window]", "30")
    page.click("form.filters button")
    page.wait_for_url("**/sessions?window=30")
    assert page.locator("table.sessions tbody tr").count() >= 5


def test_a_sessions_runs_and_a_runs_session_and_user(page: Any) -> None:
    page.goto("/sessions")
    first = page.locator("table.sessions tbody tr").first
    session_id = first.locator("td[data-label=Session]").inner_text()
    runs = int(first.locator("td[data-label=Runs]").inner_text())
    first.locator("td[data-label=Session] a").click()
    page.wait_for_url("**/runs?session=*")
    assert page.input_value("input[name=session]") == session_id
    assert page.locator("table.runs tbody tr").count() == runs
    assert_accessible(page, "runs of a session")
    page.locator("table.runs tbody tr a").first.click()
    page.wait_for_selector("#run-header")
    assert page.locator("#run-header dd.party a").first.inner_text() == session_id

    page.goto("/sessions")
    user_link = page.locator("table.sessions td[data-label=Users] a").first
    user_id = user_link.inner_text()
    user_link.click()
    page.wait_for_url("**/runs?user=*")
    assert page.input_value("input[name=user]") == user_id
    page.locator("table.runs tbody tr a").first.click()
    page.wait_for_selector("#run-header")
    shown_user = page.locator("#run-header dd.party").nth(1).locator("a")
    assert shown_user.inner_text() == user_id
    shown_user.click()
    page.wait_for_url("**/runs?user=*")
    assert page.input_value("input[name=user]") == user_id
    assert page.locator("table.runs tbody tr").count() >= 1
