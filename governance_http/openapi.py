"""The OpenAPI 3.1 document of the API, generated from the route table and the registry.

Nothing here is written per endpoint: summaries are the handlers' docstrings, parameters come
from the path templates and the operation's verb, request bodies and success envelopes from
the resource field table in :mod:`governance_http.schemas`, and the few envelopes that carry
more than one resource from ``EXTRA_ENVELOPES``.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from governance_core.bulk import BULK, MAX_ITEMS
from governance_core.idempotency import KEY_MAX, KEY_MIN
from governance_core.operations.common import KIND_TABLES
from governance_core.pagination import MAX_OFFSET, MAX_PAGE_SIZE
from governance_core.registry import Operation
from governance_http.routes import PREFIX, Route
from governance_http.schemas import (
    PFID_PATTERN,
    RESOURCE_FIELDS,
    error_schema,
    field_schema,
    pagination_schema,
    resource_schema,
    sorting_schema,
    writable_fields,
)

__all__ = [
    "EXTRA_ENVELOPES",
    "FAMILY_KINDS",
    "QUERY_PARAMETERS",
    "SUPPLIED_IDS",
    "build_document",
    "schema_name",
]

FAMILY_KINDS: dict[str, str] = {table: kind for kind, table in KIND_TABLES.items()}
"""Each operation family (``teams``) and the resource ``type`` it answers (``team``)."""

EXTRA_ENVELOPES: dict[str, dict[str, str]] = {
    "playground/create_loan_application_review_agent": {"agent": "agent"},
    "playground/register_loan_application_review_agent_instance": {
        "details": "agent_instance",
        "agent_version": "agent_version",
        "agent_schema_version": "agent_schema_version",
    },
    "playground/record_loan_application_review_spans": {"ids": "ids"},
    # The secret is shown once: a replayed create or accept answers it as null.
    "admin_user_invites/accept": {"details": "admin_user", "token": "str?"},
    "api_tokens/create": {"details": "api_token", "token": "str?"},
    "alerts/count": {"count": "int"},
}
"""Success envelopes that are not ``{status, details}`` of the family's resource: each member
is a resource ``type`` (a reference to its schema) or a field notation."""

SUPPLIED_IDS = frozenset({
    "agents/create", "agent_deployments/create", "agent_spans/create", "people/create",
})
"""The creates that take a caller-supplied ``id`` (the clients' PFIDs); others make their own."""

_FLAG = {"type": "boolean"}
_ID = {"type": "string", "pattern": PFID_PATTERN}
QUERY_PARAMETERS: dict[str, dict[str, dict[str, Any]]] = {
    "agents_show_by_query": {
        "agent_id": _ID,
        "external_identifier": {"type": "string", "minLength": 1, "maxLength": 200},
        "environment_id": _ID,
        "include_counts": _FLAG,
        "include_risk_rollup": _FLAG,
    },
    "agents_show": {"environment_id": _ID, "include_counts": _FLAG, "include_risk_rollup": _FLAG},
    "agent_instances_show": {"redacted": _FLAG},
    "agent_spans_show": {"redacted": _FLAG},
    "alerts_show": {"redacted": _FLAG},
}
"""Query parameters an operation reads beyond pagination and sorting, by operation id."""

_ERROR = "Error"
_ERROR_REF = f"#/components/schemas/{_ERROR}"
_BEARER = "bearerAuth"
_PING_SUMMARY = "Check the service and, when a token is sent, the token"
_OPENAPI_SUMMARY = "This OpenAPI document"


def schema_name(kind: str, *, summary: bool = False) -> str:
    """Name the component schema of a resource: ``AgentInstance``, ``AgentInstanceSummary``."""
    name = "".join(part.capitalize() for part in kind.split("_"))
    return f"{name}Summary" if summary else name


def _ref(kind: str, *, summary: bool = False) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{schema_name(kind, summary=summary)}"}


def _member_schema(notation: str) -> dict[str, Any]:
    return _ref(notation) if notation in RESOURCE_FIELDS else field_schema(notation)


def _envelope(members: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"status": {"const": "success"}, **members},
        "required": ["status", *members],
    }


def _family_verb(route: Route) -> tuple[str, str]:
    family, _, verb = route.operation.partition("/")
    return family, verb


def _success_schema(route: Route) -> dict[str, Any]:
    family, verb = _family_verb(route)
    if route.operation == BULK:
        output = {"type": "object", "properties": {"status": {"enum": ["success", "error"]}},
                  "required": ["status"]}
        return _envelope({"outputs": {"type": "object", "additionalProperties": output}})
    extra = EXTRA_ENVELOPES.get(route.operation)
    if extra is not None:
        return _envelope({name: _member_schema(notation) for name, notation in extra.items()})
    kind = FAMILY_KINDS[family]
    if verb == "list":
        return _envelope({
            "summaries": {"type": "array", "items": _ref(kind, summary=True)},
            "pagination": {"$ref": "#/components/schemas/Pagination"},
            "sorting": {"oneOf": [{"$ref": "#/components/schemas/Sorting"}, {"type": "null"}]},
        })
    return _envelope({"details": _ref(kind)})


