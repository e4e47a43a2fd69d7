"""The OpenAPI 3.1 document of the API, generated from the route table and the registry.

Summaries are the handlers' docstrings, parameters come from the path templates and the
operation's verb, success envelopes from the resource field table in
:mod:`governance_http.schemas` (the few that carry more than one resource from
``EXTRA_ENVELOPES``), and request bodies from ``REQUEST_MEMBERS``: what each write reads, as
the server reads it (required members, lengths once stripped, choices, ranges), so a request
the document accepts is one the server accepts, but for rules a schema cannot state (a
reference must name an existing resource; see docs/decisions.md).
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Collection, Iterable, Mapping
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from governance_core.bulk import BULK, MAX_ITEMS
from governance_core.idempotency import KEY_MAX, KEY_MIN
from governance_core.models.accounts import ACCOUNT_PURPOSES, ENVIRONMENT_PURPOSES, TOKEN_SCOPES
from governance_core.models.agents import ALERT_SEVERITIES, RUN_PURPOSES
from governance_core.models.description import enum
from governance_core.models.notifications import (
    BODY_FORMATS,
    DESTINATION_STATUSES,
    MONITOR_STATUSES,
)
from governance_core.models.policies import APPROVAL_STATUSES, OUTCOMES
from governance_core.models.policies import MODES as POLICY_MODES
from governance_core.notifications import NOTIFICATION_KINDS
from governance_core.notifications.monitors import COMPARISONS, METRICS
from governance_core.notifications.outbox import EVENT_TYPES
from governance_core.operations.decisions import APPROVAL_TTL_MS
from governance_core.operations.policies import BACKTEST_DAYS, BACKTEST_LIMIT
from governance_core.operations.policies import SOURCE_MAX as POLICY_SOURCE_MAX
from governance_core.operations.run_export import CURSOR_PATTERN, EXPORT_PAGE_MAX
from governance_core.pagination import MAX_OFFSET, MAX_PAGE_SIZE
from governance_core.policies.backtest import BACKTEST_MODES
from governance_core.policies.schema import KIND_ACTIONS
from governance_core.registry import Operation
from governance_core.repository import KIND_TABLES
from governance_core.rules.states import FINISH_STATUSES, SPAN_CREATE_STATES
from governance_http.routes import JSON_LINES_EXPORT, PREFIX, RUN_EXPORT, Route
from governance_http.schemas import (
    NONBLANK_PATTERN,
    PFID_PATTERN,
    RESOURCE_FIELDS,
    error_schema,
    field_schema,
    pagination_schema,
    request_schema,
    resource_schema,
    sorting_schema,
)

__all__ = [
    "EXTRA_ENVELOPES",
    "FAMILY_KINDS",
    "QUERY_PARAMETERS",
    "REQUEST_MEMBERS",
    "build_document",
    "schema_name",
]

FAMILY_KINDS: dict[str, str] = {
    **{table: kind for kind, table in KIND_TABLES.items()}, **NOTIFICATION_KINDS,
}
"""Each operation family (``teams``) and the resource ``type`` it answers (``team``)."""

EXTRA_ENVELOPES: dict[str, dict[str, str]] = {
    "playground/create_loan_application_review_agent": {"agent": "agent"},
    "playground/register_loan_application_review_agent_instance": {
        "details": "agent_instance",
        "agent_version": "agent_version",
        "agent_schema_version": "agent_schema_version",
    },
    "playground/record_loan_application_review_spans": {"ids": "ids", "alert_ids": "ids"},
    # The secret is shown once: a replayed create or accept answers it as null.
    "admin_user_invites/accept": {"details": "admin_user", "token": "str?"},
    "api_tokens/create": {"details": "api_token", "token": "str?"},
    "alerts/count": {"count": "int"},
    "destinations/create": {"details": "destination", "secret": "str?"},
    "destinations/rotate_secret": {"details": "destination", "secret": "str?"},
    "monitors/evaluate": {"evaluated": "list:obj"},
    RUN_EXPORT: {"details": "agent_instance", "spans": "list:agent_span", "next_cursor": "str?"},
    "policies/validate": {"valid": "bool", "problems": "list:obj"},
    "policies/test": {
        "policy": "obj", "window": "obj", "runs": "int", "spans": "int", "outcomes": "obj",
        "observed_outcomes": "obj?", "warnings": "int", "errors": "int",
        "stopped_runs": "obj", "stopped_spans": "obj",
    },
}
"""Success envelopes that are not ``{status, details}`` of the family's resource: each member
is a resource ``type`` (a reference to its schema) or a field notation."""

_AGENT_REFERENCES: dict[str, str | dict[str, Any]] = {
    "owner_person_id": "id?", "risk_profile_id": "id?", "team_id": "id?",
}
_FINISH = enum(*FINISH_STATUSES, nullable=True)
_TIMED: dict[str, str | dict[str, Any]] = {"timestamp": "ts?"}
_LEGACY_MAP = {
    "type": ["object", "null"], "propertyNames": {"pattern": NONBLANK_PATTERN, "maxLength": 200},
}
_SCHEMA_VERSION = {
    "type": ["object", "null"],
    "properties": {
        "external_identifier": request_schema("text:200?"),
        "span_type_schemas": request_schema("entries:span_type"),
        "alert_schemas": request_schema("entries:payload"),
        "quality_schemas": request_schema("entries:payload"),
        "span_schemas": _LEGACY_MAP,
        "span_result_schemas": _LEGACY_MAP,
    },
}
_AGENT_VERSION = {
    "type": "object",
    "properties": {
        "external_identifier": request_schema("line:200"),
        "name": request_schema("text:10000?"),
        "description": request_schema("text:10000?"),
        "runtime_environment": request_schema("obj?"),
    },
    "required": ["external_identifier"],
}

_POLICY_SOURCE = f"line:{POLICY_SOURCE_MAX}"
_POLICY_SCOPE: dict[str, Any] = {
    "type": ["object", "null"],
    "properties": {
        "environment_ids": request_schema("ids?"), "agent_ids": request_schema("ids?"),
    },
}
_DECIDE_ACTION: dict[str, Any] = {
    "type": "object",
    "properties": {
        "kind": {"enum": list(KIND_ACTIONS)},
        "name": request_schema("line:200"),
        "args": request_schema("obj?"),
        "span_type": request_schema("text:200?"),
    },
    "required": ["kind", "name"],
}
REQUEST_MEMBERS: dict[str, dict[str, str | dict[str, Any]]] = {
    "accounts/update": {
        "name": "line:200", "purpose": enum(*ACCOUNT_PURPOSES),
        "organisation_name": "text:200?", "website": "text:2000?", "promo_code": "text:100?",
    },
    "admin_users/update": {"name": "line:200", "job_title": "text:200?",
                           "profile_completed_at": "ts?"},
    "admin_user_invites/create": {"email": "!email", "account_id": "id?"},
    "admin_user_invites/accept": {"token": "!line:1000", "name": "text:200?"},
    "api_tokens/create": {
        "token_scope": enum(*TOKEN_SCOPES), "agent_id": "id?",
        "environment_id": "id?", "expires_at": "ts?", "description": "text:1000?",
    },
    "people/create": {"id": "id?", "name": "!line:200", "email": "!email", "title": "text:200?",
                      "team_ids": "ids?"},
    "people/update": {"name": "line:200", "email": "email", "title": "text:200?",
                      "team_ids": "ids?"},
    "teams/create": {"name": "!line:200"},
    "teams/update": {"name": "line:200"},
    "environments/create": {
        "name": "!line:200", "purpose": enum(*ENVIRONMENT_PURPOSES, nullable=True),
        "external_identifier": "text:500?", "description": "text:10000?",
    },
    "environments/update": {
        "name": "line:200", "purpose": enum(*ENVIRONMENT_PURPOSES),
        "external_identifier": "text:500?", "description": "text:10000?",
    },
    "risk_profiles/create": {"name": "!line:200", "description": "text:10000?",
                             "ruleset": "!ruleset"},
    "risk_profiles/update": {"name": "line:200", "description": "text:10000?",
                             "ruleset": "ruleset"},
    "agents/create": {"id": "id?", "name": "!line:200", "description": "text:10000?",
                      "external_identifier": "text:200?", **_AGENT_REFERENCES},
    "agents/update": {"name": "line:200", "description": "text:10000?",
                      "external_identifier": "text:200?", **_AGENT_REFERENCES},
    "agent_deployments/create": {"id": "id?", "agent_id": "!id", "environment_id": "!id",
                                 "current_version_id": "id?"},
    "agent_deployments/update": {"current_version_id": "id?"},
    "agent_instances/register": {
        "id": "id?", "agent_id": "!id", "environment_id": "id?",
        "purpose": enum(*RUN_PURPOSES, nullable=True), "external_identifier": "text:200?",
        "update_current_version": "bool?", "agent_version": _AGENT_VERSION,
        "agent_schema_version": _SCHEMA_VERSION,
    },
    "agent_instances/update": {"quality_payload": "map:obj?", "sensitive_encoding": "bool?"},
    "agent_instances/start": _TIMED,
    "agent_instances/finish": {"status": _FINISH, **_TIMED},
    "agent_instances/terminate": {"reason": "!line:2000"},
    "agent_instances/record_quality": {"name": "!line:200", "payload": "obj?",
                                       "sensitive_encoding": "bool?"},
    "agent_spans/create": {
        "id": "id?", "agent_instance_id": "!id", "parent_span_id": "id?",
        "schema_name": "!line:200", "status": "!" + enum(*SPAN_CREATE_STATES),
        "purpose": "enum:activity?", "payload": "obj?", "result_payload": "obj?",
        "sensitive_encoding": "bool?", "started_at": "ts?", "finished_at": "ts?",
    },
    "agent_spans/finish": {"status": _FINISH, "result_payload": "obj?",
                           "sensitive_encoding": "bool?", **_TIMED},
    "alerts/raise": {
        "agent_instance_id": "!id", "name": "!line:200",
        "severity": "!" + enum(*ALERT_SEVERITIES), "payload": "obj?", "raised_at": "ts?",
        "payload_sensitive_encoding": "bool?",
    },
    "alerts/clear": {"agent_instance_id": "!nonblank", "name": "text:200?"},
    "monitors/create": {
        "name": "!line:150", "metric": "!enum:" + ",".join(METRICS),
        "comparison": "enum:" + ",".join(COMPARISONS), "window_seconds": "!int:60..7776000",
        "evaluate_every_seconds": "int:10..86400", "status": enum(*MONITOR_STATUSES),
        "hysteresis": "num:0..?", "agent_id": "id?", "environment_id": "id?", "warning": "num?",
        "critical": "num?", "description": "text:2000?",
    },
    "monitors/update": {
        "name": "line:150", "metric": "enum:" + ",".join(METRICS),
        "comparison": "enum:" + ",".join(COMPARISONS), "window_seconds": "int:60..7776000",
        "evaluate_every_seconds": "int:10..86400", "status": enum(*MONITOR_STATUSES),
        "hysteresis": "num:0..?", "agent_id": "id?", "environment_id": "id?", "warning": "num?",
        "critical": "num?", "description": "text:2000?",
    },
    "monitors/evaluate": {"monitor_id": "id?"},
    "destinations/create": {
        "name": "!line:200", "url": "!line:2000", "body_format": enum(*BODY_FORMATS, nullable=True),
        "event_types": "list:enum:" + ",".join(EVENT_TYPES) + "?",
        "description": "text:2000?",
    },
    "destinations/update": {
        "name": "line:200", "url": "line:2000", "body_format": enum(*BODY_FORMATS),
        "status": enum(*DESTINATION_STATUSES), "event_types": "list:enum:" + ",".join(EVENT_TYPES)
        + "?", "description": "text:2000?",
    },
    "destinations/rotate_secret": {"grace_seconds": "int:0..604800?"},
    "playground/register_loan_application_review_agent_instance": {
        "agent_id": "!id", "environment_id": "id?", "id": "id?",
    },
    "playground/record_loan_application_review_spans": {},
    "policies/create": {
        "name": "!line:200", "description": "text:10000?",
        "mode": "enum:" + ",".join(POLICY_MODES), "source": "!" + _POLICY_SOURCE,
        "scope": _POLICY_SCOPE,
    },
    "policies/update": {
        "name": "line:200", "description": "text:10000?",
        "mode": "enum:" + ",".join(POLICY_MODES),
        "source": _POLICY_SOURCE, "scope": _POLICY_SCOPE,
    },
    "policies/validate": {"source": "!" + _POLICY_SOURCE},
    "policies/test": {
        "source": "!" + _POLICY_SOURCE, "policy_id": "id?",
        "mode": "enum:" + ",".join(BACKTEST_MODES), "scope": _POLICY_SCOPE,
        "days": f"int:{BACKTEST_DAYS[0]}..{BACKTEST_DAYS[1]}", "agent_id": "id?",
        "environment_id": "id?", "limit": f"int:{BACKTEST_LIMIT[0]}..{BACKTEST_LIMIT[1]}",
    },
    "decisions/decide": {
        "agent_instance_id": "!id", "action": _DECIDE_ACTION,
        "expires_in_ms": f"int:{APPROVAL_TTL_MS[0]}..{APPROVAL_TTL_MS[1]}?",
    },
    "approvals/approve": {"reason": "text:2000?"},
    "approvals/reject": {"reason": "text:2000?"},
}
"""What each write reads from its body, in the request notation of
:mod:`governance_http.schemas` (or as a schema). A write not listed reads nothing from it."""

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
    "policies_list": {"mode": {"enum": list(POLICY_MODES)}},
    "decisions_list": {"agent_instance_id": _ID, "outcome": {"enum": list(OUTCOMES)}},
    "approvals_list": {"agent_instance_id": _ID, "status": {"enum": list(APPROVAL_STATUSES)}},
    "agent_instances_export": {
        "cursor": {"type": "string", "pattern": CURSOR_PATTERN},
        "page_size": {"type": "integer", "minimum": 1, "maximum": EXPORT_PAGE_MAX},
        "redacted": _FLAG,
    },
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
    listed = notation.removeprefix("list:")
    if listed != notation and listed in RESOURCE_FIELDS:
        return {"type": "array", "items": _ref(listed)}
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


def _request_body(route: Route, operation_names: Collection[str]) -> dict[str, Any] | None:
    if route.method not in ("POST", "PUT"):
        return None
    key = {"type": "string", "minLength": KEY_MIN, "maxLength": KEY_MAX}
    properties: dict[str, Any] = {}
    required: list[str] = []
    for name, notation in REQUEST_MEMBERS.get(route.operation, {}).items():
        if isinstance(notation, str):
            properties[name] = request_schema(notation)
            if notation.startswith("!"):
                required.append(name)
        else:
            properties[name] = notation
            if "null" not in notation.get("type", ()):
                required.append(name)
    if route.operation == BULK:
        item = {
            "type": "object",
            "properties": {
                "_type": {"enum": sorted(name for name in operation_names if name != BULK)},
                "idempotency_key": key,
            },
            "required": ["_type", "idempotency_key"],
        }
        properties["items"] = {"type": "array", "items": item, "minItems": 1, "maxItems": MAX_ITEMS}
        required.append("items")
    # Bulk reads ``items`` bare, and from ``details`` only when there is no bare one: the
    # document gives the bare form.
    wrapped = bool(properties) and route.operation != BULK
    if wrapped:
        # The members may also come wrapped in ``details``, whose members win; a null
        # wrapper stands for none, like a null body.
        properties["details"] = {
            "type": ["object", "null"], "properties": dict(properties),
            "additionalProperties": True,
        }
    if route.operation != BULK:
        # null stands for no key, as a null body stands for no body (decisions, HTTP).
        properties["idempotency_key"] = {**key, "type": ["string", "null"]}
    kinds = ["object"] if required else ["object", "null"]
    if route.bare_body is not None:
        kinds.append("string")
    # One schema rather than a oneOf: an object with these members, null (no body) unless a
    # member is required, or where the route says so a bare JSON string. Unknown members are
    # ignored (decisions), so said.
    schema: dict[str, Any] = {
        "type": kinds, "properties": properties, "additionalProperties": True,
    }
    if required and not wrapped:
        schema["required"] = required
    elif required:
        # Each required member is sent bare or inside ``details``.
        schema["allOf"] = [
            {"anyOf": [
                {"required": [name]},
                {"required": ["details"],
                 "properties": {"details": {"type": "object", "required": [name]}}},
            ]}
            for name in required
        ]
    if route.bare_body is not None:
        schema["description"] = f"an object, or a bare JSON string: the {route.bare_body}"
        bare = properties.get(route.bare_body, {})
        schema["pattern"] = bare.get("pattern", NONBLANK_PATTERN)
    return {"required": bool(required),
            "content": {"application/json": {"schema": schema}}}


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
    if route.operation == BULK:
        # Bulk takes no key of its own: each item carries one.
        return parameters
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


def _operation_object(
    route: Route, operation: Operation | None, operation_names: Collection[str]
) -> dict[str, Any]:
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
    body = _request_body(route, operation_names)
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


_JSON_LINES_SUMMARY = "Export a run whole as JSON Lines: its details, then one span a line"
_JSON_LINES_DESCRIPTION = (
    "The answer (application/x-ndjson) holds one JSON object a line: the run's AgentInstance "
    "details first, then each AgentSpan in start order (started_at, then id), redacted unless "
    "redacted=false is asked by an account token. The query is agent_instances_export's; it "
    "is read page after page of page_size spans. A bad token, run or member answers the JSON "
    "error before any line."
)


def _json_lines_path(export: Route, operation: Operation | None) -> dict[str, Any]:
    """The path item of the JSON Lines form of ``export`` (the run export route)."""
    lines = {"type": "string", "description": "JSON Lines: an AgentInstance, then AgentSpans"}
    error_content = {"application/json": {"schema": {"$ref": _ERROR_REF}}}
    spec = {
        "operationId": f"{export.operation_id}_jsonl",
        "summary": _JSON_LINES_SUMMARY,
        "description": _JSON_LINES_DESCRIPTION,
        "tags": [_family_verb(export)[0]],
        "parameters": _parameters(export, operation),
        "responses": {
            "200": {"description": _JSON_LINES_SUMMARY,
                    "content": {"application/x-ndjson": {"schema": lines}}},
            "default": {"description": "an error", "content": error_content},
        },
    }
    return {PREFIX + JSON_LINES_EXPORT: {"get": spec}}


def _version() -> str:
    try:
        return version("agent-runs-governance")
    except PackageNotFoundError:
        return "0"


def build_document(routes: Iterable[Route], registry: Mapping[str, Operation]) -> dict[str, Any]:
    """Build the OpenAPI 3.1 document of ``routes``, each served (see ``served_routes``)."""
    paths: dict[str, dict[str, Any]] = {}
    for route in routes:
        operation = registry.get(route.operation)
        paths.setdefault(route.path, {})[route.method.lower()] = _operation_object(
            route, operation, registry
        )
        if route.operation == RUN_EXPORT:
            paths.update(_json_lines_path(route, operation))
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
