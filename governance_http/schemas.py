"""JSON Schemas of the resources, generated from their models.

``RESOURCE_FIELDS`` holds the fields each resource's views show in a short notation, read from
its model (:mod:`governance_core.models.description`); every schema of the OpenAPI document is
generated from it:

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
from governance_core.models import RESOURCE_MODELS
from governance_core.models.description import (
    description_of,
    sensitive_fields,
    server_managed_fields,
    view_notations,
)
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
    "SENSITIVE",
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

RESOURCE_FIELDS: dict[str, dict[str, str]] = {
    description_of(model).kind: dict(view_notations(model)) for model in RESOURCE_MODELS
}
"""Each resource ``type`` and the fields its views show, in the notation of this module's
docstring: read from the resource's model (:mod:`governance_core.models.description`)."""

SERVER_MANAGED: dict[str, frozenset[str]] = {
    description_of(model).kind: server_managed_fields(model) for model in RESOURCE_MODELS
}
"""The fields of each resource ``type`` a request body can never set (decisions, section 1):
``readOnly`` in its schema."""

SENSITIVE: dict[str, tuple[str, ...]] = {
    description_of(model).kind: sensitive_fields(model) for model in RESOURCE_MODELS
}
"""The payloads of each resource ``type`` that may hold sensitive values."""

_SENSITIVE_NOTE = (
    "May hold sensitive values: sent marked with sensitive encoding, they are kept apart and"
    " shown only to a read that asks for them unredacted and may reveal them."
)

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
            **{name: _described_field(kind, name, notation) for name, notation in fields.items()},
            "type": {"const": kind},
        },
        "required": required,
    }


def _described_field(kind: str, name: str, notation: str) -> dict[str, Any]:
    schema = field_schema(notation)
    if name in SERVER_MANAGED[kind]:
        schema["readOnly"] = True
    if name in SENSITIVE[kind]:
        schema["description"] = _SENSITIVE_NOTE
    return schema


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
