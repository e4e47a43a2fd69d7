"""Runtime governance in real headless Chromium against a real ``governance serve``: answering
approvals from the live queue, a run's decisions, editing a policy, its mode and back-test;
then every console page at 1,400 and 390 px, checked by axe-core and saved as screenshots.

The browser, axe check and screenshot folder are those of :mod:`tests.console.test_browser`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from tests.console.governed import LONG_RUNS, NO_WIRES, Governed, decide, govern
from tests.console.test_browser import (  # noqa: F401  (browser and shots are fixtures)
    NARROW,
    VIEWPORT,
    assert_accessible,
    browser,
    shots,
)
from tests.console.world import Account, make_account
from tests.http.server import Served

BROKEN = 'forbid (principal, action, resource)\nwhen {\n  context.run.cost_micro_usd >>> 5\n};'
FIXED = ('@reason("a run may not spend over 2 USD")\n'
         "forbid (principal, action, resource)\nwhen {\n  context.run.cost_micro_usd > 2000000\n};")


@attrs.frozen
class World:
    """The served store, its two accounts and alice's runtime governance."""

    server: Served
    alice: Account
    bob: Account
    governed: Governed
    long_runs_policy_id: str
    """An observe-mode policy that a back-test finds stopping the playground's runs."""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    db = tmp_path_factory.mktemp("governance") / "console.db"
    with Governance.open(db, config=Config(cipher=PlaintextForTests())) as gov:
        alice = make_account(gov, "alice")
        bob = make_account(gov, "bob")
        governed = govern(alice)
        govern(bob)
        session = alice.session
        for amount, answer, reason in ((210, "approve", "Order A-0998 was returned in full"),
                                       (480, "reject", "Refund already paid by bank transfer")):
            held = decide(session, governed.run_id, "refund", {"amount": amount, "order": "A-0998"})
            session.call(f"approvals/{answer}", {"approval_id": held["approval_id"],
                                                 "reason": reason})
        decide(session, governed.run_id, "refund", {"amount": 210, "order": "A-0998"})
        session.call("monitors/create", {"name": "Denied actions", "metric": "policy_denials",
                                         "window_seconds": 3600, "warning": 1, "critical": 5})
        long_runs = session.details("policies/create", {
            "name": "Short runs", "mode": "observe", "source": LONG_RUNS,
            "description": "Watching how often runs call a model after their sixth span.",
        })["id"]
        session.call("decisions/decide", {
            "agent_instance_id": governed.run_id, "expires_in_ms": 1000,
            "action": {"kind": "tool_call", "name": "refund", "args": {"amount": 700}},
        })
    time.sleep(1.1)  # the last approval expires unanswered
    server = Served(db)
    try:
        server.wait_ready()
        yield World(server, alice, bob, governed, long_runs)
    finally:
        server.stop()


@pytest.fixture
def page(browser: Any, world: World) -> Iterator[Any]:  # noqa: F811  (the fixture)
    """A fresh browser context; any script error or alert dialog fails the test."""
    context = browser.new_context(viewport=VIEWPORT, base_url=world.server.base_url)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" and "422" not in message.text
              and "404" not in message.text and "405" not in message.text else None)

    def answer(dialog: Any) -> None:
        if dialog.type == "alert":
            problems.append(f"dialog: {dialog.message}")
        dialog.accept()

    opened.on("dialog", answer)
    yield opened
    context.close()
    assert problems == []


def sign_in(page: Any, account: Account) -> None:
    page.goto("/sign-in")
    page.fill("#token", account.token)
    page.press("#token", "Enter")
    page.wait_for_url("**/")


def hold(world: World, amount: int, **members: Any) -> dict[str, Any]:
    """A refund alice's agent asks for over the API, which a policy holds: its decision."""
    status, body = world.server.request("/decision", world.alice.token, method="POST", body={
        "agent_instance_id": world.governed.run_id,
        "action": {"kind": "tool_call", "name": "refund", "args": {"amount": amount}},
        **members,
    })
    assert status == 200 and body["details"]["outcome"] == "pending_approval", body
    details: dict[str, Any] = body["details"]
    return details


