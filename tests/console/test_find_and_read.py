"""Finding a step of a run (name, duration, cost, failed ancestors, next/previous), reading a
model call as a conversation, the timeline's axis and zoom, and the console's own pages for
unknown and action addresses."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.context import Config
from governance_core.domain import insights
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance, Session
from governance_http.console.charts import time_axis
from governance_http.console.conversation import Part, Turn, conversation
from tests.console.support import Visitor
from tests.console.world import Account
from tests.stores import make_store

ROW_ID = re.compile(r'<div class="span[^"]*" data-span-id="([0-9a-z]+)"')
MATCH_ID = re.compile(r'<tr class="match" data-span-id="([0-9a-z]+)"')


T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def shape(turns: list[Turn] | None) -> list[tuple[str, list[tuple[Any, ...]]]]:
    assert turns is not None
    return [
        (turn.role, [(part.kind, part.text or part.name or part.value, part.pointer)
                     for part in turn.parts])
        for turn in turns
    ]


# -- conversation ----------------------------------------------------------------------------
def test_openai_messages_tool_calls_and_choices_read_in_order() -> None:
    payload = {"model": "gpt-4o", "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Income of A-1?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "income", "arguments": "{\"id\": \"A-1\"}"}},
        ]},
        {"role": "tool", "tool_call_id": "c1", "content": "56,400"},
    ]}
    result = {"choices": [{"message": {"role": "assistant", "content": "56,400 a year."}}]}
    assert shape(conversation(payload, result)) == [
        ("system", [("text", "Be brief.", "")]),
        ("user", [("text", "Income of A-1?", "")]),
        ("assistant", [("tool_call", "income",
                        "/payload/messages/2/tool_calls/0/function/arguments")]),
        ("tool", [("text", "56,400", "")]),
        ("assistant", [("text", "56,400 a year.", "")]),
    ]
    assert conversation(payload, result)[3].call_id == "c1"  # type: ignore[index]


def test_anthropic_system_blocks_tool_use_and_answer_blocks() -> None:
    payload = {"system": [{"type": "text", "text": "You assess loans."}], "messages": [
        {"role": "user", "content": "Assess A-1"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "t1", "name": "bureau", "input": {"id": "A-1"}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                      "content": "score 712"}]},
    ]}
    result = {"content": [{"type": "text", "text": "Refer."}], "usage": {"input_tokens": 3}}
    turns = conversation(payload, result)
    assert shape(turns) == [
        ("system", [("text", "You assess loans.", "")]),
        ("user", [("text", "Assess A-1", "")]),
        ("assistant", [("text", "Checking.", ""),
                       ("tool_call", "bureau", "/payload/messages/1/content/1/input")]),
        ("user", [("tool_result", "score 712", "/payload/messages/2/content/0/content")]),
        ("assistant", [("text", "Refer.", "")]),
    ]
    assert turns is not None and turns[2].parts[1].call_id == "t1"
    assert turns[3].parts[0].call_id == "t1"


def test_genai_messages_as_json_text_and_as_dotted_keys() -> None:
    messages = [{"role": "user", "parts": [{"type": "text", "content": "Hello"}]},
                {"role": "assistant", "parts": [
                    {"type": "tool_call", "id": "x", "name": "lookup", "arguments": {"q": 1}}]},
                {"role": "tool", "parts": [
                    {"type": "tool_call_response", "id": "x", "response": "found"}]}]
    output = [{"role": "assistant", "parts": [{"type": "text", "content": "Done"}]}]
    payload = {"gen_ai.system_instructions": json.dumps([{"type": "text", "content": "Rules"}]),
               "gen_ai.input.messages": json.dumps(messages)}
    expected = [
        ("system", [("text", "Rules", "")]),
        ("user", [("text", "Hello", "")]),
        ("assistant", [("tool_call", "lookup", "")]),
        ("tool", [("tool_result", "found", "")]),
        ("assistant", [("text", "Done", "")]),
    ]
    assert shape(conversation(payload, {"gen_ai.output.messages": json.dumps(output)})) == expected
    nested = {"gen_ai": {"system_instructions": [{"type": "text", "content": "Rules"}],
                         "input": {"messages": messages}}}
    turns = conversation(nested, {"gen_ai": {"output": {"messages": output}}})
    assert [turn.role for turn in turns or []] == [role for role, _ in expected]
    assert turns is not None and turns[2].parts[0].pointer == (
        "/payload/gen_ai/input/messages/1/parts/0/arguments"
    )


def test_a_sensitive_message_stays_a_marker_with_its_pointer() -> None:
    marker = {"$sensitive": "string", "labels": ["pii"]}
    turns = conversation({"gen_ai.input.messages": marker, "messages": [
        {"role": "user", "content": marker}]}, {"content": marker})
    assert shape(turns) == [
        ("user", [("value", marker, "/payload/messages/0/content")]),
        ("user", [("value", marker, "/payload/gen_ai.input.messages")]),
        ("assistant", [("value", marker, "/result_payload/content")]),
    ]


def test_only_a_prompt_or_a_model_call_makes_a_conversation() -> None:
    assert conversation({"tool": "lookup"}, {"content": "a tool's output"}) is None
    assert conversation({"model": "m"}, {"content": "Hi"}, model_call=True) == [
        Turn("assistant", (Part("text", text="Hi"),))
    ]
    assert shape(conversation({"prompt": "Review"}, {"completion": "Fine"})) == [
        ("user", [("text", "Review", "")]), ("assistant", [("text", "Fine", "")]),
    ]
    assert conversation({"messages": [None, 3, {"role": "user"}]}, None) == [
        Turn("user", (Part("value", value=3, pointer="/payload/messages/1"),))
    ]


# -- timeline axis ---------------------------------------------------------------------------
@pytest.mark.parametrize(("seconds", "labels"), [
    (0.3, ["0", "100 ms", "200 ms", "300 ms"]),
    (2.5, ["0", "500 ms", "1.0 s", "1.5 s", "2.0 s", "2.5 s"]),
    (19.7, ["0", "5 s", "10 s", "15 s"]),
    (900, ["0", "5 min", "10 min", "15 min"]),
    (4 * 3600, ["0", "1 h", "2 h", "3 h", "4 h"]),
    (3 * 86400, ["0", "1 d", "2 d", "3 d"]),
    (30 * 86400, ["0", "6 d", "12 d", "18 d", "24 d", "30 d"]),
])
def test_the_time_axis_takes_a_round_step(seconds: float, labels: list[str]) -> None:
    ticks = time_axis((T0, T0 + timedelta(seconds=seconds)))
    assert [tick.label for tick in ticks] == labels
    assert ticks[0].at == 0 and all(0 <= tick.at <= 100 for tick in ticks)
    assert ticks == sorted(ticks, key=lambda tick: tick.at)


# -- finding the step ------------------------------------------------------------------------
SCHEMA = {"external_identifier": "steps", "span_type_schemas": [
    {"name": "step", "params_schema": {"type": "object"}},
    {"name": "llm", "params_schema": {"type": "object"}},
]}


def make_run(session: Session, agent_id: str) -> dict[str, Any]:
    """Three steps of three model calls; step 1's second call failed, and step 2's third call
    has a child that failed. Calls take 1, 2, 3 s and cost more as they go."""
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    start = parse_timestamp(run["inserted_at"])

    def at(seconds: float) -> str:
        return format_timestamp(start + timedelta(seconds=seconds))

    made: dict[str, Any] = {"run": run["id"], "steps": [], "calls": []}
    for step_index in range(3):
        step = session.details("agent_spans/create", {
            "agent_instance_id": run["id"], "schema_name": "step", "status": "complete",
            "payload": {"n": step_index}, "started_at": at(step_index * 10),
            "finished_at": at(step_index * 10 + 9),
        })
        made["steps"].append(step["id"])
        for call in range(3):
            span = session.details("agent_spans/create", {
                "agent_instance_id": run["id"], "schema_name": "llm", "parent_span_id": step["id"],
                "status": "failed" if (step_index, call) == (1, 1) else "complete",
                "payload": {"model": "gpt-4o" if call == 2 else "gpt-4o-mini",
                            "messages": [{"role": "user", "content": f"q{step_index}{call}"}]},
                "result_payload": {"usage": {"input_tokens": 1000 * (call + 1),
                                             "output_tokens": 10}},
                "started_at": at(step_index * 10 + call * 3),
                "finished_at": at(step_index * 10 + call * 3 + call + 1),
            })
            made["calls"].append(span["id"])
    made["deep"] = session.details("agent_spans/create", {
        "agent_instance_id": run["id"], "schema_name": "step", "status": "failed",
        "parent_span_id": made["calls"][8], "payload": {"n": 99},
        "started_at": at(27), "finished_at": at(27.5),
    })["id"]
    return made


@pytest.fixture
def steps(alice: Account) -> dict[str, Any]:
    agent = alice.session.details("agents/create", {"name": "steps agent"})
    return make_run(alice.session, agent["id"])


def test_the_tree_marks_the_ancestors_of_failed_spans_and_leaves(
    signed_in: Visitor, steps: dict[str, Any]
) -> None:
    page = signed_in.get(f"/runs/{steps['run']}").text
    rows = re.split(r'(?=<div class="span[ "])', page[page.index('id="span-tree"'):])[1:]
    marked = [ROW_ID.findall(row)[0] for row in rows if "failed below" in row]
    assert marked == steps["steps"][1:]
    calls = signed_in.get(f"/runs/{steps['run']}/spans", parent=steps["steps"][2],
                          depth=1, fragment=1).text
    # The third call has the failed child: it is marked and expands; the others are leaves.
    assert ROW_ID.findall(calls) == steps["calls"][6:]
    assert calls.count("failed below") == 1 and calls.count('class="expander"') == 1
    assert calls.count('<div class="span leaf"') == 2
    # Model, tokens and cost show on each model call's row.
    assert "gpt-4o-mini</span> <span class=\"tokens\">1,000 in · 10 out" in calls


def test_failed_ancestors_are_bounded(
    gov: Governance, alice: Account, steps: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    context = gov.context(alice.session.principal)
    found, stopped = insights.failed_span_ancestors(context, steps["run"])
    assert found == {steps["steps"][1], steps["steps"][2], steps["calls"][8]} and not stopped
    monkeypatch.setattr(insights, "FAILED_SPANS_TRACED", 1)
    found, stopped = insights.failed_span_ancestors(context, steps["run"])
    assert found == {steps["steps"][1]} and stopped
    monkeypatch.setattr(insights, "FAILED_SPANS_TRACED", 10)
    monkeypatch.setattr(insights, "ANCESTORS_READ", 2)
    found, stopped = insights.failed_span_ancestors(context, steps["run"])
    assert len(found) == 2 and stopped
    assert insights.child_counts(context, [*steps["steps"], steps["calls"][0]]) == dict.fromkeys(
        steps["steps"], 3
    )


@pytest.mark.parametrize("kind", ["memory", "sqlite", "postgres"])
def test_the_span_reads_agree_on_every_store(kind: str) -> None:
    gov = Governance(make_store(kind), config=Config(cipher=PlaintextForTests()))
    try:
        boot = gov.bootstrap(account_name="stores", admin_email="admin@stores.example")
        session = gov.session(boot.token)
        made = make_run(session, session.details("agents/create", {"name": "a"})["id"])
        context = gov.context(session.principal)
        assert insights.failed_span_ancestors(context, made["run"]) == (
            frozenset({made["steps"][1], made["steps"][2], made["calls"][8]}), False
        )
        assert insights.child_counts(context, [*made["steps"], made["calls"][8]]) == {
            **dict.fromkeys(made["steps"], 3), made["calls"][8]: 1,
        }
        in_order = [made["steps"][0], *made["calls"][:3], made["steps"][1], *made["calls"][3:6],
                    made["steps"][2], *made["calls"][6:9], made["deep"]]
        records = insights.run_spans_by_start(context, made["run"], limit=100)
        assert [record["id"] for record in records] == in_order
        failed = insights.run_spans_by_start(context, made["run"], status="failed",
                                             schema_name="llm", limit=100)
        assert [record["id"] for record in failed] == [made["calls"][4]]
        assert len(insights.run_spans_by_start(context, made["run"], limit=3)) == 3
    finally:
        gov.close()


def test_another_accounts_run_marks_nothing(
    gov: Governance, bob: Account, steps: dict[str, Any]
) -> None:
    context = gov.context(bob.session.principal)
    assert insights.failed_span_ancestors(context, steps["run"]) == (frozenset(), False)
    assert insights.child_counts(context, steps["steps"]) == {}
    assert insights.run_spans_by_start(context, steps["run"], limit=10) == []


@pytest.mark.parametrize(("params", "picked"), [
    ({"q": "GPT-4O-MINI"}, ["c0", "c1", "c3", "c4", "c6", "c7"]),
    ({"q": "Step"}, ["s0", "s1", "s2", "deep"]),
    ({"q": "llm", "status": "failed"}, ["c4"]),
    ({"min_duration": "2", "type": "llm"}, ["c1", "c2", "c4", "c5", "c7", "c8"]),
    ({"min_duration": "2.5"}, ["s0", "c2", "s1", "c5", "s2", "c8"]),
    ({"min_cost": "0.0005"}, ["c2", "c5", "c8"]),
    ({"min_cost": "$0.0005", "status": "failed"}, []),
    ({"q": "gpt", "status": "failed", "min_duration": "1"}, ["c4"]),
])
def test_find_spans_by_name_duration_and_cost(
    signed_in: Visitor, steps: dict[str, Any], params: dict[str, str], picked: list[str]
) -> None:
    names = {f"s{index}": span for index, span in enumerate(steps["steps"])}
    names |= {f"c{index}": span for index, span in enumerate(steps["calls"])}
    names["deep"] = steps["deep"]
    page = signed_in.get(f"/runs/{steps['run']}", **params).text
    assert MATCH_ID.findall(page) == [names[name] for name in picked]
    assert f"({len(picked)})</h2>" in page


def test_the_text_duration_and_cost_filters_stop_at_their_bound(
    signed_in: Visitor, steps: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from governance_http.console import pages

    monkeypatch.setattr(pages, "MATCH_SCAN", 4)
    page = signed_in.get(f"/runs/{steps['run']}", q="gpt-4o-mini").text
    # Time order: step 0, its three calls; the first four hold two gpt-4o-mini calls.
    assert MATCH_ID.findall(page) == steps["calls"][:2]
    assert "Only the first 4 spans in time order were searched" in page


@pytest.mark.parametrize(("params", "field"), [
    ({"min_duration": "soon"}, "min_duration"), ({"min_duration": "-1"}, "min_duration"),
    ({"min_cost": "NaN"}, "min_cost"), ({"min_cost": "1" * 40}, "min_cost"),
    ({"q": "x" * 201}, "q"),
])
def test_an_unreadable_filter_is_named_on_the_page(
    signed_in: Visitor, steps: dict[str, Any], params: dict[str, str], field: str
) -> None:
    result = signed_in.get(f"/runs/{steps['run']}", **params)
    assert result.status_code == 200
    assert re.search(rf'<ul class="problems" role="alert"><li><code>{field}</code>: {field} must',
                     result.text)


def test_a_match_links_to_the_previous_and_next_matches(
    signed_in: Visitor, steps: dict[str, Any]
) -> None:
    calls = steps["calls"]
    base = f"/runs/{steps['run']}/spans"
    first = signed_in.get(f"{base}/{calls[2]}", min_cost="0.0005", at="0", fragment="1").text
    assert "Match 1 of 3" in first and 'rel="prev"' not in first
    assert f'rel="next" href="{base}/{calls[5]}?min_cost=0.0005&amp;at=1"' in first
    middle = signed_in.get(f"{base}/{calls[5]}", min_cost="0.0005", at="1").text
    assert f'rel="prev" href="{base}/{calls[2]}?min_cost=0.0005&amp;at=0"' in middle
    assert f'rel="next" href="{base}/{calls[8]}?min_cost=0.0005&amp;at=2"' in middle
    last = signed_in.get(f"{base}/{calls[8]}", status="complete", type="llm", at="7").text
    assert "Match 8 of 8" in last and 'rel="next"' not in last
    # A position that no longer holds this span shows no links rather than wrong ones.
    assert "match-nav" not in signed_in.get(f"{base}/{calls[8]}", min_cost="0.0005", at="0").text


def test_the_span_page_reads_the_conversation_and_the_call(
    signed_in: Visitor, steps: dict[str, Any]
) -> None:
    text = signed_in.get(f"/runs/{steps['run']}/spans/{steps['calls'][2]}").text
    assert re.search(r'<li class="turn turn-user">\s*<div class="role">user</div>\s*'
                     r'<div class="turn-text">q02</div>', text)
    assert "<dt>Model</dt><dd>gpt-4o" in text
    assert "3,000 input · 10 output · 0 cache read" in text
    assert "<dt>Latency</dt><dd>3.0 s</dd>" in text


def test_a_sensitive_message_is_redacted_until_revealed(
    signed_in: Visitor, alice: Account, gov: Governance
) -> None:
    span = alice.session.details("agent_spans/create", {
        "agent_instance_id": alice.markup_run_id, "schema_name": "tool", "status": "complete",
        "sensitive_encoding": True,
        "payload": {"messages": [{"role": "user", "content": {
            "$sensitive": "string", "labels": ["pii"], "value": "My NI is QQ123456C"}}]},
    })
    path = f"/runs/{alice.markup_run_id}/spans/{span['id']}"
    text = signed_in.get(path).text
    chat = text[text.index('<ol class="chat">'):text.index("</ol>")]
    assert "[redacted string: pii]" in chat and "QQ123456C" not in text
    assert 'name="pointer" value="/payload/messages/0/content"' in chat
    shown = signed_in.act(f"{path}/reveal", {"pointer": "/payload/messages/0/content"})
    page = signed_in.get(shown.headers["Location"]).text
    chat = page[page.index('<ol class="chat">'):page.index("</ol>")]
    assert "My NI is QQ123456C" in chat
    assert gov.store.count("sensitive_reveals") == 1


# -- zoom ------------------------------------------------------------------------------------
def test_zoom_shows_a_span_subtree_on_its_own_time(
    signed_in: Visitor, steps: dict[str, Any], bob: Account
) -> None:
    run, step = steps["run"], steps["steps"][1]
    whole = signed_in.get(f"/runs/{run}").text
    assert f'href="/runs/{run}?zoom={step}#spans"' in whole
    zoomed = signed_in.get(f"/runs/{run}", zoom=step).text
    assert ROW_ID.findall(zoomed) == [step]
    assert re.search(r'width="100\.0"|width="100"', zoomed)
    labels = re.findall(r'<text x="[\d.]+%" y="10" text-anchor="\w+">([^<]+)</text>', zoomed)
    assert labels == ["0", "2 s", "4 s", "6 s", "8 s"]
    # Its children load on the zoomed axis: the first call (0-1 s of a 9 s step).
    children = signed_in.get(f"/runs/{run}/spans", parent=step, depth=1, zoom=step,
                             fragment=1).text
    assert 'x="0.0" y="1" width="11.111"' in children
    # Deeper levels keep the window: the last step's last call has a child.
    last = steps["steps"][2]
    calls = signed_in.get(f"/runs/{run}/spans", parent=last, depth=1, zoom=last,
                          fragment=1).text
    assert f"?zoom={last}&amp;parent={steps['calls'][8]}&amp;depth=2&amp;fragment=1" in calls
    first = steps["steps"][0]
    # An id of the same shape naming no span: the first character of its random part changed.
    # (Not the last: ids made in one millisecond count up from each other there, so a last
    # character moved by one names the span made just before or after.)
    unknown = first[:16] + ("1" if first[16] == "0" else "0") + first[17:]
    assert signed_in.get(f"/runs/{run}", zoom=unknown).status_code == 404
    other = bob.session.details("agent_spans/create", {
        "agent_instance_id": bob.running_run_id, "schema_name": "tool", "status": "complete",
        "payload": {},
    })
    assert signed_in.get(f"/runs/{run}", zoom=other["id"]).status_code == 404


# -- copy, flash, console pages for other addresses --------------------------------------------
def test_ids_carry_a_copy_button_with_the_full_id(signed_in: Visitor, alice: Account) -> None:
    page = signed_in.get(f"/runs/{alice.running_run_id}").text
    assert (f'<button type="button" class="copy" data-copy="{alice.running_run_id}" '
            f'aria-label="Copy the full id {alice.running_run_id}">Copy</button>') in page
    alerts = signed_in.get("/alerts").text
    assert f'data-copy="{alice.running_run_id}"' in alerts


def test_clearing_an_alert_confirms_once_after_the_redirect(
    signed_in: Visitor, alice: Account
) -> None:
    cleared = signed_in.act("/alerts/clear", {
        "agent_instance_id": alice.running_run_id, "name": "affordability_concern",
        "next": "/alerts",
    })
    assert cleared.status_code == 303
    shown = signed_in.get("/alerts").text
    assert '<p class="flash" role="status">The alert was cleared.</p>' in shown
    assert "flash" not in signed_in.get("/alerts").text


def test_a_fragment_leaves_the_confirmation_for_the_page(
    signed_in: Visitor, alice: Account
) -> None:
    signed_in.cookies["governance_flash"] = "alert_cleared"
    assert "flash" not in signed_in.get(f"/runs/{alice.running_run_id}/live").text
    assert "The alert was cleared." in signed_in.get("/alerts").text
    signed_in.cookies["governance_flash"] = "<b>made up</b>"
    assert "made up" not in signed_in.get("/alerts").text


@pytest.mark.parametrize("path", ["/runs/x/y/z", "/nowhere", "/settings/tokens/a/b/c",
                                  "/agents/x/y"])
def test_unknown_console_addresses_get_a_console_page(signed_in: Visitor, path: str) -> None:
    result = signed_in.get(path)
    assert result.status_code == 404 and result.headers["content-type"].startswith("text/html")
    assert "<h1>Page not found</h1>" in result.text and 'class="sign-out"' in result.text


def test_api_and_file_addresses_keep_their_answers(signed_in: Visitor) -> None:
    for path in ("/api/v1/nowhere", "/api", "/static/console/nothing.css"):
        result = signed_in.get(path)
        assert result.status_code == 404 and "json" in result.headers["content-type"], path
    assert signed_in.get("/static/console/console.css").status_code == 200


def test_an_unknown_address_signed_out_goes_to_the_sign_in(visitor: Visitor) -> None:
    result = visitor.get("/runs/x/y/z")
    assert result.status_code == 303 and result.headers["Location"].startswith("/sign-in?")


@pytest.mark.parametrize("path", [
    "/runs/{run}/terminate", "/alerts/clear", "/runs/{run}/spans/{span}/reveal",
    "/settings/tokens", "/settings/tokens/{token}/revoke", "/sign-out",
])
def test_opening_an_action_address_says_to_use_its_button(
    signed_in: Visitor, alice: Account, path: str
) -> None:
    address = path.format(run=alice.markup_run_id, span=alice.markup_span_id,
                          token=alice.token_id)
    result = signed_in.get(address)
    assert result.status_code == 405 and result.headers["allow"] == "POST"
    assert "<h1>Use the button on the page</h1>" in result.text
    run = alice.session.details("agent_instances/show", agent_instance_id=alice.markup_run_id)
    assert run["status"] != "terminated"
