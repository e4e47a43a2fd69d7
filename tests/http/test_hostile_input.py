"""Hostile text, shapes and numbers on every route: a 4xx naming what is wrong, never a 500.

- A lone UTF-16 surrogate anywhere in a body (a member, a nested payload, a member name, an
  idempotency key, a bulk item) is 422 ``validation_errors`` naming where it sits; in the query
  string it is not UTF-8, so 400.
- A body that is not a JSON object (``[null, null]``, a number) is 400 on every operation,
  but where the route documents a bare body, whose operation answers 404 or 422 naming it.
- Every integer of a list query that reaches storage is range-checked with a field error.
"""

from __future__ import annotations

import json
from typing import Any

import falcon.testing
import pytest

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.operations import default_registry
from governance_core.service import Governance
from governance_core.storage import SQLiteStore
from governance_http import create_app
from governance_http.routes import Route, served_routes
from tests.http.world import World, build_world

REGISTRY = default_registry()
SERVED = served_routes(REGISTRY)
BODY_ROUTES = [route for route in SERVED if route.method in ("POST", "PUT")]
LIST_ROUTES = [route for route in SERVED if route.operation.endswith("/list")]


@pytest.fixture(scope="module")
def target() -> tuple[falcon.testing.TestClient, World]:
    # SQLite: the store whose integer columns overflowed.
    gov = Governance(SQLiteStore(":memory:"), clock=FixedClock(), ids=SeededIds(5))
    world = build_world(gov, gov.bootstrap())
    return falcon.testing.TestClient(create_app(gov)), world


def send(
    target: tuple[falcon.testing.TestClient, World], route: Route, *,
    body: str | None = None, query: str | None = None,
    headers: dict[str, str] | None = None,
) -> falcon.testing.Result:
    client, world = target
    path = route.path.format(**{
        name: world.ids.get(name, world.ids["agent_id"]) for name in route.path_parameters
    })
    return client.simulate_request(
        route.method, path, body=body, query_string=query,
        headers={
            "Authorization": f"Bearer {world.token}", "Content-Type": "application/json",
            **(headers or {}),
        },
    )


def test_every_body_route_is_covered() -> None:
    assert len(BODY_ROUTES) > 30
    assert len(LIST_ROUTES) > 10


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: f"{r.method} {r.template}")
@pytest.mark.parametrize("body", ["[null, null]", "[]", "3", "true", '[{"name": "x"}]'])
def test_a_body_that_is_not_an_object_is_400(
    target: tuple[falcon.testing.TestClient, World], route: Route, body: str
) -> None:
    result = send(target, route, body=body)
    if route.bare_body is None:
        assert result.status_code == 400, result.text
        assert result.json["code"] == "bad_request"
        assert "JSON object" in result.json["message"]
    else:
        # The core reads the bare body and names what is wrong with it.
        assert result.status_code in (404, 422), result.text


def test_a_bare_string_body_is_taken_only_where_documented(
    target: tuple[falcon.testing.TestClient, World],
) -> None:
    for route in BODY_ROUTES:
        result = send(target, route, body='"01kdvdna00ykztswj98bf5takd98prsd"')
        if route.bare_body is None:
            assert result.status_code == 400, (route, result.text)
        else:
            assert result.status_code != 400 and result.status_code < 500, (route, result.text)


LONE = "\\ud800x"
SURROGATE_BODIES: list[tuple[str, list[str]]] = [
    (f'{{"name": "{LONE}"}}', ["name"]),
    (f'{{"details": {{"name": "{LONE}"}}}}', ["details", "name"]),
    (f'{{"payload": {{"a": ["ok", "{LONE}"]}}}}', ["payload", "a", "1"]),
    (f'{{"payload": {{"{LONE}": 1}}}}', ["payload", "\\ud800x"]),
    (f'{{"idempotency_key": "{LONE}xxxxxxxxxx"}}', ["idempotency_key"]),
    ('{"items": [{"_type": "agents/create", "name": "\\udfff"}]}', ["items", "0", "name"]),
    (f'"{LONE}"', []),
]


def field_named(answer: dict[str, Any], path: list[str]) -> dict[str, Any]:
    node = answer
    for part in path:
        assert node["code"] == "validation_errors", node
        node = node["errors"][part]
    return node