def row(page: Any, approval_id: str) -> Any:
    return page.locator(f"li.approval[data-approval-id='{approval_id}']")


def test_approve_and_reject_from_the_queue(page: Any, world: World) -> None:
    first, second = hold(world, 1001), hold(world, 1002)
    sign_in(page, world.alice)
    page.click("nav >> text=Approvals")
    page.wait_for_selector(f"li.approval[data-approval-id='{first['approval_id']}']")
    assert_accessible(page, "approvals page")
    approving = row(page, first["approval_id"])
    assert "amount: 1001" in approving.inner_text()
    approving.locator("textarea").fill("Checked the order with the customer")
    approving.locator("button", has_text="Approve").click()
    page.wait_for_selector(".flash")
    assert "The action was approved" in page.inner_text(".flash")
    done = page.locator(f"#resolved tr[data-approval-id='{first['approval_id']}']")
    assert "selected" in (done.get_attribute("class") or "")
    assert "Checked the order with the customer" in done.inner_text()
    assert "admin@alice.example" in done.inner_text() and "approved" in done.inner_text()
    assert row(page, first["approval_id"]).count() == 0
    status, allowed = world.server.request("/decision", world.alice.token, method="POST", body={
        "agent_instance_id": world.governed.run_id,
        "action": {"kind": "tool_call", "name": "refund", "args": {"amount": 1001}},
    })
    assert status == 200 and allowed["details"]["outcome"] == "allow"
    # A rejection needs a reason: the browser asks for one before anything is sent.
    rejecting = row(page, second["approval_id"])
    rejecting.locator("button", has_text="Reject").click()
    assert page.evaluate("document.activeElement.name") == "reason"
    assert page.locator(".flash").count() == 1  # still the approval's confirmation
    rejecting.locator("textarea").fill("Over the refund limit for this order")
    rejecting.locator("button", has_text="Reject").click()
    page.wait_for_function(
        "() => document.querySelector('.flash').innerText.includes('rejected')")
    status, read = world.server.request(f"/decision/{second['id']}", world.alice.token)
    assert status == 200 and read["details"]["approval"]["status"] == "rejected"
    approval = read["details"]["approval"]
    assert approval["resolution_reason"] == "Over the refund limit for this order"
    assert_accessible(page, "approvals page after a rejection")


def test_the_queue_refreshes_and_keeps_a_reason_being_typed(page: Any, world: World) -> None:
    waiting = hold(world, 2001)
    sign_in(page, world.alice)
    page.goto("/approvals")
    page.evaluate("window.notReloaded = true")
    typing = row(page, waiting["approval_id"]).locator("textarea")
    typing.click()
    page.keyboard.type("Half a reas")
    page.keyboard.press("ArrowLeft")
    arrived = hold(world, 2002)
    page.wait_for_selector(f"li.approval[data-approval-id='{arrived['approval_id']}']",
                           timeout=15_000)
    assert page.evaluate("window.notReloaded") is True
    assert typing.input_value() == "Half a reas"
    assert page.evaluate("document.activeElement.id") == f"reason-{waiting['approval_id']}"
    assert page.evaluate("document.activeElement.selectionStart") == len("Half a reas") - 1
    page.keyboard.type("o")
    assert typing.input_value() == "Half a reaos"
    assert page.inner_text("#approvals-status") != ""
    # Answered elsewhere meanwhile: the row stays with its text, marked, its buttons off.
    status, _ = world.server.request(
        f"/approval/{waiting['approval_id']}/approve", world.alice.token, method="POST", body={})
    assert status == 200
    kept = row(page, waiting["approval_id"])
    page.wait_for_selector(f"li.approval.gone[data-approval-id='{waiting['approval_id']}']",
                           timeout=15_000)
    assert kept.locator("textarea").input_value() == "Half a reaos"
    assert "No longer waiting" in kept.inner_text()
    assert kept.locator("button", has_text="Approve").is_disabled()
    page.wait_for_selector(f"#resolved tr[data-approval-id='{waiting['approval_id']}']")
    assert page.evaluate("window.notReloaded") is True
    assert_accessible(page, "approvals page after a refresh")


