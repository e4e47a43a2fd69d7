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

Request members (:func:`request_schema`) use the same notation and say what the server
accepts: a leading ``!`` marks a required member, and strings are read stripped of surrounding
white space:

    line:N        a string of 1 to N characters once stripped (blank is refused)
    text:N        a string of at most N characters once stripped (blank counts as none)
    email         an email address          int:A..B   an integer from A to B
    nonblank      a string, not all blank   num, num:A..  a number (from A)
    ruleset       a risk profile's ruleset  list:item  an array of items
    data_risk     a span type's data_risk   entries:K  a map (or list) of schema entries
                                                       (K: span_type or payload)
"""

from __future__ import annotations

from typing import Any

from governance_core.fields import SAFE_INTEGER
from governance_core.rules.emails import MAX_EMAIL_LENGTH
from governance_core.rules.risk import (
    ACTION_VALUES,
    ACTIONS,
    CATEGORY_VALUES,
    CLASSIFICATIONS,
    DATA_CATEGORIES,
    MAX_RULESET_NUMBER,
)

__all__ = [
    "EMAIL_PATTERN",
    "ERROR_CODES",
    "NONBLANK_PATTERN",
    "PFID_PATTERN",
    "RESOURCE_FIELDS",
    "SERVER_MANAGED",
    "error_schema",
    "field_schema",
    "pagination_schema",
    "data_risk_schema",
    "request_schema",
    "ruleset_schema",
    "schema_entries_schema",
    "resource_schema",
    "sorting_schema",
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
    "monitor": {
        "id": "id", "account_id": "id", "name": "str",
        "metric": "enum:run_count,failed_runs,error_rate,cost_usd,tokens,p95_duration_seconds,"
        "critical_alerts,high_risk_runs,quality_score_average,policy_denials",
        "comparison": "enum:gt,ge,lt,le", "window_seconds": "int", "status": "enum:active,paused",
        "level": "enum:unknown,ok,warning,critical", "agent_id": "id?", "environment_id": "id?",
        "warning": "num?", "critical": "num?", "hysteresis": "num",
        "evaluate_every_seconds": "int", "last_value": "num?", "last_evaluated_at": "ts?",
        "next_evaluation_at": "ts?", "alert_instance_id": "id?", "description": "str?",
        "version": "int", **_STAMPS,
    },
    "destination": {
        "id": "id", "account_id": "id", "name": "str", "url": "str",
        "status": "enum:active,disabled", "body_format": "enum:standard,slack",
        "event_types": "list:str", "description": "str?", "version": "int", **_STAMPS,
    },
    "delivery": {
        "id": "id", "account_id": "id", "destination_id": "id", "event_id": "id",
        "event_type": "str", "status": "enum:pending,delivered,dead", "next_attempt_at": "ts",
        "attempt_count": "int", "round_attempts": "int", "last_status_code": "int?",
        "last_error": "str?", "last_attempt_at": "ts?", "delivered_at": "ts?",
        "latency_ms": "num?", "attempts": "~list:obj", **_STAMPS,
    },
    "notification_event": {
        "id": "id", "account_id": "id", "event_type": "str", "occurred_at": "ts",
        "inserted_at": "ts", "data": "obj", "subject_id": "id?",
    },
    # Runtime governance (decisions, section 16).
    "policy": {
        "id": "id", "account_id": "id", "name": "str", "description": "str?",
        "mode": "enum:enforce,observe,disabled", "source": "str", "scope": "obj",
        "version": "int", "created_at": "ts", "updated_at": "ts",
    },
    "decision": {
        "id": "id", "account_id": "id", "agent_instance_id": "id", "agent_id": "id",
        "environment_id": "id", "action": "obj", "outcome": "enum:allow,deny,pending_approval",
        "observed_outcome": "enum:allow,deny,pending_approval?", "warnings": "list:str",
        "reasons": "list:obj", "approval_id": "id?", "agent_span_id": "id?", "decided_at": "ts",
        "interception": "obj?", "approval": "~obj?",
    },
    "approval": {
        "id": "id", "account_id": "id", "agent_instance_id": "id", "agent_id": "id",
        "environment_id": "id", "decision_id": "id", "action": "obj", "digest": "str",
        "status": "enum:pending,approved,rejected,expired", "reasons": "list:obj",
        "expires_at": "ts", "resolved_at": "ts?", "resolved_by": "obj?",
        "resolution_reason": "str?", "consumed_at": "ts?", "consumed_by_decision_id": "id?",
        "created_at": "ts", "updated_at": "ts",
    },
}
"""Each resource ``type`` and its fields, in the notation of this module's docstring."""

