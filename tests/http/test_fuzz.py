"""Fuzz every documented route from the OpenAPI document: no 5xx, every error the envelope.

Requests are drawn per route from what the document declares (path and query parameters,
request body members) mixed with ids of a populated account, ids of the wrong kind, and
arbitrary JSON and text. Bounded: a few examples per route.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import quote, urlencode

import falcon.testing
import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.operations import default_registry
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from governance_http.errors import STATUS_BY_CODE
from governance_http.routes import Route, served_routes
from tests.http.support import component
from tests.http.world import World, build_world

REGISTRY = default_registry()

SERVED = served_routes(REGISTRY)


@pytest.fixture(scope="module")
def target() -> tuple[falcon.testing.TestClient, World, dict[str, Any]]:
    gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(5))
    world = build_world(gov, gov.bootstrap())
    client = falcon.testing.TestClient(create_app(gov))
    return client, world, client.simulate_get("/api/v1/openapi.json").json


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def values(world: World) -> st.SearchStrategy[Any]:
    """Plausible and implausible member values: ids of every kind, times, junk."""
    ids = sorted(world.ids.values())
    return st.one_of(
        st.sampled_from(ids),
        st.sampled_from(["2026-01-01T00:00:00Z", "yesterday", "", "0" * 32, "-1", "true"]),
        json_values,
    )


def documented(document: dict[str, Any], route: Route) -> dict[str, Any]:
    operation: dict[str, Any] = document["paths"][route.path][route.method.lower()]
    return operation


def body_members(operation: dict[str, Any]) -> list[str]:
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    schema = body.get("schema", {})
    for option in schema.get("oneOf", [schema]):
        if "properties" in option:
            return sorted(option["properties"])
    return []


@st.composite
def requests(
    draw: st.DrawFn, route: Route, world: World, document: dict[str, Any]
) -> dict[str, Any]:
    operation = documented(document, route)
    value = values(world)
    path_value = st.one_of(
        st.sampled_from(sorted(world.ids.values())), st.text(min_size=1, max_size=40)
    )
    path = route.path.format(**{
        name: quote(draw(path_value), safe="") for name in route.path_parameters
    })
    query_names = [p["name"] for p in operation.get("parameters", []) if p["in"] == "query"]
    query = draw(st.dictionaries(
        st.sampled_from([*query_names, "agent_id", "status", "sorting[field]"]),
        value.map(lambda v: v if isinstance(v, str) else json.dumps(v)), max_size=3,
    ))
    members = body_members(operation)
    structured = (
        st.dictionaries(st.sampled_from(members), value, max_size=6) if members else json_values
    )
    body = draw(st.one_of(
        st.none(), structured, structured.map(lambda d: {"details": d}), json_values,
        st.text(max_size=30).map(lambda text: ("raw", text)),
    ))
    token = draw(st.sampled_from(["account", "account", "account", "none", "ingestion"]))
    return {"path": path, "query": urlencode(query), "body": body, "token": token}


def check(result: falcon.testing.Result, document: dict[str, Any]) -> None:
    assert result.status_code < 500, result.text
    body = json.loads(result.text)
    assert isinstance(body, dict)
    if result.status_code == 200:
        assert body["status"] == "success"
        return
    jsonschema.validate(body, component(document, "Error"))
    expected = {STATUS_BY_CODE[body["code"]]}
    if body["code"] == "bad_request":
        expected |= {405, 413}
    assert result.status_code in expected, body


@pytest.mark.parametrize("route", SERVED, ids=lambda r: f"{r.method} {r.template}")
def test_fuzzed_requests_never_fail_the_server(
    target: tuple[falcon.testing.TestClient, World, dict[str, Any]], route: Route
) -> None:
    client, world, document = target

    @settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(requests(route, world, document))
    def run(request: dict[str, Any]) -> None:
        headers: dict[str, str] = {"Content-Type": "application/json"}
        token = {"account": world.token, "ingestion": world.secrets.get("ingestion")}.get(
            request["token"]
        )
        if token is not None:
            headers["Authorization"] = f"Bearer {token}"
        body = request["body"]
        raw = isinstance(body, tuple)
        text = body[1] if raw else None if body is None else json.dumps(body)
        result = client.simulate_request(
            route.method, request["path"], query_string=request["query"], body=text,
            headers=headers,
        )
        check(result, document)

    run()
