"""The one private cattrs converter: models to stored records and back.

Timestamps become the library's one ISO form, decimals their exact string; nothing else in the
library configures (un)structuring, and the global cattrs converter is never used.
"""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any, TypeVar

import cattrs

from governance_core.clock import format_timestamp, parse_timestamp

__all__ = ["from_record", "json_ready", "to_record"]

T = TypeVar("T")

_converter = cattrs.Converter(forbid_extra_keys=False)
_converter.register_unstructure_hook(datetime, format_timestamp)
_converter.register_structure_hook(datetime, lambda value, _: parse_timestamp(value))
_converter.register_unstructure_hook(Decimal, str)
_converter.register_structure_hook(Decimal, lambda value, _: Decimal(str(value)))


def to_record(model: Any) -> dict[str, Any]:
    """The stored, JSON-compatible form of an attrs model."""
    record: dict[str, Any] = _converter.unstructure(model)
    return record


def from_record(cls: type[T], record: dict[str, Any]) -> T:
    """An attrs model from its stored form; members the model does not know are ignored."""
    return _converter.structure(record, cls)


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
