"""The runtime governance pages through falcon's test client: the approvals queue, a run's
decisions, the policies pages; CSRF, escaping and account isolation on each."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.models.policies import MODES
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http.console.approvals import LIVE_SECONDS
from governance_http.console.governance import DECISION_PAGE, args_summary, relative_time
from governance_http.console.policies import MODE_LABELS
from tests.console.governed import LONG_RUNS, Governed, decide, govern
from tests.console.support import Visitor
from tests.console.world import XSS, Account

ESCAPED_XSS = "&lt;script&gt;alert(1)&lt;/script&gt;"
CLOCK = FixedClock(datetime.now(UTC).replace(microsecond=0))


@pytest.fixture
def gov() -> Iterator[Governance]:
    """A store on a clock the tests move (approvals expire)."""
    CLOCK.now = datetime.now(UTC).replace(microsecond=0)
    governance = Governance(MemoryStore(), clock=CLOCK, config=Config(cipher=PlaintextForTests()))
    yield governance
    governance.close()


@pytest.fixture
def governed(alice: Account) -> Governed:
    return govern(alice)


def governance_pages(account: Account, governed: Governed) -> list[str]:
    """Every GET page and fragment of runtime governance, with the account's ids."""
    return [
        "/approvals", "/approvals/live", "/policies", "/policies/new",
        f"/policies/{governed.refunds_policy_id}", f"/policies/{governed.refunds_policy_id}/edit",
        f"/runs/{governed.run_id}",
    ]


def pending_ids(text: str) -> list[str]:
    """The approvals the page lists as waiting, in order."""
    waiting = text.split('id="resolved"')[0]
    return re.findall(r'<li class="approval" data-approval-id="([^"]+)"', waiting)


def status_of(account: Account, approval_id: str) -> str:
    found: str = account.session.details("approvals/show", {"approval_id": approval_id})["status"]
    return found


# -- sessions, CSRF, isolation --------------------------------------------------------------
def test_the_pages_need_a_session_and_answer_once_signed_in(
    visitor: Visitor, alice: Account, governed: Governed
) -> None:
    for path in governance_pages(alice, governed):
        result = visitor.get(path)
        expected = 401 if path.endswith("/live") else 303
        assert result.status_code == expected, path
    visitor.sign_in(alice.token)
    for path in governance_pages(alice, governed):
        result = visitor.get(path)
        assert result.status_code == 200, path
        assert result.headers["content-security-policy"].startswith("default-src 'none'")
        assert "<script>" not in result.text and alice.token not in result.text, path
    fragment = visitor.get("/approvals/live").text
    assert "<html" not in fragment and 'id="pending"' in fragment


def actions(governed: Governed) -> list[tuple[str, dict[str, str]]]:
    """Every runtime governance form action with a valid form (but no CSRF token)."""
    policy = governed.refunds_policy_id
    text = "forbid (principal, action, resource);"
    return [
        (f"/approvals/{governed.pending_approval_ids[0]}/approve", {"reason": "fine"}),
        (f"/approvals/{governed.pending_approval_ids[1]}/reject", {"reason": "no"}),
        ("/policies/new", {"name": "forged", "source": text}),
        (f"/policies/{policy}/edit", {"name": "forged", "source": text}),
        (f"/policies/{policy}/mode", {"mode": "disabled"}),
    ]


def test_every_form_needs_the_session_csrf_token(
    signed_in: Visitor, alice: Account, governed: Governed, gov: Governance
) -> None:
    for path, form in actions(governed):
        for csrf in (None, "forged"):
            sent = form if csrf is None else {**form, "csrf_token": csrf}
            assert signed_in.post(path, sent).status_code == 403, path
        cross_site = signed_in.post(path, {**form, "csrf_token": signed_in.csrf()},
                                    headers={"Origin": "https://evil.example"})
        assert cross_site.status_code == 403, path
        assert signed_in.get(path).status_code in (200, 405), path
    assert [status_of(alice, id_) for id_ in governed.pending_approval_ids] == ["pending"] * 2
    policy = alice.session.details("policies/show", {"policy_id": governed.refunds_policy_id})
    assert (policy["name"], policy["mode"], policy["version"]) == (
        "Refunds need a person", "enforce", 1)
    assert gov.store.count("policies") == 4