def test_a_run_lists_its_decisions(page: Any, world: World, shots: Path) -> None:  # noqa: F811
    sign_in(page, world.alice)
    page.goto(f"/runs/{world.governed.run_id}#decisions")
    rows = page.locator("table.decisions tbody tr")
    status, listed = world.server.request(
        f"/decision?agent_instance_id={world.governed.run_id}&pagination[page_size]=100",
        world.alice.token)
    assert status == 200
    assert rows.count() == listed["pagination"]["item_count"] >= 8
    denied = page.locator(f"tr[data-decision-id='{world.governed.denied_decision_id}']")
    assert "denied" in denied.inner_text() and "enforce" in denied.inner_text()
    assert "wire transfers are never made by an agent" in denied.inner_text()
    assert page.locator("table.decisions .status-rejected").count() >= 1
    assert page.locator("table.decisions .status-expired").count() == 1
    assert_accessible(page, "run page with decisions")
    page.locator("#decisions").screenshot(path=shots / "run-decisions.png")
    page.click("#decisions >> text=Denied")
    page.wait_for_url("**decision_outcome=deny*")
    assert page.locator("table.decisions tbody tr").count() == 1
    denied.locator("a", has_text="No wire transfers").click()
    page.wait_for_url(f"**/policies/{world.governed.wires_policy_id}")
    assert "No wire transfers" in page.inner_text("h1")


def test_edit_a_policy_see_the_cedar_error_on_its_line_then_save(
    page: Any, world: World, shots: Path  # noqa: F811  (the fixture)
) -> None:
    sign_in(page, world.alice)
    page.click("nav >> text=Policies")
    page.click("table.policies >> text=Run budget")
    page.click("a.button:has-text('Edit')")
    page.fill("#policy-source", BROKEN)
    page.click("button:has-text('Save')")
    page.wait_for_selector("#source-problems")
    assert "Line 3: unexpected token `>`" in page.inner_text("#source-problems ul.problems")
    fault = page.locator("#source-problems li.at-fault")
    assert fault.count() == 1
    assert fault.get_attribute("id") == "line-3"
    assert "context.run.cost_micro_usd >>> 5" in fault.inner_text()
    assert page.input_value("#policy-source") == BROKEN
    assert_accessible(page, "policy form with a Cedar error")
    page.screenshot(path=shots / "policy-error.png", full_page=True)
    page.set_viewport_size(NARROW)
    assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
    assert_accessible(page, "policy form with a Cedar error at 390 px")
    page.screenshot(path=shots / "policy-error-390.png", full_page=True)
    page.set_viewport_size(VIEWPORT)
    page.fill("#policy-source", FIXED)
    page.click("button:has-text('Check the text')")
    page.wait_for_selector("text=The Cedar engine accepts this text.")
    page.click("button:has-text('Save')")
    page.wait_for_url(f"**/policies/{world.governed.budget_policy_id}")
    assert page.inner_text(".flash") == "The policy was saved."
    assert "a run may not spend over 2 USD" in page.inner_text("ol.source-lines")
    status, stored = world.server.request(
        f"/policy/{world.governed.budget_policy_id}", world.alice.token)
    assert status == 200
    assert (stored["details"]["source"], stored["details"]["version"]) == (FIXED, 2)


