"""The console in real headless Chromium against a real ``governance serve``.

Driven with Playwright for Python and the system's Chromium (``GOVERNANCE_TEST_BROWSER``,
default ``/usr/bin/chromium``). Without a usable browser the tests skip with the reason; they
fail instead when ``GOVERNANCE_TEST_BROWSER`` is set or ``GOVERNANCE_TEST_REQUIRE=1``.
Screenshots of the main pages go to ``GOVERNANCE_CONSOLE_SCREENSHOTS`` (the docs' images are
made with ``docs/console``) or else to a temporary artifact directory.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from tests.console.world import XSS, Account, make_account
from tests.http.server import Served

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 900}


def _unusable(reason: str) -> None:
    required = (
        os.environ.get("GOVERNANCE_TEST_BROWSER") is not None
        or os.environ.get("GOVERNANCE_TEST_REQUIRE") == "1"
    )
    if required:
        pytest.fail(f"browser tests required but no usable browser: {reason}")
    pytest.skip(f"no usable browser: {reason}")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = os.environ.get("GOVERNANCE_TEST_BROWSER", "/usr/bin/chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as error:
        _unusable(f"playwright is not installed ({error})")
    if not Path(path).exists():
        _unusable(f"{path} does not exist")
    manager = sync_playwright().start()
    try:
        launched = manager.chromium.launch(executable_path=path, args=ARGS)
    except Exception as error:  # any launch failure means no usable browser
        manager.stop()
        _unusable(f"{path} did not start ({error})")
    yield launched
    launched.close()
    manager.stop()


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Account, Account]]:
    db = tmp_path_factory.mktemp("console") / "console.db"
    with Governance.open(db, config=Config(cipher=PlaintextForTests())) as gov:
        alice = make_account(gov, "alice")
        bob = make_account(gov, "bob")
    server = Served(db)
    try:
        server.wait_ready()
        yield server, alice, bob
    finally:
        server.stop()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chosen = os.environ.get("GOVERNANCE_CONSOLE_SCREENSHOTS")
    folder = Path(chosen) if chosen else tmp_path_factory.mktemp("screenshots")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def page(browser: Any, world: tuple[Served, Account, Account]) -> Iterator[Any]:
    """A fresh browser context; any dialog or script error fails the test."""
    context = browser.new_context(viewport=VIEWPORT, base_url=world[0].base_url)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" else None)
    opened.on("dialog", lambda dialog: (problems.append(f"dialog: {dialog.message}")
                                        if dialog.type == "alert" else None, dialog.accept()))
    yield opened
    context.close()
    assert problems == []


def sign_in(page: Any, account: Account) -> None:
    page.goto("/")
    page.wait_for_url("**/sign-in?next=*")
    page.fill("#token", account.token)
    page.press("#token", "Enter")
    page.wait_for_url("**/")


def test_sign_in_open_the_playground_run_expand_a_span_and_sign_out(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    page.goto("/sign-in")
    page.screenshot(path=shots / "sign-in.png")
    sign_in(page, alice)
    assert page.inner_text("h1") == "Overview"
    assert page.locator("svg.chart").count() == 2
    page.screenshot(path=shots / "overview.png", full_page=True)
    page.click("nav >> text=Agents")
    page.screenshot(path=shots / "agents.png")
    page.click("text=Loan application review agent")
    page.wait_for_selector("text=loan-review-1.0.0")
    page.screenshot(path=shots / "agent.png", full_page=True)
    page.click("nav >> text=Runs")
    page.wait_for_selector("table.runs")
    page.screenshot(path=shots / "runs.png")
    page.goto(f"/runs/{alice.playground_run_id}")
    bars = page.locator("#span-tree svg.bar rect")
    assert bars.count() >= 5
    assert page.locator("#span-tree svg.bar").first.bounding_box()["width"] > 100
    # Expand the model call that drafted the decision letter: its child loads into the tree.
    parent = page.locator("#span-tree > details.span", has_text="gpt-4o-mini")
    parent.locator("summary").click(position={"x": 5, "y": 8})
    child = parent.locator(".children details.span", has_text="Decision letter")
    child.wait_for()
    child.locator("a[data-detail-url]").click()
    page.wait_for_selector("#span-detail .span-detail")
    assert "Decision letter" in page.inner_text("#span-detail h2")
    assert "Payload" in page.inner_text("#span-detail")
    page.screenshot(path=shots / "run.png", full_page=True)
    page.click("header >> text=Sign out")
    page.wait_for_url("**/sign-in")
    page.goto("/runs")
    page.wait_for_url("**/sign-in?next=*")


def test_clear_an_alert(page: Any, world: tuple[Served, Account, Account], shots: Path) -> None:
    _, alice, _ = world
    sign_in(page, alice)
    page.goto("/alerts")
    page.screenshot(path=shots / "alerts.png")
    row = page.locator(f"tr:has(a[href='/runs/{alice.running_run_id}'])")
    assert row.count() == 1
    row.locator("button", has_text="Clear").click()
    page.wait_for_load_state()
    assert page.locator(f"tr:has(a[href='/runs/{alice.running_run_id}'])").count() == 0
    page.goto("/alerts?status=cleared")
    assert page.locator(f"tr:has(a[href='/runs/{alice.running_run_id}'])").count() == 1


def test_terminate_a_running_run(page: Any, world: tuple[Served, Account, Account]) -> None:
    _, alice, _ = world
    sign_in(page, alice)
    page.goto(f"/runs/{alice.running_run_id}")
    page.fill("#reason", "Stuck in a retry loop")
    page.click("button:has-text('Terminate')")
    page.wait_for_selector(".run-header .status-terminated")
    assert "Stuck in a retry loop" in page.inner_text(".run-header")


def test_a_running_run_updates_while_spans_arrive(
    page: Any, world: tuple[Served, Account, Account]
) -> None:
    server, _, bob = world
    sign_in(page, bob)
    page.goto(f"/runs/{bob.running_run_id}")
    assert page.get_attribute("#run-header", "data-total") == "2"
    top_level = "document.querySelectorAll('#span-tree > details').length"
    before = page.evaluate(top_level)
    status, _ = server.request("/agent_spans", bob.token, method="POST", body={
        "agent_instance_id": bob.running_run_id, "schema_name": "tool", "status": "complete",
        "payload": {"tool": "income_check"}, "parent_span_id": None,
    })
    assert status == 200
    page.wait_for_selector("#run-header[data-total='3']", timeout=10_000)
    page.wait_for_function(f"() => {top_level} == {before + 1}")


def test_agent_written_markup_stays_text(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    sign_in(page, alice)
    page.goto(f"/runs/{alice.markup_run_id}")
    page.locator("#span-tree a[data-detail-url]").first.click()
    page.wait_for_selector("#span-detail .span-detail")
    detail = page.inner_text("#span-detail")
    assert XSS in detail
    assert page.locator("#span-detail img").count() == 0
    assert page.locator("script:not([src])").count() == 0
    page.click("button:has-text('Reveal')")
    page.wait_for_selector(".revealed")
    assert "AB123456C" in page.inner_text(".revealed")
    page.goto("/settings")
    page.screenshot(path=shots / "settings.png", full_page=True)


def test_find_the_failed_spans_of_a_run(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    sign_in(page, alice)
    page.goto(f"/runs/{alice.failing_run_id}")
    failed = page.locator(".run-header a.failed-link")
    assert failed.inner_text() == "5 failed"
    failed.click()
    page.wait_for_selector("table.span-matches")
    assert "Failed spans (5)" in page.inner_text("h2.matches-title")
    rows = page.locator("table.span-matches tbody tr")
    assert rows.count() == 5
    assert all("failed" in rows.nth(index).inner_text() for index in range(5))
    page.screenshot(path=shots / "run-failed-spans.png", full_page=True)
    # A failed span opens in the detail panel; its parent is one click away.
    rows.first.locator("td").first.locator("a").click()
    page.wait_for_selector("#span-detail .span-detail")
    assert "Attempt" in page.inner_text("#span-detail")
    rows.first.locator("td").last.locator("a").click()
    page.wait_for_function(
        "() => document.querySelector('#span-detail').innerText.includes('lookup_')"
    )
    # The filter form narrows by type too, and leads back to the tree.
    page.select_option("select[name=status]", "")
    page.select_option("select[name=type]", "tool")
    page.click(".span-filter button")
    page.wait_for_selector("text=All spans of type tool (6)")
    assert page.locator("table.span-matches tbody tr").count() == 6
    page.click("text=The whole span tree")
    page.wait_for_selector("#span-tree details.span")
    assert page.locator("#span-tree > details.span").count() == 6
