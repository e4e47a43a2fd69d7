"""The OpenAPI document: valid, complete, and true to what the app answers."""

from __future__ import annotations

from typing import Any

import jsonschema
from openapi_spec_validator import validate

from governance_core.operations import default_registry
from governance_http.routes import served_routes
from governance_http.schemas import RESOURCE_FIELDS
from tests.http.support import Api, component, success_schema

REGISTRY = default_registry()
KEY = "bulk-item-0001"


def test_the_document_is_valid_openapi_3_1(anonymous: Api) -> None:
    result = anonymous.get("/openapi.json")
    assert result.status_code == 200
    document = result.json
    assert document["openapi"] == "3.1.0"
    validate(document)


def test_every_served_route_is_documented_with_its_summary(anonymous: Api) -> None:
    document = anonymous.get("/openapi.json").json
    for route in served_routes(REGISTRY):
        operation = document["paths"][route.path][route.method.lower()]
        if route.operation in REGISTRY:
            assert operation["summary"] == REGISTRY[route.operation].summary
        documented = {p["name"] for p in operation["parameters"] if p["in"] == "path"}
        assert documented == set(route.path_parameters)
    assert "/api/v1/ping" in document["paths"]


def test_every_resource_schema_is_a_valid_json_schema(anonymous: Api) -> None:
    document = anonymous.get("/openapi.json").json
    for kind in RESOURCE_FIELDS:
        for name in (kind.title().replace("_", ""), kind.title().replace("_", "") + "Summary"):
            jsonschema.Draft202012Validator.check_schema(document["components"]["schemas"][name])


def test_answers_match_the_documented_envelopes(api: Api) -> None:
    document = api.get("/openapi.json").json
    team = api.ok("POST", "/team", json={"name": "Docs"})
    listed = api.ok("GET", "/team")
    by_operation = {route.operation: route for route in served_routes(REGISTRY)}
    jsonschema.validate(team, success_schema(document, by_operation["teams/create"]))
    jsonschema.validate(listed, success_schema(document, by_operation["teams/list"]))
    error = api.get("/team/nope").json
    jsonschema.validate(error, component(document, "Error"))


def _body_schema(document: dict[str, Any], path: str, method: str = "post") -> dict[str, Any]:
    operation = document["paths"][path][method]
    schema: dict[str, Any] = operation["requestBody"]["content"]["application/json"]["schema"]
    return schema


def _accepts(schema: dict[str, Any], body: object) -> bool:
    return jsonschema.Draft202012Validator(schema).is_valid(body)


def test_required_members_are_marked_bare_or_wrapped(anonymous: Api) -> None:
    schema = _body_schema(anonymous.get("/openapi.json").json, "/api/v1/team")
    assert _accepts(schema, {"name": "Docs"})
    assert _accepts(schema, {"details": {"name": "Docs"}})
    assert not _accepts(schema, {})
    assert not _accepts(schema, None)
    assert not _accepts(schema, {"details": {}})


def test_strings_are_described_as_the_server_reads_them_stripped(api: Api) -> None:
    schema = _body_schema(api.get("/openapi.json").json, "/api/v1/team")
    cases = ["Docs", "  Docs\t", "", " \x1e\u3000 ", "a" * 200, " " + "a" * 200 + " ", "a" * 201]
    for name in cases:
        accepted = api.post("/team", json={"name": name}).status_code == 200
        assert _accepts(schema, {"name": name}) == accepted, repr(name)


def test_choices_ranges_and_references_are_documented(anonymous: Api) -> None:
    document = anonymous.get("/openapi.json").json
    environment = _body_schema(document, "/api/v1/environment")
    assert not _accepts(environment, {"name": "Staging", "purpose": "unheard-of"})
    assert _accepts(environment, {"name": "Staging", "purpose": "testing"})
    span = _body_schema(document, "/api/v1/agent_spans")
    assert not _accepts(span, {"agent_instance_id": "not-an-id", "schema_name": "llm",
                               "status": "active"})
    bulk = _body_schema(document, "/api/v1/bulk")
    assert not _accepts(bulk, {"items": [{"_type": "no/such", "idempotency_key": KEY}]})
    assert _accepts(bulk, {"items": [{"_type": "teams/list", "idempotency_key": KEY}]})
