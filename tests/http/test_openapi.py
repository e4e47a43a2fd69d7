"""The OpenAPI document: valid, complete, and true to what the app answers."""

from __future__ import annotations

import jsonschema
from openapi_spec_validator import validate

from governance_core.operations import default_registry
from governance_http.routes import served_routes
from governance_http.schemas import RESOURCE_FIELDS
from tests.http.support import Api, component, success_schema

REGISTRY = default_registry()


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
