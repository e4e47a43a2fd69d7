"""JSON Schemas of the resources, generated from one table of their fields.

``RESOURCE_FIELDS`` transcribes the interface's field lists (interface.md, "Resources and their
fields") in a short notation; every schema of the OpenAPI document is generated from it:

    id            a PFID                 ids       an array of PFIDs
    str int num bool ts obj              a string, integer, number, boolean, date-time, object
    enum:a,b      one of the values      map:str / map:obj   an object of strings / of objects
    any           any JSON value         list:obj  an array of objects

A trailing ``?`` makes the field nullable; a leading ``~`` makes it optional (it may be
absent). Every other field is always present. A summary (a list row) is the same resource,
of which only ``id`` and ``type`` are required.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "ERROR_CODES",
    "PFID_PATTERN",
    "RESOURCE_FIELDS",
    "SERVER_MANAGED",
    "error_schema",
    "field_schema",
    "pagination_schema",
    "resource_schema",
    "sorting_schema",
    "writable_fields",
]

PFID_PATTERN = "^[0-7][0-9abcdefghjkmnpqrstvwxyz]{31}$"

_STAMPS = {"inserted_at": "ts", "updated_at": "ts"}

RESOURCE_FIELDS: dict[str, dict[str, str]] = {
    "account": {
        "id": "id", "name": "str", "inserted_at": "ts", "organisation_name": "str?",
        "promo_code": "str?", "website": "str?",
        "purpose": "enum:business,personal,nonprofit,education,government",
    },
    "admin_user": {
        "id": "id", "account_id": "id", "email": "str", "name": "str?", "job_title": "str?",
        "last_active_at": "ts?", "profile_completed_at": "ts?",
        "switchable_account_summaries": "list:obj", **_STAMPS,
    },
    "admin_user_invite": {
        "id": "id", "account_id": "id", "email": "str", "invite_url": "str", "token": "str?",
        "status": "str", **_STAMPS,
    },
    "api_token": {
        "id": "id", "account_id": "id", "token_scope": "enum:account,agent_deployment",
        "status": "enum:active,suspended,revoked", "agent_id": "~id?", "environment_id": "~id?",
        "expires_at": "~ts?", "last_used_at": "~ts?", **_STAMPS,
    },
    "person": {
        "id": "id", "name": "str", "email": "str", "title": "str?", "team_ids": "ids", **_STAMPS,
    },
    "team": {"id": "id", "name": "str", "agent_count": "int", "people_count": "int", **_STAMPS},
    "environment": {
        "id": "id", "account_id": "id", "name": "str", "purpose": "str",
        "external_identifier": "any", "description": "~str?",
    },
    "risk_profile": {
        "id": "id", "account_id": "~id", "name": "str", "description": "~str?", "ruleset": "obj",
        **_STAMPS,
    },
    "agent_deployment": {
        "id": "id", "account_id": "id", "agent_id": "id", "environment_id": "id",
        "current_version_id": "id?", **_STAMPS,
    },
    "agent": {
        "id": "id", "name": "str", "description": "str?", "external_identifier": "str?",
        "status": "enum:pending,active,dormant,retired", "owner_person_id": "id?",
        "risk_profile_id": "id?", "team_id": "id?", "last_activity_span_at": "ts?",
        "instance_counts": "obj", "available_actions": "obj", **_STAMPS,
    },
    "agent_version": {
        "id": "id", "account_id": "id", "agent_id": "id", "agent_schema_version_id": "id",
        "external_identifier": "str", "current_agent_deployment_refs": "ids",
        "runtime_environment": "obj?", **_STAMPS,
    },
    "agent_schema_version": {
        "id": "id", "account_id": "id", "agent_id": "id", "external_identifier": "str",
        "span_type_schemas": "map:obj", "alert_schemas": "~map:obj",
        "quality_schemas": "~map:obj", "current_version": "~bool", "environment_id": "~id?",
        "current_agent_deployment_refs": "~ids", **_STAMPS,
    },
    "agent_instance": {
        "id": "id", "account_id": "id", "agent_id": "id", "agent_version_id": "id",
        "agent_deployment_id": "id", "environment_id": "id", "external_identifier": "str?",
        "purpose": "enum:live,smoke_test,eval",
        "status": "enum:pending,active,complete,failed,cancelled,terminated",
        "termination_reason": "~str?", "started_at": "ts?", "finished_at": "ts?",
        "last_activity_span_at": "ts?", "raised_alert_count": "int?",
        "quality_payloads": "map:obj", "quality_summaries": "map:str", "span_counts": "obj",
        "span_schema_counts": "obj?", "cost_breakdown": "obj?", "risk_score": "obj?", **_STAMPS,
    },
    "agent_span": {
        "id": "id", "account_id": "id", "agent_id": "id", "agent_instance_id": "id",
        "parent_span_id": "id?", "schema_name": "str", "schema_title": "str",
        "status": "enum:active,complete,failed,cancelled", "purpose": "enum:activity,quality,alert",
        "started_at": "ts", "finished_at": "ts?", "payload": "obj", "result_payload": "obj?",
        "sensitive_encoding": "bool", "data_risk": "obj?", "summary": "str?",
    },
    "alert": {
        "id": "id", "account_id": "id", "agent_id": "id", "agent_instance_id": "id",
        "environment_id": "id", "name": "str", "title": "str", "summary": "str?",
        "severity": "enum:critical,error,warning,info", "status": "enum:raised,cleared",
        "payload": "obj", "payload_sensitive_encoding": "bool", "raised_at": "ts",
        "cleared_at": "ts?", "version": "int", **_STAMPS,
    },
}
"""Each resource ``type`` and its fields, in the notation of this module's docstring."""

