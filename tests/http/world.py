"""A populated account for the route tests: one resource of every kind the core can make now.

Resources are made through the core (not the API under test), and only by operations that are
registered, so the world grows as operation families land.
"""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.operations import default_registry
from governance_core.policies import engine_available
from governance_core.service import Bootstrap, Governance

REGISTRY = default_registry()

RULESET: dict[str, Any] = {
    "category_weights": {"personal_identifiers": 8, "contact_information": 4},
    "action_multipliers": {"read_data": 1, "destroy_data": 2.5},
    "thresholds": {"medium": 10, "high": 50, "critical": 200},
}

SPAN_TYPES = [
    {
        "name": "langchain:llm",
        "params_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
        "result_schema": {"type": "object"},
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"personal_identifiers": "included"},
        },
    },
    {"name": "langchain:tool", "params_schema": {"type": "object"}},
]

QUALITY_SCHEMAS = [
    {"name": "accuracy", "schema": {"type": "object"}, "template": "score {{ score }}"},
]

ALERT_SCHEMAS = [
    {"name": "slow_run", "schema": {"type": "object"}, "template": "took {{ seconds }}s"},
]


def register_body(agent_id: str | None, version: str = "1.0.0", **extra: Any) -> dict[str, Any]:
    """A register body as the Python client sends it."""
    body: dict[str, Any] = {
        "agent_version": {"name": "Reviewer", "external_identifier": version},
        "agent_schema_version": {
            "external_identifier": "schema-1",
            "span_type_schemas": SPAN_TYPES,
            "quality_schemas": QUALITY_SCHEMAS,
            "alert_schemas": ALERT_SCHEMAS,
        },
        **extra,
    }
    if agent_id is not None:
        body["agent_id"] = agent_id
    return body


@attrs.define
class World:
    """An account with a resource of each kind; ``ids`` maps member names to their ids."""

    gov: Governance
    boot: Bootstrap
    ids: dict[str, str] = attrs.field(factory=dict)
    secrets: dict[str, str] = attrs.field(factory=dict)

    @property
    def token(self) -> str:
        """The bootstrapped admin's account token."""
        return self.boot.token

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        """Run an operation as the bootstrapped admin."""
        return self.gov.call(operation, params, token=self.boot.token)

    def make(self, name: str, operation: str, params: dict[str, Any]) -> dict[str, Any] | None:
        """Create a resource when its operation exists; remember its id as ``name``."""
        if operation not in REGISTRY:
            return None
        answer = self.call(operation, params)
        self.ids[name] = answer["details"]["id"]
        return answer

    def has(self, *operations: str) -> bool:
        """Whether every operation is registered."""
        return all(operation in REGISTRY for operation in operations)


def build_world(gov: Governance, boot: Bootstrap) -> World:
    """Populate ``boot``'s account with one resource of each kind the core can make."""
    world = World(gov, boot)
    world.ids.update(
        account_id=boot.account_id, admin_user_id=boot.admin_user_id,
        environment_id=boot.environment_id, default_risk_profile_id=boot.risk_profile_id,
        api_token_id=boot.token_id,
    )
    world.make("team_id", "teams/create", {"name": "Platform"})
    world.make("person_id", "people/create", {
        "name": "Grace", "email": "grace@acme.test", "team_ids": [world.ids["team_id"]],
    })
    world.make("risk_profile_id", "risk_profiles/create", {"name": "Strict", "ruleset": RULESET})
    world.make("spare_environment_id", "environments/create", {"name": "Staging"})
    invite = world.make(
        "admin_user_invite_id", "admin_user_invites/create", {"email": "new@acme.test"}
    )
    if invite is not None:
        world.secrets["invite"] = invite["details"]["token"]
    token = world.make("api_token_id", "api_tokens/create", {"details": {"token_scope": "account"}})
    if token is not None:
        world.secrets["api_token"] = token["token"]
    world.make("agent_id", "agents/create", {"details": {"name": "Loan reviewer"}})
    world.make("spare_agent_id", "agents/create", {"details": {"name": "Idle agent"}})
    # Before the run: its alert then has a delivery to this destination.
    world.make("destination_id", "destinations/create", {
        "name": "Ops hook", "url": "https://hooks.example.com/governance",
    })
    world.make("monitor_id", "monitors/create", {
        "name": "Failures", "metric": "failed_runs", "window_seconds": 3600, "warning": 1,
    })
    if world.has("agent_instances/register") and "agent_id" in world.ids:
        _make_run(world)
    if world.has("deliveries/list", "notification_events/list"):
        world.ids["delivery_id"] = world.call("deliveries/list", {})["summaries"][0]["id"]
        events = world.call("notification_events/list", {})["summaries"]
        world.ids["notification_event_id"] = events[0]["id"]
    return world


def _make_run(world: World) -> None:
    instance = world.make(
        "agent_instance_id", "agent_instances/register", register_body(world.ids["agent_id"])
    )
    assert instance is not None
    details = instance["details"]
    world.ids["agent_version_id"] = details["agent_version_id"]
    world.ids["agent_deployment_id"] = details["agent_deployment_id"]
    world.ids["run_environment_id"] = details["environment_id"]
    if world.has("agent_versions/show"):
        shown = {"agent_version_id": details["agent_version_id"]}
        version = world.call("agent_versions/show", shown)
        world.ids["agent_schema_version_id"] = version["details"]["agent_schema_version_id"]
    world.make("agent_span_id", "agent_spans/create", {
        "agent_instance_id": details["id"], "schema_name": "langchain:llm", "status": "active",
        "payload": {"prompt": "Review application 42"},
    })
    world.make("alert_id", "alerts/raise", {
        "agent_instance_id": details["id"], "name": "slow_run", "severity": "warning",
        "payload": {"seconds": 12},
    })
    if world.has("api_tokens/create"):
        ingestion = world.call("api_tokens/create", {
            "token_scope": "agent_deployment", "agent_id": world.ids["agent_id"],
            "environment_id": details["environment_id"],
        })
        world.secrets["ingestion"] = ingestion["token"]
    if world.has("policies/create", "decisions/decide") and engine_available():
        _hold_a_refund(world, details["id"])


REFUND_POLICY = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)


def _hold_a_refund(world: World, run_id: str) -> None:
    """A policy, and a decision of the run that it holds for approval."""
    world.make("policy_id", "policies/create", {"name": "Refunds", "source": REFUND_POLICY})
    held = world.make("decision_id", "decisions/decide", {
        "agent_instance_id": run_id,
        "action": {"kind": "tool_call", "name": "refund", "args": {"amount": 500}},
    })
    assert held is not None
    world.ids["approval_id"] = held["details"]["approval_id"]