def _request_body(route: Route, operation: Operation | None) -> dict[str, Any] | None:
    if route.method not in ("POST", "PUT"):
        return None
    family, verb = _family_verb(route)
    key = {"type": "string", "minLength": KEY_MIN, "maxLength": KEY_MAX}
    properties: dict[str, Any] = {}
    if route.operation == BULK:
        item = {
            "type": "object",
            "properties": {"_type": {"type": "string"}, "idempotency_key": key},
            "required": ["_type", "idempotency_key"],
        }
        properties["items"] = {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_ITEMS}
    elif verb in ("create", "update") and family in FAMILY_KINDS:
        properties.update(writable_fields(FAMILY_KINDS[family]))
        if route.operation not in SUPPLIED_IDS:
            properties.pop("id", None)
    if properties and route.operation != BULK:
        # A null wrapper stands for none, like a null body.
        properties["details"] = {
            "type": ["object", "null"], "properties": dict(properties),
            "additionalProperties": True,
        }
    # null stands for no key, as a null body stands for no body (decisions, HTTP).
    properties["idempotency_key"] = {**key, "type": ["string", "null"]}
    # One schema rather than a oneOf: an object with these members, null (no body), or where
    # the route says so a bare JSON string. Unknown members are ignored (decisions), so said.
    schema: dict[str, Any] = {
        "type": ["object", "null"] if route.bare_body is None else ["object", "null", "string"],
        "properties": properties,
        "additionalProperties": True,
    }
    if route.bare_body is not None:
        schema["description"] = f"an object, or a bare JSON string: the {route.bare_body}"
    if route.operation == BULK:
        schema["required"] = ["items"]
    return {"required": False, "content": {"application/json": {"schema": schema}}}


def _parameters(route: Route, operation: Operation | None) -> list[dict[str, Any]]:
    parameters: list[dict[str, Any]] = [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}
        for name in route.path_parameters
    ]
    family, verb = _family_verb(route)
    if verb == "list":
        parameters += [
            {"name": "pagination[offset]", "in": "query",
             "schema": {"type": "integer", "minimum": 0, "maximum": MAX_OFFSET}},
            {"name": "pagination[page_size]", "in": "query",
             "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE_SIZE}},
            {"name": "sorting", "in": "query", "schema": _sorting_parameter(family),
             "description": "a sortable field, prefixed with - for descending order"},
        ]
    parameters += [
        {"name": name, "in": "query", "schema": schema}
        for name, schema in QUERY_PARAMETERS.get(route.operation_id, {}).items()
    ]
    key = {"type": "string", "minLength": KEY_MIN, "maxLength": KEY_MAX}
    parameters.append({"name": "idempotency_key", "in": "query", "schema": key})
    if operation is None or operation.write:
        # A header value is sent as visible ASCII.
        header = {**key, "pattern": "^[\\x21-\\x7e]+$"}
        parameters.append({"name": "Idempotency-Key", "in": "header", "schema": header})
    return parameters


def _sorting_parameter(family: str) -> dict[str, Any]:
    sortable: tuple[str, ...] = importlib.import_module(
        f"governance_core.operations.{family}"
    ).SORTABLE
    # An empty value asks for the default order, as no value does.
    return {"type": "string", "enum": [*sortable, *(f"-{name}" for name in sortable), ""]}


def _responses(success: dict[str, Any], description: str) -> dict[str, Any]:
    error_content = {"application/json": {"schema": {"$ref": _ERROR_REF}}}
    error = {"description": "an error", "content": error_content}
    return {
        "200": {"description": description, "content": {"application/json": {"schema": success}}},
        "default": error,
    }


def _operation_object(route: Route, operation: Operation | None) -> dict[str, Any]:
    if operation is None:
        summary, description = "Run several operations, in order, each in its own transaction", ""
    else:
        summary = operation.summary
        description = inspect.cleandoc(operation.handler.__doc__ or "")
    family = _family_verb(route)[0]
    spec: dict[str, Any] = {
        "operationId": route.operation_id,
        "summary": summary,
        "tags": [family],
        "parameters": _parameters(route, operation),
        "responses": _responses(_success_schema(route), summary),
    }
    if description and description != summary:
        spec["description"] = description
    body = _request_body(route, operation)
    if body is not None:
        spec["requestBody"] = body
    if operation is not None and not operation.authenticated:
        spec["security"] = []
    return spec


def _components() -> dict[str, Any]:
    schemas: dict[str, Any] = {
        _ERROR: error_schema(_ERROR_REF),
        "Pagination": pagination_schema(),
        "Sorting": sorting_schema(),
    }
    for kind in RESOURCE_FIELDS:
        schemas[schema_name(kind)] = resource_schema(kind)
        schemas[schema_name(kind, summary=True)] = resource_schema(kind, summary=True)
    return {
        "schemas": schemas,
        "securitySchemes": {_BEARER: {"type": "http", "scheme": "bearer"}},
    }


def _own_paths() -> dict[str, Any]:
    ping = {
        "operationId": "ping",
        "summary": _PING_SUMMARY,
        "tags": ["service"],
        "security": [{}, {_BEARER: []}],
        "responses": _responses(_envelope({}), _PING_SUMMARY),
    }
    document = {
        "operationId": "openapi",
        "summary": _OPENAPI_SUMMARY,
        "tags": ["service"],
        "security": [],
        "responses": _responses({"type": "object"}, _OPENAPI_SUMMARY),
    }
    return {f"{PREFIX}/ping": {"get": ping}, f"{PREFIX}/openapi.json": {"get": document}}


def _version() -> str:
    try:
        return version("agent-governance")
    except PackageNotFoundError:
        return "0"


def build_document(routes: Iterable[Route], registry: Mapping[str, Operation]) -> dict[str, Any]:
    """Build the OpenAPI 3.1 document of ``routes``, each served (see ``served_routes``)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        operation = registry.get(route.operation)
        paths.setdefault(route.path, {})[route.method.lower()] = _operation_object(route, operation)
    paths.update(_own_paths())
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Agent governance",
            "version": _version(),
            "description": "Record runs of software agents and score the data risk of what "
            "they do. Every success is HTTP 200 with `status: success`; every error is the "
            "`Error` envelope.",
        },
        "paths": paths,
        "components": _components(),
        "security": [{_BEARER: []}],
    }
