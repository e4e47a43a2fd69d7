"""Every served route: a success of the documented shape, and the errors every route shares.

Each route is driven with an example request against a populated account (see ``world``);
its answer is validated against the route's success schema in the OpenAPI document.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import attrs
import falcon.testing
import jsonschema
import pytest

from governance_core.bulk import BULK
from governance_core.operations import default_registry
from governance_core.service import Bootstrap, Governance
from governance_http.openapi import schema_name
from governance_http.routes import Route, served_routes
from governance_http.schemas import RESOURCE_FIELDS
from tests.http.support import Api, assert_error, success_schema
from tests.http.world import RULESET, World, build_world, register_body

REGISTRY = default_registry()

SERVED = served_routes(REGISTRY)
PLAYGROUND = "playground/create_loan_application_review_agent"


@attrs.frozen
class Example:
    """A request that succeeds on a fresh world."""

    body: Any = None
    query: str | None = None
    path: Mapping[str, str] = attrs.field(factory=dict)
    token: str = "account"


def _suspended(world: World) -> Example:
    world.call("api_tokens/suspend", {"api_token_id": world.ids["api_token_id"]})
    return Example()


def _retired(world: World) -> Example:
    world.call("agents/retire", {"agent_id": world.ids["agent_id"]})
    return Example()


def _playground_agent(world: World) -> Example:
    agent = world.call(PLAYGROUND, {})["agent"]
    return Example(body=agent["id"])


def _playground_run(world: World) -> Example:
    agent = world.call(PLAYGROUND, {})["agent"]
    register = "playground/register_loan_application_review_agent_instance"
    run = world.call(register, {"agent_id": agent["id"]})
    return Example(body={"agent_instance_id": run["details"]["id"]})


def _dead_delivery(world: World) -> Example:
    # What the sender leaves after the last attempt: only it writes a delivery's status.
    stored = world.gov.store.get("deliveries", world.ids["delivery_id"])
    assert stored is not None
    world.gov.store.put("deliveries", {**stored, "status": "dead"})
    return Example()


def _instance(world: World) -> str:
    return world.ids["agent_instance_id"]


EXAMPLES: dict[str, Callable[[World], Example]] = {
    "accounts/update": lambda w: Example({"name": "Acme Ltd", "website": "https://acme.test"}),
    "admin_users/update": lambda w: Example({"job_title": "CTO"}),
    "admin_user_invites/create": lambda w: Example({"email": "another@acme.test"}),
    "admin_user_invites/accept": lambda w: Example(
        {"token": w.secrets["invite"], "name": "Newcomer"}, token="none"
    ),
    "api_tokens/create": lambda w: Example({"details": {"token_scope": "account"}}),
    "api_tokens/activate": _suspended,
    "people/create": lambda w: Example(
        {"name": "Linus", "email": "linus@acme.test", "team_ids": [w.ids["team_id"]]}
    ),
    "people/update": lambda w: Example({"details": {"title": "Engineer"}}),
    "teams/create": lambda w: Example({"name": "Ops"}),
    "teams/update": lambda w: Example({"details": {"name": "Ops 2"}}),
    "environments/create": lambda w: Example({"details": {"name": "Production"}}),
    "environments/update": lambda w: Example({"details": {"description": "Where it runs"}}),
    "risk_profiles/create": lambda w: Example({"name": "Lax", "ruleset": RULESET}),
    "risk_profiles/update": lambda w: Example({"description": "Stricter"}),
    "agents/create": lambda w: Example({"details": {"name": "New agent"}}),
    "agents/update": lambda w: Example({"details": {"description": "Reviews loans"}}),
    "agents/show": lambda w: Example(
        query=f"agent_id={w.ids['agent_id']}&include_counts=true&include_risk_rollup=true"
    ),
    "agents/delete": lambda w: Example(path={"agent_id": w.ids["spare_agent_id"]}),
    "agents/reinstate": _retired,
    "agent_deployments/create": lambda w: Example(
        {"agent_id": w.ids["spare_agent_id"], "environment_id": w.ids["environment_id"]}
    ),
    "agent_deployments/update": lambda w: Example(
        {"details": {"current_version_id": w.ids["agent_version_id"]}}
    ),
    "agent_versions/list": lambda w: Example(query=f"agent_id={w.ids['agent_id']}"),
    "agent_schema_versions/list": lambda w: Example(query=f"agent_id={w.ids['agent_id']}"),
    "agent_instances/list": lambda w: Example(query=f"agent_id={w.ids['agent_id']}"),
    "agent_instances/register": lambda w: Example(register_body(w.ids["agent_id"], "2.0.0")),
    "agent_instances/start": lambda w: Example({"timestamp": None}),
    "agent_instances/finish": lambda w: Example({"status": "failed"}),
    "agent_instances/terminate": lambda w: Example({"reason": "runaway costs"}),
    "agent_instances/record_quality": lambda w: Example(
        {"name": "accuracy", "payload": {"score": 1}}
    ),
    "agent_instances/update": lambda w: Example(
        {"details": {"quality_payload": {"accuracy": {"score": 0.5}}}}
    ),
    "agent_spans/create": lambda w: Example({"details": {
        "agent_instance_id": _instance(w), "schema_name": "langchain:tool", "status": "complete",
        "payload": {"tool": "lookup"}, "result_payload": {"found": True},
    }}),
    "agent_spans/list": lambda w: Example(query=f"agent_instance_id={_instance(w)}"),
    "agent_spans/show": lambda w: Example(query="redacted=true"),
    "agent_spans/finish": lambda w: Example({"status": "complete", "result_payload": {"ok": 1}}),
    "alerts/raise": lambda w: Example({
        "agent_instance_id": _instance(w), "name": "slow_run", "severity": "error",
        "payload": {"seconds": 30},
    }),
    "alerts/clear": lambda w: Example({"agent_instance_id": _instance(w), "name": "slow_run"}),
    "alerts/count": lambda w: Example(query=f"agent_instance_id={_instance(w)}"),
    "monitors/create": lambda w: Example({
        "name": "Slow runs", "metric": "p95_duration_seconds", "window_seconds": 600,
        "warning": 30, "critical": 120, "hysteresis": 5,
    }),
    "monitors/update": lambda w: Example({"critical": 3}),
    "destinations/create": lambda w: Example(
        {"name": "Chat", "url": "https://chat.example.com/hook", "body_format": "slack"}
    ),
    "destinations/update": lambda w: Example({"event_types": ["alert.raised"]}),
    "deliveries/resend": _dead_delivery,
    "playground/register_loan_application_review_agent_instance": _playground_agent,
    "playground/record_loan_application_review_spans": _playground_run,
    "policies/create": lambda w: Example(
        {"name": "No wipes", "source": 'forbid (principal, action, resource == Tool::"wipe");'}
    ),
    "policies/update": lambda w: Example({"mode": "observe"}),
    "policies/validate": lambda w: Example({"source": "forbid (principal, action, resource);"}),
    "policies/test": lambda w: Example({"source": "forbid (principal, action, resource);"}),
    "decisions/decide": lambda w: Example(
        {"agent_instance_id": _instance(w), "action": {"kind": "tool_call", "name": "search"}}
    ),
    "decisions/list": lambda w: Example(query=f"agent_instance_id={_instance(w)}"),
    "decisions/record_interception": lambda w: Example({"record": {
        "interception_point": "pre_tool_call", "mode": "enforce",
        "verdict": {"decision": "allow"}, "session_id": "s-1", "sequence": 1,
    }}),
    "approvals/approve": lambda w: Example({"reason": "checked"}),
    "approvals/reject": lambda w: Example({"reason": "too much"}),
    BULK: lambda w: Example({"items": [
        {"_type": "teams/list", "idempotency_key": "bulk-item-1"},
        {"_type": "teams/create", "idempotency_key": "bulk-item-2", "details": {"name": "Bulk"}},
    ]}),
}
"""The example request of each operation that needs more than its path."""


def route_id(route: Route) -> str:
    return f"{route.method} {route.template}"


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> World:
    return build_world(gov, boot)


@pytest.fixture
def other_world(gov: Governance, other: Bootstrap) -> World:
    return build_world(gov, other)


def send(
    client: falcon.testing.TestClient,
    world: World,
    route: Route,
    example: Example,
    ids: Mapping[str, str],
    token: str | None,
) -> falcon.testing.Result:
    chosen = {**ids, **example.path}
    path = route.path.format(**{name: chosen[name] for name in route.path_parameters})
    return Api(client, token).request(
        route.method, path, json=example.body, query=example.query, token=token
    )


def example_of(route: Route, world: World) -> Example:
    return EXAMPLES.get(route.operation, lambda w: Example())(world)


@pytest.mark.parametrize("route", SERVED, ids=route_id)
def test_every_route_succeeds_with_its_documented_shape(
    client: falcon.testing.TestClient, world: World, route: Route
) -> None:
    example = example_of(route, world)
    token = None if example.token == "none" else world.token
    result = send(client, world, route, example, world.ids, token)
    assert result.status_code == 200, result.text
    document = client.simulate_get("/api/v1/openapi.json").json
    jsonschema.validate(result.json, success_schema(document, route))
    # Nor does it show a field its resource's model does not describe.
    jsonschema.validate(result.json, success_schema(closed(document), route))


def closed(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with each resource's details schema refusing fields it does not name."""
    schemas = dict(document["components"]["schemas"])
    for kind in RESOURCE_FIELDS:
        name = schema_name(kind)
        schemas[name] = {**schemas[name], "additionalProperties": False}
    return {**document, "components": {**document["components"], "schemas": schemas}}