def test_an_action_address_opened_as_a_page_says_to_use_the_button(
    signed_in: Visitor, governed: Governed
) -> None:
    for path in (f"/approvals/{governed.pending_approval_ids[0]}/approve",
                 f"/policies/{governed.refunds_policy_id}/mode"):
        answer = signed_in.get(path)
        assert answer.status_code == 405 and answer.headers["allow"] == "POST", path


def test_one_account_never_sees_or_answers_another(
    signed_in: Visitor, alice: Account, bob: Account, governed: Governed
) -> None:
    theirs = govern(bob)
    for path in ("/approvals", "/approvals/live", "/policies"):
        text = signed_in.get(path).text
        for approval_id in theirs.pending_approval_ids:
            assert approval_id not in text, path
        assert theirs.refunds_policy_id not in text, path
    assert len(pending_ids(signed_in.get("/approvals").text)) == 2
    for path in (f"/policies/{theirs.refunds_policy_id}",
                 f"/policies/{theirs.refunds_policy_id}/edit", f"/runs/{theirs.run_id}"):
        assert signed_in.get(path).status_code == 404, path
    for path, form in actions(theirs):
        if path != "/policies/new":
            assert signed_in.act(path, form).status_code == 404, path
    assert [status_of(bob, id_) for id_ in theirs.pending_approval_ids] == ["pending"] * 2
    policy = bob.session.details("policies/show", {"policy_id": theirs.refunds_policy_id})
    assert (policy["mode"], policy["version"]) == ("enforce", 1)


