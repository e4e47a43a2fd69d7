"""A run ready for spans, alerts and quality payloads, on each reference store."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller, make_agent

SPAN_TYPES = [
    {
        "name": "llm",
        "title": "Model call",
        "params_schema": {
            "type": "object",
            "properties": {"prompt": {"type": "string"}},
            "required": ["prompt"],
        },
        "result_schema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "template": "{{ prompt }} -> {{ text | default: 'pending' }}",
        "data_risk": {"action_profile": {"read_data": "allowed"}},
    },
    {"name": "tool", "params_schema": {"type": "object"}},
]
QUALITY_SCHEMAS = [
    {
        "name": "accuracy",
        "title": "Accuracy",
        "schema": {"type": "object", "properties": {"score": {"type": "number"}}},
        "template": "score {{ score }}",
    },
]
ALERT_SCHEMAS = [
    {
        "name": "slow",
        "title": "Slow run",
        "schema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
        "template": "took {{ seconds }}s",
    },
]


@attrs.frozen
class SpanWorld:
    """An account with an agent and a pending run of it declaring span, quality and alert
    schemas."""

    gov: Governance
    caller: Caller
    agent: dict[str, Any]
    instance: dict[str, Any]

    @property
    def instance_id(self) -> str:
        result: str = self.instance["id"]
        return result

    def new_run(self, **extra: Any) -> dict[str, Any]:
        """Register another run of the same agent and schemas."""
        return register_run(self.caller, self.agent["id"], **extra)

    def span(self, instance_id: str | None = None, **members: Any) -> dict[str, Any]:
        """Create a span (``llm``, active, a valid payload unless told otherwise)."""
        body = {
            "agent_instance_id": instance_id or self.instance_id, "schema_name": "llm",
            "status": "active", "payload": {"prompt": "hello"}, **members,
        }
        result: dict[str, Any] = self.caller.details("agent_spans/create", {"details": body})
        return result

    def show_instance(self, instance_id: str | None = None) -> dict[str, Any]:
        result: dict[str, Any] = self.caller.details(
            "agent_instances/show", agent_instance_id=instance_id or self.instance_id
        )
        return result

    def ingestion(self) -> Caller:
        """A caller with the reach of an ingestion token of the run's agent and environment."""
        return self.caller.ingestion(self.agent["id"], self.instance["environment_id"])


def register_run(caller: Caller, agent_id: str, **extra: Any) -> dict[str, Any]:
    """Register a run declaring the span, quality and alert schemas above."""
    body = {
        "agent_id": agent_id,
        "agent_version": {"name": "Reviewer", "external_identifier": "1.0.0"},
        "agent_schema_version": {
            "external_identifier": "s1", "span_type_schemas": SPAN_TYPES,
            "quality_schemas": QUALITY_SCHEMAS, "alert_schemas": ALERT_SCHEMAS,
        },
        **extra,
    }
    result: dict[str, Any] = caller.details("agent_instances/register", body)
    return result


def span_world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    """Build a :class:`SpanWorld` on a bootstrapped account."""
    caller = account_caller(gov, boot)
    agent = make_agent(caller)
    return SpanWorld(gov, caller, agent, register_run(caller, agent["id"]))
