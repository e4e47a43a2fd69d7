"""The OpenAPI document is exact where the fuzzer found it loose.

- A replayed create that shows a secret once answers ``token: null``, and the document says so.
- Every list's ``sorting`` values are enumerated, and each one listed is accepted.
"""

from __future__ import annotations

import falcon.testing
import jsonschema
import pytest

from governance_core.operations import default_registry
from governance_core.service import Bootstrap, Governance
from governance_http.routes import Route, served_routes
from tests.http.support import Api, success_schema
from tests.http.world import World, build_world

REGISTRY = default_registry()
LISTS = [route for route in served_routes(REGISTRY) if route.operation.endswith("/list")]


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> World:
    return build_world(gov, boot)


def test_a_replayed_token_create_matches_the_document(
    client: falcon.testing.TestClient, boot: Bootstrap
) -> None:
    api = Api(client, boot.token)
    document = client.simulate_get("/api/v1/openapi.json").json
    route = next(r for r in served_routes(REGISTRY) if r.operation == "api_tokens/create")
    body = {"details": {"token_scope": "account"}, "idempotency_key": "replayed-token-1"}
    first = api.ok("POST", route.path, json=body)
    again = api.ok("POST", route.path, json=body)
    assert isinstance(first["token"], str) and again["token"] is None
    for answer in (first, again):
        jsonschema.validate(answer, success_schema(document, route))


@pytest.mark.parametrize("route", LISTS, ids=lambda r: f"{r.method} {r.template}")
def test_every_documented_sorting_value_is_accepted(
    client: falcon.testing.TestClient, world: World, route: Route
) -> None:
    document = client.simulate_get("/api/v1/openapi.json").json
    parameters = document["paths"][route.path]["get"]["parameters"]
    sorting = next(p for p in parameters if p["name"] == "sorting")["schema"]
    assert sorting["enum"], route
    api = Api(client, world.token)
    query = {"agent_id": world.ids["agent_id"], "agent_instance_id": world.ids["agent_instance_id"]}
    for value in sorting["enum"]:
        result = api.get(route.path, query="&".join(
            [f"sorting={value}", *(f"{k}={v}" for k, v in query.items())]
        ))
        assert result.status_code == 200, (value, result.text)
    refused = api.get(route.path, query="sorting=not_a_field")
    assert refused.status_code == 422