def test_markup_in_policies_arguments_and_reasons_stays_text(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    alice.session.call("policies/create", {
        "name": f"Quoted {XSS}", "description": XSS, "source": f"// {XSS}\n" + (
            'forbid (principal, action == Action::"call_tool", resource == Tool::"x");'),
    })
    signed_in.act(f"/approvals/{governed.pending_approval_ids[0]}/reject", {"reason": XSS})
    for path in ("/approvals", "/approvals/live", "/policies", f"/runs/{governed.run_id}"):
        text = signed_in.get(path).text
        assert XSS not in text and ESCAPED_XSS in text, path
    made = alice.session.call("policies/list", {"sorting": "name"})["summaries"]
    quoted = next(row for row in made if row["name"].startswith("Quoted"))
    for path in (f"/policies/{quoted['id']}", f"/policies/{quoted['id']}/edit"):
        text = signed_in.get(path).text
        assert XSS not in text and text.count(ESCAPED_XSS) >= 3, path


# -- the approvals queue -------------------------------------------------------------------
def test_the_queue_lists_what_waits_with_its_run_arguments_and_expiry(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    text = signed_in.get("/approvals").text
    assert pending_ids(text) == list(governed.pending_approval_ids)  # soonest to expire first
    assert "Waiting for a decision (2)" in text
    assert "refunds over 100 need a person" in text
    assert f'href="/runs/{governed.run_id}#decisions"' in text
    assert "Loan application review agent" in text
    assert "amount: 150 · order: &#34;A-1001&#34;" in text
    assert "&#34;sku&#34;: &#34;LAMP-3&#34;" in text  # every argument, in the folded list
    approval = alice.session.details("approvals/show",
                                     {"approval_id": governed.pending_approval_ids[0]})
    assert approval["digest"][:16] + "…" in text
    assert "(in 59 min)" in text or "(in 1 h)" in text
    assert f"every {LIVE_SECONDS} seconds" in text
    assert 'data-live-url="/approvals/live"' in text
    assert "No approval has been resolved yet." in text


def test_approve_with_a_reason_confirms_once_and_lets_the_action_through_once(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    held = governed.pending_approval_ids[0]
    answer = signed_in.act(f"/approvals/{held}/approve", {"reason": "Customer\r\nverified"})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/approvals?resolved={held}"
    page = signed_in.get(answer.headers["location"]).text
    assert "The action was approved" in page
    assert pending_ids(page) == [governed.pending_approval_ids[1]]
    resolved = page.split('id="resolved"')[1]
    assert f'<tr data-approval-id="{held}" class="selected">' in resolved
    assert "admin@alice.example" in resolved and "Customer\nverified" in resolved
    assert "not yet" in resolved
    assert "The action was approved" not in signed_in.get("/approvals").text
    approval = alice.session.details("approvals/show", {"approval_id": held})
    assert approval["status"] == "approved"
    assert approval["resolution_reason"] == "Customer\nverified"
    assert approval["resolved_by"]["token_id"] == alice.token_id
    allowed = decide(alice.session, governed.run_id, "refund", {"amount": 150, "order": "A-1001"})
    assert allowed["outcome"] == "allow"
    assert "taken " in signed_in.get("/approvals").text.split('id="resolved"')[1]
    again = decide(alice.session, governed.run_id, "refund", {"amount": 150, "order": "A-1001"})
    assert again["outcome"] == "pending_approval"


def test_a_rejection_needs_a_reason_and_the_agent_reads_it(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    held = governed.pending_approval_ids[1]
    for blank in ("", "   "):
        refused = signed_in.act(f"/approvals/{held}/reject", {"reason": blank})
        assert refused.status_code == 422
        assert "a rejection needs a reason" in refused.text
    assert status_of(alice, held) == "pending"
    answer = signed_in.act(f"/approvals/{held}/reject", {"reason": "Refund was paid already"})
    assert answer.status_code == 303
    assert "The action was rejected" in signed_in.get(answer.headers["location"]).text
    shown = alice.session.call("decisions/list", {"agent_instance_id": governed.run_id,
                                                  "outcome": "pending_approval"})["summaries"]
    mine = next(row for row in shown if row["approval_id"] == held)
    read = alice.session.details("decisions/show", {"decision_id": mine["id"]})
    assert read["approval"]["status"] == "rejected"
    assert read["approval"]["resolution_reason"] == "Refund was paid already"
    twice = signed_in.act(f"/approvals/{held}/approve", {"reason": "changed my mind"})
    assert twice.status_code == 409 and "only a pending approval" in twice.text
    assert signed_in.act(f"/approvals/{held}/cancel", {}).status_code == 404


def test_the_live_fragment_follows_new_resolved_and_expired_approvals(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    assert pending_ids(signed_in.get("/approvals/live").text) == list(
        governed.pending_approval_ids)
    later = alice.session.details("decisions/decide", {
        "agent_instance_id": governed.run_id, "expires_in_ms": 600_000,
        "action": {"kind": "tool_call", "name": "refund", "args": {"amount": 999}},
    })
    assert pending_ids(signed_in.get("/approvals/live").text)[0] == later["approval_id"]
    alice.session.call("approvals/approve", {"approval_id": governed.pending_approval_ids[0]})
    fragment = signed_in.get("/approvals/live").text
    assert pending_ids(fragment) == [later["approval_id"], governed.pending_approval_ids[1]]
    assert f'data-approval-id="{governed.pending_approval_ids[0]}"' in fragment
    assert "Expired without an answer" not in fragment
    CLOCK.advance(timedelta(minutes=30))
    fragment = signed_in.get("/approvals/live").text
    assert pending_ids(fragment) == [governed.pending_approval_ids[1]]
    expired = fragment.split('id="expired"')[1]
    assert "Expired without an answer" in fragment and "amount: 999" in expired
    assert 'data-count="1"' in fragment


def test_resolved_approvals_page_latest_first(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    run = governed.run_id
    made = []
    for amount in range(101, 131):
        made.append(decide(alice.session, run, "refund", {"amount": amount})["approval_id"])
    for approval_id in made:
        CLOCK.advance(timedelta(seconds=1))
        alice.session.call("approvals/reject", {"approval_id": approval_id, "reason": "no"})
    first = signed_in.get("/approvals").text.split('id="resolved"')[1]
    rows = re.findall(r'<tr data-approval-id="([^"]+)"', first)
    assert rows == made[::-1][:25]
    assert "1\u201325 of 30" in first and "offset=25#resolved" in first
    second = signed_in.get("/approvals", offset=25).text.split('id="resolved"')[1]
    assert re.findall(r'<tr data-approval-id="([^"]+)"', second) == made[::-1][25:]
    assert "offset=25" in signed_in.get("/approvals", offset=25).text.split("data-live-url=")[1]


# -- a run's decisions ---------------------------------------------------------------------
def decision_rows(text: str) -> list[tuple[str, str]]:
    """Each decision row of a run page: its decision id and its markup."""
    section = text.split('id="decisions"')[1]
    return re.findall(r'<tr data-decision-id="([^"]+)">(.*?)</tr>', section, re.S)


def test_the_run_page_lists_its_decisions_with_policies_mode_and_approval(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    signed_in.act(f"/approvals/{governed.pending_approval_ids[1]}/reject", {"reason": "paid"})
    text = signed_in.get(f"/runs/{governed.run_id}").text
    rows = decision_rows(text)
    stored = alice.session.call("decisions/list", {
        "agent_instance_id": governed.run_id, "sorting": "-decided_at",
    })["summaries"]
    assert [row[0] for row in rows] == [decision["id"] for decision in stored]
    by_id = dict(rows)
    wire = by_id[governed.denied_decision_id]
    assert "wire_transfer" in wire and "outcome-deny" in wire and "denied" in wire
    assert f'href="/policies/{governed.wires_policy_id}">No wire transfers</a>' in wire
    assert "v1" in wire and "wire transfers are never made by an agent" in wire
    assert "<td data-label=\"Mode\">enforce</td>" in wire
    email = next(row for id_, row in rows if "send_email" in row)
    assert "outcome-allow" in email and "observed: would have been denied" in email
    assert "<td data-label=\"Mode\">observe</td>" in email and "No customer email" in email
    held = [row for _, row in rows if "outcome-pending_approval" in row]
    assert len(held) == 2
    assert any("status-pending" in row and 'href="/approvals"' in row for row in held)
    assert any("status-rejected" in row and "paid" in row for row in held)
    small = next(row for _, row in rows if "amount: 40" in row)
    assert "none matched" in small and "<td data-label=\"Mode\">—</td>" in small
    model = next(row for _, row in rows if "gpt-4o-mini" in row)
    assert "Model call" in model and "no arguments" in model


def test_the_run_decisions_filter_by_outcome_and_page(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    denied = decision_rows(signed_in.get(f"/runs/{governed.run_id}",
                                         decision_outcome="deny").text)
    assert [row[0] for row in denied] == [governed.denied_decision_id]
    for index in range(DECISION_PAGE):
        decide(alice.session, governed.run_id, "lookup", {"index": index})
    total = DECISION_PAGE + 6
    first = signed_in.get(f"/runs/{governed.run_id}").text
    assert len(decision_rows(first)) == DECISION_PAGE
    assert f"1\u2013{DECISION_PAGE} of {total}" in first
    assert f"decisions_offset={DECISION_PAGE}#decisions" in first
    second = signed_in.get(f"/runs/{governed.run_id}", decisions_offset=DECISION_PAGE).text
    assert len(decision_rows(second)) == total - DECISION_PAGE
    assert "Spans and timeline" in second  # the tree keeps its own offset
    nothing = signed_in.get(f"/runs/{alice.playground_run_id}").text
    assert "The run has not asked for a decision." in nothing


# -- policies ------------------------------------------------------------------------------
def test_the_policies_list_names_mode_scope_and_version(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    environment = alice.session.call("environments/list")["summaries"][0]
    alice.session.call("policies/update", {
        "policy_id": governed.email_policy_id,
        "scope": {"environment_ids": [environment["id"]], "agent_ids": [alice.agent_id]},
    })
    text = signed_in.get("/policies").text
    names = re.findall(r'<a href="/policies/[^"]+">([^<]+)</a>', text)
    assert names == ["No customer email", "No wire transfers", "Refunds need a person",
                     "Run budget"]
    rows = {match.group(1): match.group(0)
            for match in re.finditer(r'<a href="/policies/([^"]+)">.*?</tr>', text, re.S)}
    email = rows[governed.email_policy_id]
    assert "mode-observe" in email and "environments Default" in email
    assert "agents Loan application review agent" in email
    assert '<td class="num">2</td>' in email
    assert "every run" in rows[governed.refunds_policy_id]
    assert "mode-disabled" in rows[governed.budget_policy_id]


def test_a_policy_page_shows_its_text_by_line_and_its_mode(
    signed_in: Visitor, governed: Governed
) -> None:
    text = signed_in.get(f"/policies/{governed.refunds_policy_id}").text
    lines = re.findall(r"<li><code>(.*?)</code></li>", text)
    assert lines[0] == "@approval(&#34;refunds over 100 need a person&#34;)" and len(lines) == 3
    assert 'value="enforce" checked' in text
    assert "Refunds over 100 wait for an operator&#39;s approval." in text
    for mode in MODES:
        assert f'value="{mode}"' in text


def test_switching_the_mode_changes_what_decisions_say(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    answer = signed_in.act(f"/policies/{governed.wires_policy_id}/mode", {"mode": "observe"})
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/policies/{governed.wires_policy_id}"
    page = signed_in.get(answer.headers["location"]).text
    assert "The policy&#39;s mode was changed." in page and 'value="observe" checked' in page
    wire = decide(alice.session, governed.run_id, "wire_transfer", {"amount": 1})
    assert (wire["outcome"], wire["observed_outcome"]) == ("allow", "deny")
    signed_in.act(f"/policies/{governed.wires_policy_id}/mode", {"mode": "disabled"})
    wire = decide(alice.session, governed.run_id, "wire_transfer", {"amount": 1})
    assert (wire["outcome"], wire["observed_outcome"], wire["reasons"]) == ("allow", "allow", [])
    refused = signed_in.act(f"/policies/{governed.wires_policy_id}/mode", {"mode": "loud"})
    assert refused.status_code == 422 and "mode" in refused.text
    shown = alice.session.details("policies/show", {"policy_id": governed.wires_policy_id})
    assert (shown["mode"], shown["version"]) == ("disabled", 3)


BROKEN = 'forbid (principal, action, resource)\nwhen {\n  context.run.cost_micro_usd >>> 5\n};'


def test_an_edit_the_engine_refuses_shows_its_message_and_line_and_keeps_the_text(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    path = f"/policies/{governed.refunds_policy_id}/edit"
    refused = signed_in.act(path, {"name": "Refunds", "source": BROKEN.replace("\n", "\r\n")})
    assert refused.status_code == 422
    text = refused.text
    assert '<a href="#line-3">Line 3</a>: unexpected token `&gt;`' in text
    assert re.search(r'<li id="line-3" class="at-fault"><code>  context.run.cost_micro_usd '
                     r"&gt;&gt;&gt; 5</code><span class=\"line-problem\">unexpected token", text)
    assert '<li id="line-2"><code>when {</code></li>' in text
    assert ">\n" + BROKEN.replace(">", "&gt;") + "</textarea>" in text
    assert 'value="Refunds"' in text and 'aria-invalid="true"' in text
    schema = signed_in.act(path, {"name": "Refunds", "source":
                                  "forbid (principal, action, resource)\n"
                                  "when { context.run.cost > 5 };"})
    assert schema.status_code == 422
    assert "Line 1</a>: attribute `run.cost` in context not found" in schema.text
    stored = alice.session.details("policies/show", {"policy_id": governed.refunds_policy_id})
    assert stored["version"] == 1 and stored["name"] == "Refunds need a person"


def test_check_then_save_an_edit(signed_in: Visitor, alice: Account, governed: Governed) -> None:
    path = f"/policies/{governed.refunds_policy_id}/edit"
    source = REFUNDS_OVER_200
    checked = signed_in.act(path, {"name": "Refunds over 200", "source": source,
                                   "intent": "check"})
    assert checked.status_code == 200 and "The Cedar engine accepts this text." in checked.text
    assert alice.session.details("policies/show",
                                 {"policy_id": governed.refunds_policy_id})["version"] == 1
    bad_check = signed_in.act(path, {"name": "x", "source": BROKEN, "intent": "check"})
    assert bad_check.status_code == 200 and "Line 3</a>" in bad_check.text
    saved = signed_in.act(path, {"name": "Refunds over 200", "source": source,
                                 "description": ""})
    assert saved.status_code == 303
    page = signed_in.get(saved.headers["location"]).text
    assert "The policy was saved." in page and "<dt>Version</dt><dd>2</dd>" in page
    stored = alice.session.details("policies/show", {"policy_id": governed.refunds_policy_id})
    assert (stored["name"], stored["source"], stored["description"]) == (
        "Refunds over 200", source, None)
    assert decide(alice.session, governed.run_id, "refund", {"amount": 150})["outcome"] == "allow"
    unchanged = signed_in.act(path, {"name": "Refunds over 200", "source": source})
    assert unchanged.status_code == 303
    assert alice.session.details("policies/show",
                                 {"policy_id": governed.refunds_policy_id})["version"] == 2


REFUNDS_OVER_200 = (
    '@approval("refunds over 200 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 200 };"
)


def test_create_a_policy_with_a_scope(signed_in: Visitor, alice: Account) -> None:
    form = signed_in.get("/policies/new").text
    assert 'name="agent_ids"' in form and "What a policy can read" in form
    environment = alice.session.call("environments/list")["summaries"][0]["id"]
    missing = signed_in.act("/policies/new", {"name": "", "source": ""})
    assert missing.status_code == 422 and "<code>name</code>" in missing.text
    other = alice.session.details("agents/create", {"name": "Second agent"})["id"]
    made = signed_in.post("/policies/new", [
        ("name", "Only here"), ("mode", "observe"), ("environment_ids", environment),
        ("agent_ids", alice.agent_id), ("agent_ids", other),
        ("source", "forbid (principal, action, resource);"), ("csrf_token", signed_in.csrf()),
    ])
    assert made.status_code == 303
    policy_id = made.headers["location"].rsplit("/", 1)[1]
    stored = alice.session.details("policies/show", {"policy_id": policy_id})
    assert stored["mode"] == "observe"
    assert stored["scope"] == {"environment_ids": [environment],
                               "agent_ids": [alice.agent_id, other]}
    page = signed_in.get(made.headers["location"]).text
    assert "The policy was created." in page
    assert "environments Default" in page
    assert "agents Loan application review agent, Second agent" in page
    untick = signed_in.act(f"/policies/{policy_id}/edit", {
        "name": "Only here", "source": stored["source"]})
    assert untick.status_code == 303
    assert alice.session.details("policies/show", {"policy_id": policy_id})["scope"] == {
        "environment_ids": [], "agent_ids": []}


# -- back-tests ---------------------------------------------------------------------------
def stopped_runs(text: str) -> list[str]:
    section = text.split("Runs it would have stopped")[1].split("Spans it would have stopped")[0]
    return re.findall(r'<td data-label="Run" class="nowrap"><a href="/runs/([^"]+)">', section)


def test_back_test_a_saved_policy_from_its_page(
    signed_in: Visitor, alice: Account, governed: Governed, gov: Governance
) -> None:
    made = alice.session.details("policies/create", {
        "name": "Short runs", "mode": "observe", "source": LONG_RUNS})
    assert "backtest-report" not in signed_in.get(f"/policies/{made['id']}").text
    decisions = gov.store.count("decisions")
    text = signed_in.get(f"/policies/{made['id']}", backtest_days="7").text
    report = alice.session.call("policies/test", {
        "policy_id": made["id"], "source": LONG_RUNS, "days": 7, "limit": 20})
    assert report["stopped_runs"]["count"] >= 1
    assert (f"<strong>{report['runs']}</strong> runs, <strong>{report['spans']}</strong> "
            "activity spans judged") in text
    assert "in <strong>observe</strong> mode" in text
    observed = report["observed_outcomes"]
    assert f"denied {observed['deny']}, held {observed['pending_approval']}" in text
    assert stopped_runs(text) == [
        item["agent_instance_id"] for item in report["stopped_runs"]["items"]]
    assert "a run may call a model only in its first six spans" in text
    assert gov.store.count("decisions") == decisions  # a back-test writes nothing
    refused = signed_in.get(f"/policies/{made['id']}", backtest_days="900").text
    assert "<code>days</code>: days must be from 1 to 90" in refused


def test_back_test_the_text_being_edited(
    signed_in: Visitor, alice: Account, governed: Governed
) -> None:
    path = f"/policies/{governed.refunds_policy_id}/edit"
    tested = signed_in.act(path, {"name": "Refunds", "source": LONG_RUNS, "intent": "backtest",
                                  "backtest_days": "3"})
    assert tested.status_code == 200 and "Back-test of this text" in tested.text
    report = alice.session.call("policies/test", {
        "policy_id": governed.refunds_policy_id, "source": LONG_RUNS, "days": 3, "limit": 20})
    assert stopped_runs(tested.text) == [
        item["agent_instance_id"] for item in report["stopped_runs"]["items"]]
    assert "in <strong>enforce</strong> mode" in tested.text
    assert f"denied</span> {report['outcomes']['deny']}" in tested.text
    assert ">\n" + LONG_RUNS.replace(">", "&gt;").replace('"', "&#34;") + "</textarea>" in (
        tested.text)
    stored = alice.session.details("policies/show", {"policy_id": governed.refunds_policy_id})
    assert stored["version"] == 1 and stored["source"] != LONG_RUNS
    new = signed_in.act("/policies/new", {"name": "", "source": LONG_RUNS, "mode": "observe",
                                          "intent": "backtest"})
    assert new.status_code == 200 and "in <strong>observe</strong> mode" in new.text
    disabled = signed_in.act("/policies/new", {"name": "", "source": LONG_RUNS,
                                               "mode": "disabled", "intent": "backtest"})
    assert "<code>mode</code>" in disabled.text and "backtest-report" not in disabled.text


# -- helpers -------------------------------------------------------------------------------
def test_arguments_read_on_one_line_and_times_relative_to_now() -> None:
    assert args_summary({"amount": 150, "to": "a@b"}) == 'amount: 150 · to: "a@b"'
    assert args_summary({}) == "no arguments" and args_summary(None) == "no arguments"
    long = args_summary({"text": "x" * 500})
    assert len(long) == 160 and long.endswith("…")
    now = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
    assert relative_time("2026-03-01T12:42:10Z", now) == "in 42 min"
    assert relative_time("2026-03-01T09:00:00Z", now) == "3 h ago"
    assert relative_time("2026-03-01T12:00:20Z", now) == "in under a minute"
    assert relative_time("2026-03-05T12:00:00Z", now) == "in 4 days"
    assert set(MODE_LABELS) == set(MODES)


def test_the_new_policy_address_is_no_policy_id(signed_in: Visitor) -> None:
    assert "New policy" in signed_in.get("/policies/new").text
    assert signed_in.get("/policies/nothing").status_code == 404
    assert signed_in.get("/approvals/x/y/z").status_code == 404
