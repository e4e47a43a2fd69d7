"""The request a policy sees, as a Cedar schema, and the values that fill it.

Policies are checked against :data:`CEDAR_SCHEMA` when they are written, so a policy naming
an attribute outside it is refused with the engine's message. ``context.args`` is the call's
arguments as sent (any JSON object), so its members are not checked: a policy reading one
should test it with ``has`` first (a missing member is an evaluation error, and an error
blocks: see :mod:`governance_core.policies.engine`).
"""

from __future__ import annotations

__all__ = [
    "ACTION_IDS",
    "AGENT_ATTRIBUTES",
    "CEDAR_SCHEMA",
    "KIND_ACTIONS",
    "RESOURCE_TYPES",
    "RUN_ATTRIBUTES",
    "UNKNOWN",
]

KIND_ACTIONS = {"tool_call": "call_tool", "model_call": "call_model", "span": "record_span"}
"""Each action ``kind`` of a decide request and the Cedar action it is asked as."""

ACTION_IDS = tuple(KIND_ACTIONS.values())

RESOURCE_TYPES = {"tool_call": "Tool", "model_call": "Model", "span": "SpanType"}
"""Each action ``kind`` and the Cedar entity type of its resource."""

UNKNOWN = "unknown"
"""What ``risk_level`` and ``peak_classification`` hold where the run's value is null."""

RUN_ATTRIBUTES: dict[str, str] = {
    "cost_micro_usd": "Long",
    "input_tokens": "Long",
    "output_tokens": "Long",
    "risk_score": "Long",
    "risk_level": "String",
    "peak_classification": "String",
    "data_categories": "Set<String>",
    "span_count": "Long",
    "tool_calls": "Long",
    "elapsed_ms": "Long",
}
"""``context.run``: the run so far, from its stored aggregates."""

AGENT_ATTRIBUTES: dict[str, str] = {"cost_today_micro_usd": "Long"}
"""``context.agent``: the agent's figures over all its runs."""

_RESOURCE = "{ categories: Set<String>, actions: Set<String>, classification: String }"


def _record(attributes: dict[str, str]) -> str:
    return "{ " + ", ".join(f"{name}: {kind}" for name, kind in attributes.items()) + " }"


CEDAR_SCHEMA = f"""\
entity Agent {{ environment_id: String, external_identifier: String, deployment_id: String }};
entity Tool {_RESOURCE};
entity Model {_RESOURCE};
entity SpanType {_RESOURCE};
type Run = {_record(RUN_ATTRIBUTES)};
type AgentFigures = {_record(AGENT_ATTRIBUTES)};
type Context = {{ args: {{}}, run: Run, agent: AgentFigures }};
action call_tool appliesTo {{ principal: Agent, resource: Tool, context: Context }};
action call_model appliesTo {{ principal: Agent, resource: Model, context: Context }};
action record_span appliesTo {{ principal: Agent, resource: SpanType, context: Context }};
"""
"""The Cedar schema (human-readable form) every policy is validated against."""