def test_switch_a_policy_mode_and_back_test_it(page: Any, world: World) -> None:
    policy = world.governed.wires_policy_id
    sign_in(page, world.alice)
    page.goto(f"/policies/{policy}")
    page.check("input[name=mode][value=observe]")
    page.click("button:has-text('Switch mode')")
    page.wait_for_selector(".flash")
    assert page.inner_text(".flash") == "The policy's mode was changed."
    assert page.inner_text("h1 .mode") == "observe"
    assert page.is_checked("input[name=mode][value=observe]")
    status, decided = world.server.request("/decision", world.alice.token, method="POST", body={
        "agent_instance_id": world.governed.run_id,
        "action": {"kind": "tool_call", "name": "wire_transfer", "args": {"amount": 5}},
    })
    assert status == 200
    assert (decided["details"]["outcome"], decided["details"]["observed_outcome"]) == (
        "allow", "deny")
    page.fill("#backtest-days", "7")
    page.click("#backtest button:has-text('Back-test')")
    page.wait_for_selector(".backtest-report")
    status, report = world.server.request("/policy/test", world.alice.token, method="POST",
                                          body={"policy_id": policy, "source": NO_WIRES,
                                                "days": 7})
    shown = page.inner_text(".backtest-report")
    assert f"{report['runs']} runs" in shown and f"{report['spans']} activity spans" in shown
    assert "observe" in shown
    assert_accessible(page, "policy page with a back-test")
    page.check("input[name=mode][value=enforce]")
    page.click("button:has-text('Switch mode')")
    page.wait_for_selector("h1 .mode-enforce")


def every_page(world: World) -> list[tuple[str, str, tuple[int, ...]]]:
    """Every page: (screenshot name, path, the widths whose screenshot is made here).

    The other browser tests make the screenshots of the pages they drive (``run.png`` and
    ``run-390.png`` of the big run, ``trends-390.png`` of a history, ...); this one makes
    the rest, and checks every page at both widths.
    """
    alice, governed = world.alice, world.governed
    wide, narrow = VIEWPORT["width"], NARROW["width"]
    span = f"/runs/{alice.markup_run_id}/spans/{alice.markup_span_id}"
    policy = governed.refunds_policy_id
    return [
        ("overview", "/", (narrow,)), ("agents", "/agents", (narrow,)),
        ("agent", f"/agents/{alice.agent_id}", (narrow,)), ("runs", "/runs", (narrow,)),
        ("run", f"/runs/{alice.playground_run_id}", ()),
        ("run-spans", f"/runs/{alice.running_run_id}/spans", (wide, narrow)),
        ("span", span, (wide,)), ("trends", "/trends", ()), ("alerts", "/alerts", ()),
        ("notifications", "/notifications", (wide, narrow)), ("settings", "/settings", (narrow,)),
        ("approvals", "/approvals", (wide, narrow)), ("policies", "/policies", (wide, narrow)),
        ("policy-new", "/policies/new", (wide, narrow)),
        ("policy-edit", f"/policies/{policy}/edit", (wide, narrow)),
        ("policy-view", f"/policies/{world.long_runs_policy_id}?backtest_days=7", (wide, narrow)),
        ("run-governed", f"/runs/{governed.run_id}", (wide, narrow)),
        ("not-found", "/runs/nothing/here", (wide, narrow)),
        ("use-the-button", f"/policies/{policy}/mode", (wide, narrow)),
    ]


def test_every_page_at_both_widths(
    browser: Any, world: World, shots: Path  # noqa: F811  (the fixtures)
) -> None:
    # Its own context: the 404 and 405 pages are what the page fixture fails on.
    context = browser.new_context(viewport=VIEWPORT, base_url=world.server.base_url)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto("/sign-in")
    page.set_viewport_size(NARROW)
    assert_accessible(page, "/sign-in at 390 px")
    page.screenshot(path=shots / "sign-in-390.png")
    page.set_viewport_size(VIEWPORT)
    sign_in(page, world.alice)
    for name, path, shot_widths in every_page(world):
        answer = page.goto(path)
        assert answer.status in (200, 404, 405), path
        for width in (VIEWPORT["width"], NARROW["width"]):
            page.set_viewport_size({"width": width, "height": 900})
            assert page.evaluate("document.documentElement.scrollWidth") <= width, (path, width)
            assert_accessible(page, f"{path} at {width} px")
            if width in shot_widths:
                suffix = "-390" if width == NARROW["width"] else ""
                page.screenshot(path=shots / f"{name}{suffix}.png", full_page=True)
        page.set_viewport_size(VIEWPORT)
    context.close()
    assert errors == []