AUTHENTICATED = [
    route for route in SERVED if route.operation == BULK or REGISTRY[route.operation].authenticated
]


@pytest.mark.parametrize("route", AUTHENTICATED, ids=route_id)
def test_every_route_needs_a_token(
    client: falcon.testing.TestClient, world: World, route: Route
) -> None:
    result = send(client, world, route, example_of(route, world), world.ids, None)
    assert_error(result, 401, "not_authenticated")


ACCOUNT_ONLY = [
    route for route in SERVED
    if route.operation in REGISTRY and "agent_deployment" not in REGISTRY[route.operation].scopes
    and REGISTRY[route.operation].authenticated
]


@pytest.mark.parametrize("route", ACCOUNT_ONLY, ids=route_id)
def test_account_only_routes_refuse_ingestion_tokens(
    client: falcon.testing.TestClient, world: World, route: Route
) -> None:
    if "ingestion" not in world.secrets:
        pytest.skip("ingestion tokens need agents and registrations")
    example = example_of(route, world)
    result = send(client, world, route, example, world.ids, world.secrets["ingestion"])
    assert_error(result, 403, "not_permitted")


WITH_PATH_IDS = [
    route for route in SERVED if route.path_parameters and route.operation in REGISTRY
    and REGISTRY[route.operation].authenticated
]


@pytest.mark.parametrize("route", WITH_PATH_IDS, ids=route_id)
def test_ids_of_another_account_are_not_found(
    client: falcon.testing.TestClient, world: World, other_world: World, route: Route
) -> None:
    example = attrs.evolve(example_of(route, world), path={})
    result = send(client, world, route, example, other_world.ids, world.token)
    assert_error(result, 404, "not_found")


@pytest.mark.parametrize("route", WITH_PATH_IDS, ids=route_id)
def test_malformed_and_unknown_path_ids_are_not_found(
    client: falcon.testing.TestClient, world: World, route: Route
) -> None:
    example = attrs.evolve(example_of(route, world), path={})
    for bad in ("not-an-id", "0" * 32):
        ids = {name: bad for name in route.path_parameters}
        assert_error(send(client, world, route, example, ids, world.token), 404, "not_found")