SERVER_MANAGED = frozenset({
    "account_id", "status", "type", "version", "inserted_at", "updated_at", "agent_count",
    "people_count", "instance_counts", "available_actions", "span_counts", "span_schema_counts",
    "raised_alert_count", "cost_breakdown", "risk_score", "quality_summaries", "summary",
    "last_activity_span_at", "last_active_at", "last_used_at", "current_agent_deployment_refs",
    "switchable_account_summaries", "token", "invite_url",
    "level", "last_value", "last_evaluated_at", "next_evaluation_at", "alert_instance_id",
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


def _space_class() -> str:
    r"""The characters ``str.strip`` removes, as the inside of a regular expression class.

    Spelled out rather than ``\s``, whose meaning varies between regular expression engines
    (Python's holds ``\x1c`` to ``\x1f``, ECMA-262's does not).
    """
    spaces = [code for code in range(0x3001) if chr(code).isspace()]
    ranges: list[tuple[int, int]] = []
    for code in spaces:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    return "".join(
        f"\\u{low:04x}" if low == high else f"\\u{low:04x}-\\u{high:04x}" for low, high in ranges
    )


_SPACE = _space_class()
_WS = f"[{_SPACE}]"
_NOT_WS = f"[^{_SPACE}]"


def _stripped(most: int, *, blank: bool) -> str:
    """A pattern for strings of at most ``most`` characters once stripped.

    At least one unless ``blank``: what the server reads of a string member.
    """
    middle = f"(?:[\\s\\S]{{0,{most - 2}}}{_NOT_WS})?" if most > 1 else ""
    core = f"{_NOT_WS}{middle}"
    return f"^{_WS}*(?:{core})?{_WS}*$" if blank else f"^{_WS}*{core}{_WS}*$"


EMAIL_PATTERN = f"^{_WS}*[^@{_SPACE}]+@[^@{_SPACE}]+\\.[^@{_SPACE}]+{_WS}*$"
"""An email address as the server reads it (surrounding white space is stripped)."""

NONBLANK_PATTERN = _NOT_WS
"""A string that is not all white space."""


def ruleset_schema() -> dict[str, Any]:
    """Return the schema of a risk profile's ruleset (``governance_core.rules.risk``).

    One rule is beyond a schema: the thresholds must rise, ``medium < high < critical``.
    """
    weight = {"type": ["number", "null"], "minimum": 0, "maximum": int(MAX_RULESET_NUMBER)}
    threshold = {"type": "number", "exclusiveMinimum": 0, "maximum": int(MAX_RULESET_NUMBER)}

    def numbers(keys: tuple[str, ...]) -> dict[str, Any]:
        return {
            "type": "object", "properties": dict.fromkeys(keys, weight),
            "additionalProperties": False,
        }

    return {
        "type": "object",
        "properties": {
            "category_weights": numbers(DATA_CATEGORIES),
            "action_multipliers": numbers(ACTIONS),
            "thresholds": {
                "type": "object",
                "properties": dict.fromkeys(("medium", "high", "critical"), threshold),
                "required": ["medium", "high", "critical"],
                "additionalProperties": False,
                "description": "medium < high < critical",
            },
        },
        "required": ["category_weights", "action_multipliers", "thresholds"],
        "additionalProperties": False,
    }


def data_risk_schema() -> dict[str, Any]:
    """Return the schema of a span type's ``data_risk`` declaration (null declares nothing)."""

    def flags(keys: dict[str, tuple[str, ...]]) -> dict[str, Any]:
        return {
            "type": ["object", "null"],
            "properties": {key: {"enum": [*values, None]} for key, values in keys.items()},
            "additionalProperties": False,
        }

    categories = {
        **dict.fromkeys(DATA_CATEGORIES, CATEGORY_VALUES), "classification": CLASSIFICATIONS,
    }
    return {
        "type": ["object", "null"],
        "properties": {
            "action_profile": flags(dict.fromkeys(ACTIONS, ACTION_VALUES)),
            "params_data_categories": flags(categories),
            "result_data_categories": flags(categories),
        },
        "additionalProperties": False,
    }


_ENTRY_NAME = {"type": "string", "pattern": NONBLANK_PATTERN, "maxLength": 200}
_ENTRY_TEXT = {"type": ["string", "null"], "maxLength": 10_000}


def schema_entries_schema(kind: str) -> dict[str, Any]:
    """Return the schema of a schema version's map of entries (``span_type`` or ``payload``).

    The map's keys are the names; the same entries may come as a list, each with its
    ``name`` (the names unique, which a schema cannot state). Schemas and templates that do
    not compile are stored and reported, not refused.
    """
    schemas = ("params_schema", "result_schema") if kind == "span_type" else ("schema",)
    properties: dict[str, Any] = {
        "title": _ENTRY_TEXT, "description": _ENTRY_TEXT, "template": _ENTRY_TEXT,
        "data_risk": data_risk_schema(), **{key: {} for key in schemas},
    }
    entry = {"type": "object", "properties": properties}
    named = {
        "type": "object", "properties": {**properties, "name": _ENTRY_NAME}, "required": ["name"],
    }
    return {
        "type": ["object", "array", "null"],
        "propertyNames": _ENTRY_NAME,
        "additionalProperties": entry,
        "items": named,
    }


def request_schema(notation: str) -> dict[str, Any]:
    """Return the JSON Schema of a request member's notation (see the module docstring)."""
    nullable = notation.endswith("?")
    kind = notation.removeprefix("!").removesuffix("?")
    schema: dict[str, Any]
    if kind.startswith(("line:", "text:")):
        most = int(kind.partition(":")[2])
        schema = {"type": "string", "pattern": _stripped(most, blank=kind.startswith("text:"))}
    elif kind == "email":
        schema = {"type": "string", "pattern": EMAIL_PATTERN, "maxLength": MAX_EMAIL_LENGTH}
    elif kind.startswith("int"):
        low, _, high = kind.partition(":")[2].partition("..")
        schema = {
            "type": "integer",
            "minimum": int(low) if low else -SAFE_INTEGER,
            "maximum": int(high) if high else SAFE_INTEGER,
        }
    elif kind == "ruleset":
        schema = ruleset_schema()
    elif kind == "data_risk":
        schema = data_risk_schema()
    elif kind.startswith("entries:"):
        schema = schema_entries_schema(kind.removeprefix("entries:"))
    elif kind == "nonblank":
        schema = {"type": "string", "pattern": NONBLANK_PATTERN}
    elif kind.startswith("num"):
        schema = {"type": "number"}
        low = kind.partition(":")[2].partition("..")[0]
        if low:
            schema["minimum"] = float(low)
    elif kind.startswith("list:"):
        schema = {"type": "array", "items": request_schema(kind.removeprefix("list:"))}
    else:
        schema = field_schema(kind)
    if nullable:
        schema = _or_null(schema)
    return schema


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    kind = schema.get("type")
    if isinstance(kind, str):
        widened = {**schema, "type": [kind, "null"]}
        if "enum" in schema:
            widened["enum"] = [*schema["enum"], None]
        return widened
    if isinstance(kind, list):
        return schema if "null" in kind else {**schema, "type": [*kind, "null"]}
    return {"anyOf": [schema, {"type": "null"}]}
