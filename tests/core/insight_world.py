"""A run whose span types declare data risk and templates, for risk, cost and summary tests."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller, make_agent

READ_PII = {
    # personal_identifiers (8) + contact_information (4), read_data (1.0): 12 by default.
    "name": "read_pii",
    "params_schema": {"type": "object"},
    "template": "looked up {{ customer.name | default: \"someone\" }}",
    "data_risk": {
        "action_profile": {"read_data": "allowed"},
        "params_data_categories": {"personal_identifiers": "included"},
        "result_data_categories": {
            "contact_information": "included", "personal_identifiers": "included",
            "classification": "confidential",
        },
    },
}
READ_INTERNAL = {
    # organisational_confidential (5), read_data (1.0): 5 by default.
    "name": "read_internal",
    "params_schema": {"type": "object"},
    "data_risk": {
        "action_profile": {"read_data": "allowed", "destroy_data": "disallowed"},
        "params_data_categories": {
            "organisational_confidential": "included", "classification": "internal",
        },
    },
}
LLM = {
    "name": "llm",
    "params_schema": {"type": "object"},
    "template": (
        "{% assign who = model | default: model_name %}{{ who }}"
        "{% if text %}: {{ text | truncate: 12 }}{% elsif error %} failed{% else %} pending"
        "{% endif %}"
    ),
}
PLAIN = {"name": "plain", "params_schema": {"type": "object"}}
BROKEN = {
    "name": "broken",
    "params_schema": {"type": "object"},
    # Compiles, but fails on every payload: a division by zero.
    "template": "{{ 1 | divided_by: 0 }}",
}
SPAN_TYPES = [READ_PII, READ_INTERNAL, LLM, PLAIN, BROKEN]

QUALITY_SCHEMAS = [
    {
        "name": "review",
        "schema": {"type": "object"},
        "template": (
            "{% if score >= 4 %}good{% elsif score >= 2 %}fair{% else %}poor{% endif %} "
            "({{ score }}/5, {{ tags | join: \", \" | default: \"no tags\" }})"
        ),
    },
    {"name": "untemplated", "schema": {"type": "object"}},
    {"name": "failing", "schema": {"type": "object"}, "template": "{{ 1 | divided_by: 0 }}"},
]
ALERT_SCHEMAS = [
    {
        "name": "overspend",
        "title": "Overspend",
        "schema": {"type": "object"},
        "template": "spent {{ amount | times: 2 | divided_by: 2 }} of {{ budget }}",
    },
    {"name": "quiet", "schema": {"type": "object"}},
    {"name": "failing", "schema": {"type": "object"}, "template": "{{ 1 | divided_by: 0 }}"},
]


@attrs.frozen
class InsightWorld:
    """An account with an agent and a pending run of it declaring the schemas above."""

    gov: Governance
    caller: Caller
    agent: dict[str, Any]
    instance: dict[str, Any]

    @property
    def instance_id(self) -> str:
        result: str = self.instance["id"]
        return result

    def span(self, schema_name: str = "plain", **members: Any) -> dict[str, Any]:
        """Create a span of the run (complete, empty payload unless told otherwise)."""
        body = {
            "agent_instance_id": self.instance_id, "schema_name": schema_name,
            "status": "complete", "payload": {}, **members,
        }
        result: dict[str, Any] = self.caller.details("agent_spans/create", {"details": body})
        return result

    def finish(self, span_id: str, **members: Any) -> dict[str, Any]:
        """Finish a span of the run."""
        result: dict[str, Any] = self.caller.details(
            "agent_spans/finish", agent_span_id=span_id, **members
        )
        return result

    def show(self) -> dict[str, Any]:
        """Read the run."""
        result: dict[str, Any] = self.caller.details(
            "agent_instances/show", agent_instance_id=self.instance_id
        )
        return result

    def ingestion(self) -> Caller:
        """A caller with the reach of an ingestion token of the run's agent and environment."""
        return self.caller.ingestion(self.agent["id"], self.instance["environment_id"])


def register_insight_run(caller: Caller, agent_id: str) -> dict[str, Any]:
    """Register a run of ``agent_id`` declaring the schemas above."""
    result: dict[str, Any] = caller.details("agent_instances/register", {
        "agent_id": agent_id,
        "agent_version": {"name": "Reviewer", "external_identifier": "1.0.0"},
        "agent_schema_version": {
            "external_identifier": "insights", "span_type_schemas": SPAN_TYPES,
            "quality_schemas": QUALITY_SCHEMAS, "alert_schemas": ALERT_SCHEMAS,
        },
    })
    return result


def insight_world(gov: Governance, boot: Bootstrap, **agent: Any) -> InsightWorld:
    """Build an :class:`InsightWorld` in the bootstrapped account."""
    caller = account_caller(gov, boot)
    made = make_agent(caller, **agent)
    return InsightWorld(gov, caller, made, register_insight_run(caller, made["id"]))