SERVER_MANAGED = frozenset({
    "account_id", "status", "type", "version", "inserted_at", "updated_at", "agent_count",
    "people_count", "instance_counts", "available_actions", "span_counts", "span_schema_counts",
    "raised_alert_count", "cost_breakdown", "risk_score", "quality_summaries", "summary",
    "last_activity_span_at", "last_active_at", "last_used_at", "current_agent_deployment_refs",
    "switchable_account_summaries", "token", "invite_url",
})
"""Fields a request body can never set (decisions, section 1)."""

ERROR_CODES = (
    "bad_request", "bad_authtoken", "not_authenticated", "not_permitted", "not_implemented",
    "unknown", "not_found", "unexpected_ref_type", "unexpected", "invalid_action",
    "alert_unknown", "alert_already_cleared", "invalid_value", "required_value",
    "idempotency_key_already_used", "temporarily_unavailable", "conflict", "validation_errors",
)
"""Every error code of the interface."""

_SCALARS: dict[str, dict[str, Any]] = {
    "id": {"type": "string", "pattern": PFID_PATTERN},
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "num": {"type": "number"},
    "bool": {"type": "boolean"},
    "ts": {"type": "string", "format": "date-time"},
    "obj": {"type": "object"},
    "any": {},
}


def field_schema(notation: str) -> dict[str, Any]:
    """Return the JSON Schema of one field notation."""
    nullable = notation.endswith("?")
    kind = notation.removeprefix("~").removesuffix("?")
    schema: dict[str, Any]
    if kind.startswith("enum:"):
        schema = {"type": "string", "enum": kind.removeprefix("enum:").split(",")}
    elif kind == "ids":
        schema = {"type": "array", "items": _SCALARS["id"]}
    elif kind.startswith("map:"):
        schema = {"type": "object", "additionalProperties": field_schema(kind.removeprefix("map:"))}
    elif kind.startswith("list:"):
        schema = {"type": "array", "items": field_schema(kind.removeprefix("list:"))}
    else:
        schema = dict(_SCALARS[kind])
    if nullable and "type" in schema:
        schema["type"] = [schema["type"], "null"]
        if "enum" in schema:
            schema["enum"] = [*schema["enum"], None]
    return schema


def resource_schema(kind: str, *, summary: bool = False) -> dict[str, Any]:
    """Return the schema of a resource of ``kind`` (a list row's with ``summary``)."""
    fields = RESOURCE_FIELDS[kind]
    required = ["id", "type"] if summary else [
        name for name, notation in fields.items() if not notation.startswith("~")
    ] + ["type"]
    return {
        "type": "object",
        "properties": {
            **{name: field_schema(notation) for name, notation in fields.items()},
            "type": {"const": kind},
        },
        "required": required,
    }


def writable_fields(kind: str) -> dict[str, dict[str, Any]]:
    """Return the members a create or update body of ``kind`` may carry, with schemas."""
    return {
        name: field_schema(notation)
        for name, notation in RESOURCE_FIELDS[kind].items()
        if name not in SERVER_MANAGED
    }


def error_schema(ref: str) -> dict[str, Any]:
    """Return the error envelope's schema; ``ref`` points at it (errors nest)."""
    return {
        "type": "object",
        "properties": {
            "status": {"const": "error"},
            "code": {"type": "string", "enum": list(ERROR_CODES)},
            "message": {"type": "string"},
            "errors": {"type": "object", "additionalProperties": {"$ref": ref}},
            "retry_after_ms": {"type": "integer", "minimum": 0},
        },
        "required": ["status", "code", "message"],
    }


def pagination_schema() -> dict[str, Any]:
    """Return the schema of the pagination object."""
    counts = ("item_count", "item_start", "item_end", "page_count", "page_index", "page_offset",
              "page_size")
    offsets = ("next_page_offset", "previous_page_offset")
    return {
        "type": "object",
        "properties": {
            **{name: {"type": "integer"} for name in counts},
            **{name: {"type": ["integer", "null"]} for name in offsets},
        },
        "required": [*counts, *offsets],
    }


def sorting_schema() -> dict[str, Any]:
    """Return the schema of the sorting object."""
    return {
        "type": "object",
        "properties": {
            "direction": {"enum": ["asc", "desc"]},
            "field": {"type": "string"},
            "nulls": {"enum": ["first", "last", "auto"]},
        },
        "required": ["direction", "field"],
    }