@pytest.mark.parametrize("route", BODY_ROUTES, ids=lambda r: f"{r.method} {r.template}")
def test_a_lone_surrogate_anywhere_in_a_body_is_422_naming_it(
    target: tuple[falcon.testing.TestClient, World], route: Route
) -> None:
    for body, path in SURROGATE_BODIES:
        result = send(target, route, body=body)
        assert result.status_code == 422, (body, result.text)
        named = field_named(result.json, path or ["body"])
        assert named["code"] == "invalid_value"
        assert "surrogate" in named["message"]


def test_escaped_surrogate_pairs_and_escaped_backslashes_are_ordinary_text(
    target: tuple[falcon.testing.TestClient, World],
) -> None:
    route = next(r for r in BODY_ROUTES if r.operation == "agents/create")
    for name, stored in [("\\ud83d\\ude00 bot", "\U0001f600 bot"), ("\\\\ud800", "\\ud800")]:
        result = send(target, route, body=json.dumps({"details": {"name": "x"}}).replace(
            '"x"', f'"{name}"'
        ))
        assert result.status_code == 200, result.text
        assert result.json["details"]["name"] == stored


@pytest.mark.parametrize("route", SERVED, ids=lambda r: f"{r.method} {r.template}")
def test_a_surrogate_in_the_query_string_or_a_non_ascii_key_header_is_never_a_500(
    target: tuple[falcon.testing.TestClient, World], route: Route
) -> None:
    result = send(target, route, query="name=%ED%A0%80&idempotency_key=%ED%A0%80")
    assert result.status_code == 400, result.text
    assert result.json["code"] == "bad_request"
    result = send(target, route, headers={"Idempotency-Key": "caf\xe9-\xff-key-123"})
    assert result.status_code == 422, result.text
    assert "idempotency_key" in result.json["errors"]


BIG = [str(2**63), str(2**53), str(2**64 + 1), str(-(2**63) - 1), "9" * 40, "\u00b2", "\u0661"]


@pytest.mark.parametrize("route", LIST_ROUTES, ids=lambda r: f"{r.method} {r.template}")
def test_every_list_integer_is_range_checked_with_a_field_error(
    target: tuple[falcon.testing.TestClient, World], route: Route
) -> None:
    for name in ("pagination[offset]", "pagination[page_size]"):
        for value in BIG:
            result = send(target, route, query=f"{name}={value}")
            assert result.status_code == 422, (name, value, result.text)
            assert name in result.json["errors"], result.text
    nested = send(target, route, body=json.dumps({"pagination": {"offset": 2**63}}))
    assert nested.status_code == 422, nested.text
    largest = send(target, route, query="pagination[offset]=9007199254740991")
    assert largest.status_code == 200, largest.text
    assert largest.json["summaries"] == []


OTLP_SPAN = (
    '{"resourceSpans":[{"resource":{"attributes":[{"key":"service.name","value":'
    '{"stringValue":"svc"}}]},"scopeSpans":[{"scope":{"name":"s"},"spans":[{"traceId":'
    '"5b8efff798038103d269b633813fc60c","spanId":"eee19b7ec3c1b174","name":"NAME","kind":1,'
    '"startTimeUnixNano":"1544712660000000000","endTimeUnixNano":"1544712661000000000"}]}]}]}'
)


def test_the_otlp_json_body_refuses_a_lone_surrogate_too(
    target: tuple[falcon.testing.TestClient, World],
) -> None:
    # The one other place a JSON body is parsed: OTLP's JSON encoding of traces.
    client, world = target
    headers = {"Authorization": f"Bearer {world.token}", "Content-Type": "application/json"}
    for path in ("/v1/traces", "/api/v1/otlp/v1/traces"):
        for body in (OTLP_SPAN.replace("NAME", "op\\ud800"), OTLP_SPAN.replace("svc", "\\udfff")):
            result = client.simulate_post(path, body=body, headers=headers)
            assert result.status_code == 400, result.text
            assert "surrogate" in result.json["message"]
        fine = client.simulate_post(path, body=OTLP_SPAN.replace("NAME", "op"), headers=headers)
        assert fine.status_code == 200, fine.text


# Bulk reads its items, not a details wrapper.
@pytest.mark.parametrize(
    "route", [r for r in BODY_ROUTES if r.operation != "bulk"],
    ids=lambda r: f"{r.method} {r.template}",
)
def test_a_details_wrapper_that_is_not_an_object_is_422_naming_it(
    target: tuple[falcon.testing.TestClient, World], route: Route
) -> None:
    for details in ("5", '"x"', "[1]", "true"):
        result = send(target, route, body=f'{{"details": {details}}}')
        assert result.status_code == 422, (details, result.text)
        assert result.json["errors"]["details"]["code"] == "invalid_value"
