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
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance, Session
from tests.console.world import XSS, Account, make_account
from tests.http.server import Served

ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--no-first-run"]
VIEWPORT = {"width": 1400, "height": 900}
NARROW = {"width": 390, "height": 844}
BLOCKING = ("serious", "critical")
"""The axe impacts that fail a test."""

CONVERSATION = {
    "model": "gpt-4o", "provider": "openai",
    "messages": [
        {"role": "system", "content": "You review loan applications."},
        {"role": "user", "content": "Check the income of applicant APP-7."},
        {"role": "assistant", "content": None, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "income_check", "arguments": "{\"applicant\": \"APP-7\"}"},
        }]},
        {"role": "tool", "tool_call_id": "call_1", "content": "verified: 56,400 a year"},
    ],
}
ANSWER = {
    "choices": [{"message": {"role": "assistant", "content": "Income verified; refer."}}],
    "token_usage": {"prompt_tokens": 1200, "completion_tokens": 80,
                    "prompt_tokens_details": {"cached_tokens": 200}},
}


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


def make_big_run(session: Session, agent_id: str) -> str:
    """A run of 20 steps of 15 calls each (301 spans): 7 calls failed, a model call that holds
    a conversation with a tool call (under the step kept as ``CHAT_STEP``), and a failed call
    two levels down."""
    run = session.call("playground/register_loan_application_review_agent_instance",
                       {"agent_id": agent_id})["details"]["id"]
    start = datetime.now(UTC).replace(microsecond=0)

    def at(seconds: float) -> str:
        return (start + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")

    for step_index in range(20):
        step = session.details("agent_spans/create", {
            "agent_instance_id": run, "schema_name": "tool", "status": "complete",
            "payload": {"tool": f"step_{step_index}"},
            "started_at": at(step_index * 8), "finished_at": at(step_index * 8 + 7.8),
        })
        for call in range(15):
            failed = (step_index * 15 + call) % 43 == 7
            body: dict[str, Any] = {"model": "gpt-4o-mini", "prompt": f"Step {step_index}.{call}"}
            result: dict[str, Any] = {"usage": {"input_tokens": 100 + call, "output_tokens": 9}}
            if step_index == 3 and call == 0:
                body, result = CONVERSATION, ANSWER
                CHAT_STEP[agent_id] = step["id"]
            made = session.details("agent_spans/create", {
                "agent_instance_id": run, "schema_name": "llm",
                "status": "failed" if failed else "complete", "parent_span_id": step["id"],
                "payload": body, "result_payload": result,
                "started_at": at(step_index * 8 + call * 0.5),
                "finished_at": at(step_index * 8 + call * 0.5 + 0.2 + call % 3 * 0.1),
            })
            if step_index == 5 and call == 2:
                session.details("agent_spans/create", {
                    "agent_instance_id": run, "schema_name": "tool", "status": "failed",
                    "parent_span_id": made["id"], "payload": {"tool": "deep_lookup"},
                    "started_at": at(step_index * 8 + 1.1), "finished_at": at(step_index * 8 + 1.2),
                })
    return str(run)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, Account, Account]]:
    db = tmp_path_factory.mktemp("console") / "console.db"
    with Governance.open(db, config=Config(cipher=PlaintextForTests())) as gov:
        alice = make_account(gov, "alice")
        bob = make_account(gov, "bob")
        BIG_RUN[alice.name] = make_big_run(alice.session, alice.agent_id)
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


BIG_RUN: dict[str, str] = {}
"""The id of each account's big run (made with the world)."""
CHAT_STEP: dict[str, str] = {}
"""The step of the big run (by agent id) whose first call holds a conversation."""


def assert_accessible(page: Any, name: str) -> None:
    """Run axe-core on the page as it is; any serious or critical violation fails."""
    from axe_playwright_python.base import AXE_SCRIPT

    page.evaluate(AXE_SCRIPT)
    results = page.evaluate("axe.run(document, {resultTypes: ['violations']})")
    blocking = [
        f"{violation['id']} ({violation['impact']}): {violation['help']} at "
        + ", ".join(str(node["target"]) for node in violation["nodes"][:3])
        for violation in results["violations"] if violation["impact"] in BLOCKING
    ]
    assert blocking == [], f"{name}: {blocking}"


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
    parent = page.locator("#span-tree > .span", has_text="gpt-4o-mini")
    parent.locator(":scope > .span-row a.expander").click()
    child = parent.locator(".children .span", has_text="Decision letter")
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
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash") == "The alert was cleared."
    assert_accessible(page, "alerts page")
    assert page.locator(f"tr:has(a[href='/runs/{alice.running_run_id}'])").count() == 0
    page.reload()
    assert page.locator(".flash").count() == 0
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
    top_level = "document.querySelectorAll('#span-tree > .span').length"
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
    page.wait_for_selector("#span-tree .span")
    assert page.locator("#span-tree > .span").count() == 6


