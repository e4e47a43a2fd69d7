"""The schemas an agent schema version declares: accepted forms, checks and content (decisions 13).

Span type, alert and quality schemas arrive as a list of entries or a map by name (span types
also as the legacy ``span_schemas`` / ``span_result_schemas`` maps) and are normalised to maps
by name. Each JSON Schema is checked against Draft 2020-12 and each template compiled; what
fails is stored and reported in the entry's ``*_validation`` object, never refused. Problems
with the request's shape (an entry without a name, a bad ``data_risk``) are field errors, and
so is a schema whose checks could cost more than
:data:`~governance_core.rules.payload_validation.MAX_SCHEMA_VISITS` visits of one payload
value (:func:`~governance_core.rules.payload_validation.schema_cost`): it could stall every
write of a span of its type.

Everything here is pure: the caller passes a :class:`~governance_core.errors.FieldErrors` and
the path of the schema-version object inside its request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any

import attrs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from governance_core.errors import FieldErrors, GovernanceError
from governance_core.rules.payload_validation import outside_references, schema_cost_problem
from governance_core.rules.risk import normalize_data_risk
from governance_core.rules.templates import check_template

__all__ = [
    "SCHEMA_GROUPS",
    "DeclaredSchemas",
    "check_json_schema",
    "normalize_schemas",
]

SCHEMA_GROUPS = ("span_type_schemas", "alert_schemas", "quality_schemas")
"""The three maps of a schema version, by name."""

NAME_MAX = 200
TEXT_MAX = 10_000
LEGACY_PARAMS = "span_schemas"
LEGACY_RESULTS = "span_result_schemas"

Path = tuple[str | int, ...]


def check_json_schema(schema: Any) -> dict[str, Any]:
    """Check a JSON Schema (Draft 2020-12): ``{"status": "valid"|"invalid", "message"}``.

    A schema whose references do not all resolve inside it is ``invalid`` and lists them in
    ``outside_references``: they are never fetched.
    """
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return {"status": "invalid", "message": error.message}
    outside = outside_references(schema)
    if outside:
        return {
            "status": "invalid",
            "message": "references outside the schema are never fetched: " + ", ".join(outside),
            "outside_references": outside,
        }
    return {"status": "valid", "message": None}


@attrs.frozen
class DeclaredSchemas:
    """A schema version's normalised content: three maps of entries by name."""

    span_type_schemas: dict[str, dict[str, Any]]
    alert_schemas: dict[str, dict[str, Any]]
    quality_schemas: dict[str, dict[str, Any]]

    def content(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Return the three maps by group name."""
        return {group: getattr(self, group) for group in SCHEMA_GROUPS}

    def content_hash(self) -> str:
        """Return a digest of the content, independent of entry and key order."""
        text = json.dumps(self.content(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()

    def checked(self) -> dict[str, dict[str, dict[str, Any]]]:
        """Return the content with each entry's validation objects, as stored and shown."""
        return {
            "span_type_schemas": {
                name: {
                    **entry,
                    "params_schema_validation": check_json_schema(entry["params_schema"]),
                    "result_schema_validation": check_json_schema(entry["result_schema"]),
                    "template_validation": _check_template(entry["template"]),
                }
                for name, entry in self.span_type_schemas.items()
            },
            **{
                group: {
                    name: {
                        **entry,
                        "schema_validation": check_json_schema(entry["schema"]),
                        "template_validation": _check_template(entry["template"]),
                    }
                    for name, entry in getattr(self, group).items()
                }
                for group in ("alert_schemas", "quality_schemas")
            },
        }


def _check_template(template: str | None) -> dict[str, Any] | None:
    return None if template is None else check_template(template)


def normalize_schemas(raw: Mapping[str, Any], errors: FieldErrors, path: Path) -> DeclaredSchemas:
    """Return the declared schemas of a schema-version object ``raw`` sent at ``path``.

    Bad shapes are recorded in ``errors`` (the caller raises them); what is returned then is
    the usable part.
    """
    span_types = _entries(raw, "span_type_schemas", errors, path, _span_type_entry)
    params = _legacy_map(raw, LEGACY_PARAMS, errors, path)
    results = _legacy_map(raw, LEGACY_RESULTS, errors, path)
    for name in [*params, *results]:
        if name not in span_types:
            span_types[name] = _span_type({}, name, params.get(name), results.get(name))
    return DeclaredSchemas(
        span_type_schemas=span_types,
        alert_schemas=_entries(raw, "alert_schemas", errors, path, _payload_entry),
        quality_schemas=_entries(raw, "quality_schemas", errors, path, _payload_entry),
    )


EntryReader = Callable[[Mapping[str, Any], str, FieldErrors, Path], dict[str, Any]]
"""Reads one entry: ``(entry, name, errors, path) -> normalised entry``."""


def _entries(
    raw: Mapping[str, Any], group: str, errors: FieldErrors, path: Path, read: EntryReader
) -> dict[str, dict[str, Any]]:
    value = raw.get(group)
    out: dict[str, dict[str, Any]] = {}
    if value is None:
        return out
    if isinstance(value, list):
        keyed: list[tuple[str | int, object, object]] = [
            (index, entry.get("name") if isinstance(entry, Mapping) else None, entry)
            for index, entry in enumerate(value)
        ]
    elif isinstance(value, Mapping):
        keyed = [(str(name), name, entry) for name, entry in value.items()]
    else:
        errors.invalid((*path, group), f"{group} must be a list of entries or a map by name")
        return out
    for key, name, entry in keyed:
        at = (*path, group, key)
        if not isinstance(entry, Mapping):
            errors.invalid(at, "each schema entry must be an object")
            continue
        if not _good_name(name, errors, (*at, "name") if isinstance(key, int) else at):
            continue
        assert isinstance(name, str)
        if name in out:
            errors.invalid((*at, "name"), f"the name {name!r} is declared twice")
            continue
        out[name] = read(entry, name, errors, at)
    return out


def _good_name(name: object, errors: FieldErrors, at: Path) -> bool:
    if name is None:
        errors.required(at, "each schema entry needs a name")
        return False
    if not isinstance(name, str) or not name.strip() or len(name) > NAME_MAX:
        errors.invalid(at, f"a schema name must be a non-blank string of at most {NAME_MAX}")
        return False
    return True


def _legacy_map(
    raw: Mapping[str, Any], member: str, errors: FieldErrors, path: Path
) -> dict[str, Any]:
    value = raw.get(member)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        errors.invalid((*path, member), f"{member} must be a map of span type name to schema")
        return {}
    good: dict[str, Any] = {}
    for name, schema in value.items():
        at = (*path, member, str(name))
        if _good_name(name, errors, at) and _bounded(schema, errors, at):
            good[name] = schema
    return good


def _span_type(entry: Mapping[str, Any], name: str, params: Any, result: Any) -> dict[str, Any]:
    return {
        "name": name,
        "title": entry.get("title") or name,
        "description": entry.get("description"),
        "params_schema": {} if params is None else params,
        "result_schema": {} if result is None else result,
        "template": entry.get("template"),
        "data_risk": entry.get("data_risk"),
    }


def _span_type_entry(
    entry: Mapping[str, Any], name: str, errors: FieldErrors, at: Path
) -> dict[str, Any]:
    _check_texts(entry, errors, at)
    for member in ("params_schema", "result_schema"):
        _bounded(entry.get(member), errors, (*at, member))
    normalised = _span_type(entry, name, entry.get("params_schema"), entry.get("result_schema"))
    normalised["data_risk"] = _data_risk(entry, errors, at)
    return normalised


def _payload_entry(
    entry: Mapping[str, Any], name: str, errors: FieldErrors, at: Path
) -> dict[str, Any]:
    _check_texts(entry, errors, at)
    schema = entry.get("schema")
    _bounded(schema, errors, (*at, "schema"))
    return {
        "name": name,
        "title": entry.get("title") or name,
        "description": entry.get("description"),
        "schema": {} if schema is None else schema,
        "template": entry.get("template"),
        "data_risk": _data_risk(entry, errors, at),
    }


def _bounded(schema: object, errors: FieldErrors, at: Path) -> bool:
    """Record a schema whose checks cost too much (see the module docstring); False then."""
    problem = schema_cost_problem(schema)
    if problem is not None:
        errors.invalid(at, problem)
    return problem is None


def _check_texts(entry: Mapping[str, Any], errors: FieldErrors, at: Path) -> None:
    for member in ("title", "description", "template"):
        value = entry.get(member)
        if value is not None and (not isinstance(value, str) or len(value) > TEXT_MAX):
            errors.invalid((*at, member), f"{member} must be a string of at most {TEXT_MAX}")


def _data_risk(entry: Mapping[str, Any], errors: FieldErrors, at: Path) -> dict[str, Any] | None:
    try:
        return normalize_data_risk(entry.get("data_risk"))
    except GovernanceError as error:
        errors.add((*at, "data_risk"), error)
        return None

