"""Recorded spans as actions, the run's figures span by span, and the engine's shortcuts."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.policies.deciding import (
    Action,
    compile_policies,
    policy_context,
    run_request,
)
from governance_core.policies.engine import CompiledSet, compile_source
from governance_core.policies.recorded import _RUN_FIGURES, RecordedJudge, recorded_action
from governance_core.policies.schema import RUN_ATTRIBUTES
from governance_core.rules.cost import Usage
from governance_core.rules.token_groups import span_usage
from tests.policies.recording import READS_EVERY_FIGURE, model_call, record
from tests.policies.support import RunWorld


def span(schema_name: str, payload: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "s", "schema_name": schema_name, "payload": payload or {}}


USAGE = Usage("gpt-4o", None, 10, 5, 0)


@pytest.mark.parametrize(("recorded", "usage", "action"), [
    (span("tool:refund", {"amount": 5}), None,
     Action("tool_call", "refund", {"amount": 5}, "tool:refund")),
    (span("openinference:tool", {"tool.name": "lookup", "input.value": '{"id": 7}'}), None,
     Action("tool_call", "lookup", {"id": 7}, "openinference:tool")),
    (span("traceloop:tool", {"input.value": "not json"}), None,
     Action("tool_call", "traceloop:tool", {"input.value": "not json"}, "traceloop:tool")),
    (span("llm", {"prompt": "hi"}), USAGE,
     Action("model_call", "gpt-4o", {"prompt": "hi"}, "llm")),
    (span("gen_ai:chat", {"gen_ai.request.model": "claude"}), None,
     Action("model_call", "claude", {"gen_ai.request.model": "claude"}, "gen_ai:chat")),
    (span("ai:generate_text.do_generate"), None,
     Action("model_call", "unknown", {}, "ai:generate_text.do_generate")),
    (span("crm.read_order", {"order": 1}), None,
     Action("span", "crm.read_order", {"order": 1}, "crm.read_order")),
])
def test_a_recorded_span_is_the_action_it_records(
    recorded: dict[str, Any], usage: Usage | None, action: Action
) -> None:
    assert recorded_action(recorded, usage) == action
    assert recorded_action(recorded, usage, with_args=False) == Action(
        action.kind, action.name, {}, action.span_type
    )


def test_sensitive_values_given_stand_for_their_markers() -> None:
    stored = span("tool:pay", {"to": {"$sensitive": "string", "labels": []},
                               "amount": {"$sensitive": "number", "labels": []}})
    action = recorded_action(stored, None, values={"/amount": 30})
    assert action.args == {"to": {"$sensitive": "string", "labels": []}, "amount": 30}


def test_the_run_figures_name_the_schema() -> None:
    assert [name for name, _ in _RUN_FIGURES] == list(RUN_ATTRIBUTES)


def test_a_context_keeps_only_what_policies_read() -> None:
    action = Action("tool_call", "x", {"a": 1})
    run = {"span_count": 3, "tool_calls": 1}
    assert policy_context(action, run, 5, {"span_count"}) == {"run": {"span_count": 3}}
    assert policy_context(action, run, 5, {"args", "a", "run"}) == {"args": {"a": 1},
                                                                   "run": run}
    assert policy_context(action, run, 5, {"cost_today_micro_usd"}) == {
        "agent": {"cost_today_micro_usd": 5}}


HEADS = """
forbid (principal, action == Action::"call_model", resource);
forbid (principal == Agent::"a", action in [Action::"call_tool"], resource == Tool::"x");
forbid (principal is Agent, action, resource is Tool in Tool::"y");
"""


@pytest.mark.parametrize(("action", "resource", "may"), [
    ("call_model", ("Model", "m"), True),
    ("call_tool", ("Tool", "x"), True),
    ("call_tool", ("Tool", "y"), True),
    ("call_tool", ("Tool", "z"), False),
    ("record_span", ("SpanType", "y"), False),
])
def test_only_requests_a_head_holds_reach_the_engine(
    action: str, resource: tuple[str, str], may: bool
) -> None:
    compiled = CompiledSet({"p": compile_source(HEADS)})
    assert compiled.may_match(("Agent", "a"), ("Action", action), resource) is may


def test_figures_moved_span_by_span_equal_those_of_the_stored_run(world: RunWorld) -> None:
    run = world.run()
    model_call(world, run, 700, 300)
    record(world, run, "tool:search")
    record(world, run, "crm.read_patient")
    model_call(world, run, 50)
    record(world, run, "email.send")
    gov = world.gov
    ctx = gov.context(world.session.principal)
    instance = gov.store.get("agent_instances", run)
    assert instance is not None
    spans = sorted(gov.store.query("agent_spans"), key=lambda s: (s["started_at"], s["id"]))
    policy = {"id": "p", "name": "p", "mode": "enforce", "version": 1, "scope": {},
               "source": READS_EVERY_FIGURE}
    active = compile_policies({"p": policy})
    judge = RecordedJudge(ctx, active, earlier_runs="before_run")
    moved = judge.start(instance, stored=False)
    stored = judge.start(instance, stored=True)
    assert moved is not None and stored is not None
    judge.judge(moved, [s for s in spans if s["purpose"] == "activity"])
    assert moved.so_far.figures(0) == stored.so_far.figures(0)
    live, _ = run_request(ctx, instance, Action("tool_call", "x"), active)
    figures = moved.so_far.figures(0)
    # A live decide counts the tool calls it allowed, not those recorded; elapsed is now's.
    for name in ("tool_calls", "elapsed_ms"):
        figures.pop(name)
        live["context"]["run"].pop(name)
    assert figures == live["context"]["run"]
    assert figures["cost_micro_usd"] == 700 + 600 + 50 and figures["span_count"] == 5
    assert figures["peak_classification"] == "restricted"
    assert span_usage(spans[0]) is not None