def test_find_the_step_in_a_big_run(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    run = BIG_RUN[alice.name]
    sign_in(page, alice)
    page.goto(f"/runs/{run}")
    # Each step holding a failed span says so without being opened; a step without does not.
    marked = page.locator("#span-tree > .span:has(> .span-row .failed-below)")
    assert marked.count() == 8  # steps 0, 3, 6, 9, 11, 14, 17, and 5 (two levels down)
    assert_accessible(page, "run page")
    page.screenshot(path=shots / "run-big.png")
    # The failed spans, found by status: 8, each opening in the panel, next/previous between.
    page.select_option("select[name=status]", "failed")
    page.click(".span-filter button")
    page.wait_for_selector("text=Failed spans (8)")
    rows = page.locator("table.span-matches tbody tr")
    assert rows.count() == 8
    rows.first.locator("td").first.locator("a").click()
    page.wait_for_selector("#span-detail .match-nav")
    assert "Match 1 of 8" in page.inner_text("#span-detail .match-nav")
    page.click("#span-detail a[rel=next]")
    page.wait_for_function(
        "() => document.querySelector('#span-detail .match-nav').innerText.includes('2 of 8')"
    )
    assert "selected" in (rows.nth(1).get_attribute("class") or "")
    assert_accessible(page, "run page, failed spans")
    # By name, and by cost: the one call to OpenAI's gpt-4o is also the one costing over $0.001.
    for query in ("q=openai&min_duration=0.1", "min_cost=0.001"):
        page.goto(f"/runs/{run}?{query}")
        page.wait_for_selector("table.span-matches")
        assert page.locator("table.span-matches tbody tr").count() == 1, query
        assert "gpt-4o" in page.inner_text("table.span-matches tbody tr")
    page.goto(f"/runs/{run}?min_duration=nope")
    assert "min_duration must be a number of seconds" in page.inner_text(".problems")


def test_read_the_conversation_of_a_model_call(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    run = BIG_RUN[alice.name]
    sign_in(page, alice)
    page.goto(f"/runs/{run}")
    step = page.locator(f"#span-tree > .span[data-span-id='{CHAT_STEP[alice.agent_id]}']")
    step.locator(":scope > .span-row a.expander").click()
    call = step.locator(".children .span").first
    call.wait_for()
    # The row shows the model, its tokens and cost without opening it.
    assert "gpt-4o" in call.inner_text() and "1,000 in" in call.inner_text()
    call.locator("a[data-detail-url]").click()
    page.wait_for_selector("#span-detail .chat")
    roles = page.locator("#span-detail .chat .turn .role").all_inner_texts()
    assert [role.split(" ")[0].lower() for role in roles] == [
        "system", "user", "assistant", "tool", "assistant",
    ]
    chat = page.inner_text("#span-detail .chat")
    assert "income_check" in chat and "Income verified; refer." in chat
    facts = page.inner_text("#span-detail .facts")
    assert "1,000 input · 80 output · 200 cache read" in facts
    assert "Latency" in facts
    assert_accessible(page, "run page with a conversation")
    page.screenshot(path=shots / "run-conversation.png", full_page=True)
    page.goto(call.locator("a[data-detail-url]").get_attribute("href"))
    page.wait_for_selector(".chat")
    assert_accessible(page, "span page")
    page.set_viewport_size(NARROW)
    page.screenshot(path=shots / "span-390.png", full_page=True)


def test_zoom_the_timeline_to_a_step(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    run = BIG_RUN[alice.name]
    sign_in(page, alice)
    page.goto(f"/runs/{run}")
    whole = page.locator(".tree-head svg.axis text").all_text_contents()
    assert whole[0] == "0" and len(whole) >= 3
    page.locator("#span-tree > .span").nth(2).locator("a.zoom").click()
    page.wait_for_selector(".zoomed")
    assert page.locator("#span-tree > .span").count() == 1
    ticks = page.locator(".tree-head svg.axis text").all_text_contents()
    assert ticks[0] == "0" and ticks != whole
    # The zoomed span's bar fills the timeline; its children load on the same time axis.
    bar = page.locator("#span-tree > .span > .span-row svg.bar rect")
    assert float(bar.get_attribute("width")) > 99
    page.locator("#span-tree > .span > .span-row a.expander").click()
    page.locator("#span-tree .children .span").first.wait_for()
    assert page.locator("#span-tree .children .span").count() == 15
    assert_accessible(page, "zoomed run page")
    page.screenshot(path=shots / "run-zoomed.png")
    page.click("text=Show the whole run")
    page.wait_for_selector("#span-tree > .span >> nth=19")


def test_copy_a_full_id_with_the_keyboard(
    page: Any, world: tuple[Served, Account, Account]
) -> None:
    _, alice, _ = world
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    sign_in(page, alice)
    page.goto("/alerts")
    button = page.locator("table.alerts button.copy").first
    full = button.get_attribute("data-copy")
    assert full is not None and len(full) > 8
    button.focus()
    page.keyboard.press("Enter")
    page.wait_for_function("() => document.getElementById('copy-status').textContent")
    assert page.evaluate("navigator.clipboard.readText()") == full
    assert page.inner_text("#copy-status") == "Copied"


def test_the_console_fits_a_phone(
    page: Any, world: tuple[Served, Account, Account], shots: Path
) -> None:
    _, alice, _ = world
    page.set_viewport_size(NARROW)
    sign_in(page, alice)
    for path, shot in (("/alerts", "alerts-390.png"),
                       (f"/runs/{BIG_RUN[alice.name]}", "run-390.png"),
                       (f"/runs/{alice.playground_run_id}", None)):
        page.goto(path)
        # Nothing widens the page: wide tables and the tree scroll in their own boxes.
        assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"], path
        sign_out = page.locator("header .sign-out button").bounding_box()
        for link in page.locator("header nav a").all():
            box = link.bounding_box()
            overlaps = not (box["x"] + box["width"] <= sign_out["x"]
                            or sign_out["x"] + sign_out["width"] <= box["x"]
                            or box["y"] + box["height"] <= sign_out["y"]
                            or sign_out["y"] + sign_out["height"] <= box["y"])
            assert not overlaps, f"{link.inner_text()} covers Sign out on {path}"
        assert_accessible(page, f"{path} at 390 px")
        if shot:
            page.screenshot(path=shots / shot, full_page=True)


def test_console_pages_for_unknown_addresses_and_action_addresses(
    browser: Any, world: tuple[Served, Account, Account]
) -> None:
    # Its own browser context: the 404 and 405 answers are what the page fixture fails on.
    context = browser.new_context(viewport=VIEWPORT, base_url=world[0].base_url)
    page = context.new_page()
    _, alice, _ = world
    sign_in(page, alice)
    answer = page.goto("/runs/nothing/here")
    assert answer.status == 404 and page.inner_text("h1") == "Page not found"
    assert page.locator("header nav").count() == 1
    assert_accessible(page, "404 page")
    answer = page.goto(f"/runs/{alice.running_run_id}/terminate")
    assert answer.status == 405 and "button" in page.inner_text("main")
    assert_accessible(page, "405 page")
    context.close()


def test_every_page_passes_axe_at_both_widths(
    page: Any, world: tuple[Served, Account, Account]
) -> None:
    _, alice, _ = world
    page.goto("/sign-in")
    assert_accessible(page, "/sign-in")
    sign_in(page, alice)
    listed = page.locator("header nav a").evaluate_all("links => links.map(a => a.pathname)")
    for path in [*listed, f"/agents/{alice.agent_id}", f"/runs/{alice.markup_run_id}",
                 f"/runs/{alice.markup_run_id}/spans/{alice.markup_span_id}",
                 f"/runs/{alice.playground_run_id}/spans"]:
        page.goto(path)
        for width in (VIEWPORT["width"], NARROW["width"]):
            page.set_viewport_size({"width": width, "height": 900})
            assert_accessible(page, f"{path} at {width} px")
            assert page.evaluate("document.documentElement.scrollWidth") <= width, path
