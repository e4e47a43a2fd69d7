"""The per-request statement sets: the engine is given only the statements that can hold a
request, and says exactly what the whole set says."""

from __future__ import annotations

import json
import re

import cedarpy
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.policies.engine import CompiledSet, Evaluation, compile_source

HEADS = [
    "principal, action, resource",
    'principal, action == Action::"call_tool", resource',
    'principal, action == Action::"call_tool", resource == Tool::"refund"',
    'principal == Agent::"a1", action, resource',
    'principal, action in [Action::"call_model", Action::"record_span"], resource',
    "principal, action, resource is Model",
]
CONDITIONS = [
    "",
    " when { context.run.tool_calls >= 2 }",
    " when { context.args has amount && context.args.amount > 100 }",
    " when { context.agent.cost_today_micro_usd > 5 }",
    " when { context.args.amount > 100 }",  # an error where args has no amount: it blocks
    ' when { principal.environment_id == "e2" }',
]
REQUESTS = [
    ("Agent", "a1", "call_tool", "Tool", "refund"),
    ("Agent", "a2", "call_tool", "Tool", "search"),
    ("Agent", "a2", "call_model", "Model", "gpt"),
    ("Agent", "a1", "record_span", "SpanType", "llm"),
]


def request(
    shape: tuple[str, str, str, str, str], amount: int | None, tool_calls: int
) -> tuple[dict[str, object], list[dict[str, object]]]:
    principal_type, principal_id, action, resource_type, resource_id = shape
    args = {} if amount is None else {"amount": amount}
    context = {
        "args": args, "run": {"tool_calls": tool_calls}, "agent": {"cost_today_micro_usd": 9},
    }
    environment = "e2" if principal_id == "a2" else "e1"
    principal: dict[str, object] = {
        "uid": {"type": principal_type, "id": principal_id}, "parents": [],
        "attrs": {"environment_id": environment},
    }
    resource: dict[str, object] = {
        "uid": {"type": resource_type, "id": resource_id}, "parents": [], "attrs": {},
    }
    asked: dict[str, object] = {
        "principal": principal["uid"], "action": {"type": "Action", "id": action},
        "resource": resource["uid"], "context": context,
    }
    return asked, [principal, resource]


def compiled(picks: list[tuple[int, int]]) -> CompiledSet:
    sources = {}
    for number, (head, condition) in enumerate(picks):
        text = f"forbid ({HEADS[head]}){CONDITIONS[condition]};"
        sources[f"p{number}"] = compile_source(text)
    return CompiledSet(sources)


def _statement(name: str) -> tuple[str, int]:
    """The engine names a text's nth policy ``policy<n>``; compiled() names it ``p<n - 1>#0``."""
    return f"p{int(name.removeprefix('policy')) - 1}", 0


def whole_set(
    picks: list[tuple[int, int]], asked: dict[str, object], entities: list[dict[str, object]]
) -> Evaluation:
    """What the engine says given every statement of ``picks`` at once (beside a permit)."""
    texts = ["permit (principal, action, resource);"] + [
        f"forbid ({HEADS[head]}){CONDITIONS[condition]};" for head, condition in picks
    ]
    result = cedarpy.is_authorized(
        {**asked, "context": json.dumps(asked["context"])}, "\n".join(texts),
        json.dumps(entities),
    )
    matched = tuple(
        _statement(name) for name in result.diagnostics.reasons if name != "policy0"
    ) if result.decision == cedarpy.Decision.Deny else ()
    errors = {
        _statement(found.group(1)): found.group(2)
        for found in (re.search(r"policy `([^`]*)`: (.*)", text)
                      for text in result.diagnostics.errors)
        if found is not None
    }
    return Evaluation(matched, errors)


def same(one: Evaluation, other: Evaluation) -> bool:
    return sorted(one.matched) == sorted(other.matched) and set(one.errors) == set(other.errors)


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(
        st.tuples(st.integers(0, len(HEADS) - 1), st.integers(0, len(CONDITIONS) - 1)),
        min_size=1, max_size=8,
    ),
    asked=st.lists(
        st.tuples(st.integers(0, len(REQUESTS) - 1), st.none() | st.integers(0, 300),
                  st.integers(0, 4)),
        min_size=1, max_size=6,
    ),
)
def test_a_request_is_judged_by_its_statements_as_by_the_whole_set(
    picks: list[tuple[int, int]], asked: list[tuple[int, int | None, int]]
) -> None:
    policies = compiled(picks)
    for shape, amount, tool_calls in asked:
        built, entities = request(REQUESTS[shape], amount, tool_calls)
        # The engine given every statement; evaluate and evaluate_many give it only those
        # that can hold the request (evaluate_many with its context as text).
        whole = whole_set(picks, built, entities)
        assert same(policies.evaluate(built, entities), whole)
        many = policies.evaluate_many([{**built, "context": json.dumps(built["context"])}],
                                      entities)[0]
        assert same(many, whole)


def test_what_a_request_needs_is_read_by_the_statements_that_can_hold_it() -> None:
    policies = compiled([(2, 2), (5, 3)])  # refund's args; a model's agent cost
    refund = (("Agent", "a1"), ("Action", "call_tool"), ("Tool", "refund"))
    assert policies.needs_of(*refund) == frozenset({"args", "amount"})
    model = (("Agent", "a1"), ("Action", "call_model"), ("Model", "gpt"))
    assert policies.needs_of(*model) == frozenset({"agent", "cost_today_micro_usd"})
    search = (("Agent", "a1"), ("Action", "call_tool"), ("Tool", "search"))
    assert policies.needs_of(*search) is None
    assert not policies.may_match(*search) and policies.may_match(*refund)
