"""Models to stored records and back, in one place.

Timestamps become the library's one ISO form, decimals their exact string; nothing else in the
library configures (un)structuring, and the global cattrs converter is never used. The run
family's models (whose dict members hold JSON from requests) map field by field, the rest
through the one private cattrs converter.
"""

from __future__ import annotations

import functools
from datetime import UTC, datetime
from decimal import Decimal
from types import UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs
import cattrs

from governance_core.clock import format_timestamp, parse_timestamp

__all__ = ["from_record", "json_ready", "to_record"]

T = TypeVar("T")

_converter = cattrs.Converter(forbid_extra_keys=False)
_converter.register_unstructure_hook(datetime, format_timestamp)
_converter.register_structure_hook(datetime, lambda value, _: parse_timestamp(value))
_converter.register_unstructure_hook(Decimal, str)
_converter.register_structure_hook(Decimal, lambda value, _: Decimal(str(value)))


def _stored_timestamp(text: str) -> datetime:
    # Stored timestamps are all in the library's one UTC form, which fromisoformat reads.
    parsed = datetime.fromisoformat(text)
    return parsed if parsed.tzinfo is UTC else parse_timestamp(text)


@attrs.frozen
class _Mapping:
    """How one model class maps to records: which fields hold timestamps."""

    names: tuple[str, ...]
    timestamps: frozenset[str]


_SIMPLE = frozenset({str, int, bool, float, type(None), dict, list, datetime, Any})


def _simple(kind: Any) -> bool:
    # A field of JSON values or timestamps maps without cattrs; anything else uses it.
    if kind in _SIMPLE:
        return True
    origin = get_origin(kind)
    if origin in (dict, list):
        return all(_simple(arg) for arg in get_args(kind))
    if origin in (Union, UnionType):
        return all(_simple(arg) for arg in get_args(kind))
    return False


# The run family's dict members hold JSON from requests only; elsewhere (a risk profile's
# ruleset holds decimals) cattrs walks them.
_JSON_MODULES = frozenset({"governance_core.models.agents"})


@functools.cache
def _mapping(cls: type) -> _Mapping | None:
    if cls.__module__ not in _JSON_MODULES:
        return None
    attrs.resolve_types(cls)
    fields = attrs.fields(cls)
    if not all(_simple(field.type) for field in fields):
        return None
    stamped = frozenset(
        field.name for field in fields
        if field.type is datetime or datetime in get_args(field.type)
    )
    return _Mapping(tuple(field.name for field in fields), stamped)


def to_record(model: Any) -> dict[str, Any]:
    """The stored, JSON-compatible form of an attrs model."""
    mapping = _mapping(type(model))  # type: ignore[arg-type]
    if mapping is None:
        record: dict[str, Any] = _converter.unstructure(model)
        return record
    record = {name: getattr(model, name) for name in mapping.names}
    for name in mapping.timestamps:
        value = record[name]
        if value is not None:
            record[name] = format_timestamp(value)
    return record


def from_record(cls: type[T], record: dict[str, Any]) -> T:
    """An attrs model from its stored form; members the model does not know are ignored."""
    mapping = _mapping(cls)  # type: ignore[arg-type]
    if mapping is None:
        return _converter.structure(record, cls)
    members = {name: record[name] for name in mapping.names if name in record}
    for name in mapping.timestamps:
        value = members.get(name)
        if value is not None:
            members[name] = _stored_timestamp(value)
    return cls(**members)


def json_ready(value: Any) -> Any:
    """``value`` with decimals as JSON numbers and datetimes in the library's form.

    Decimals are computed exactly and only become binary floats here, at the edge; an
    integral decimal becomes an int.
    """
    if isinstance(value, dict):
        return {key: json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_ready(item) for item in value]
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, datetime):
        return format_timestamp(value)
    return value
