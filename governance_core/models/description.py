"""One description of each resource: its model's fields say how they are stored and shown.

A resource model is an attrs class marked with :func:`resource`. Each of its fields is
described once, where it is declared, and the rest follows from that description:

- **the view** (:func:`governance_core.views.model_view`) shows every field but those declared
  ``shown=False`` (kept for the server itself), then the values computed on read, which the
  class declares by name with their notation (``@resource("agent", available_actions="obj")``);
- **the JSON Schema** the HTTP layer documents (:func:`view_notations`): each shown field's
  notation, read from its Python type unless the field names one (an enum's values, a map);
- **the stored columns** (:func:`stored_columns`): the fields declared ``column=True``, which
  every adapter can filter and sort on, typed from the Python type;
- **the payloads that may hold sensitive values** (:func:`sensitive_fields`), which a
  redacted read withholds and the OpenAPI document says so of;
- **what a request can never set** (:func:`server_managed_fields`): the fields declared
  ``managed=True``, every value computed on read, and the stamps every resource's server sets
  (``account_id``, ``inserted_at``, ``updated_at``), which need no declaration.

So adding a field to spans is one line in :class:`~governance_core.models.agents.AgentSpan`,
with a column's migration (``SCHEMA_VERSION``) when it is declared a column; what a request may
set is read by its operation (:class:`governance_core.fields.Fields`), which checks it.

The notation (``id``, ``str``, ``ts``, ``enum:a,b``, a trailing ``?`` for null, a leading ``~``
for a field that may be absent) is that of ``governance_http.schemas``.
"""

from __future__ import annotations

import functools
import types
import typing
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Literal, TypeVar

import attrs

__all__ = [
    "ColumnType",
    "ResourceDescription",
    "described",
    "description_of",
    "enum",
    "hidden_fields",
    "resource",
    "sensitive_fields",
    "server_managed_fields",
    "stored_columns",
    "view_notations",
]

_ModelT = TypeVar("_ModelT", bound=type)
ColumnType = Literal["text", "integer", "real"]
"""What a declared field holds: text, a 64-bit integer (booleans too) or a float."""

_NOTATION = "notation"
_COLUMN = "column"
_SHOWN = "shown"
_MANAGED = "managed"
_SENSITIVE = "sensitive"
_DESCRIPTION = "__resource_description__"
_STAMPS = frozenset({"account_id", "inserted_at", "updated_at"})


@attrs.frozen
class ResourceDescription:
    """What a :func:`resource` declares beside its fields.

    ``kind`` is the view's ``type``; ``computed`` the values a view computes on read, by
    name, in the notation of their JSON.
    """

    kind: str
    computed: Mapping[str, str]


def resource(kind: str, **computed: str) -> Callable[[_ModelT], _ModelT]:
    """Mark an attrs model as the resource ``kind``; ``computed`` names its values made on read."""

    def mark(cls: _ModelT) -> _ModelT:
        setattr(cls, _DESCRIPTION, ResourceDescription(kind, dict(computed)))
        return cls

    return mark


def described(
    *,
    notation: str | None = None,
    column: bool = False,
    shown: bool = True,
    managed: bool = False,
    sensitive: bool = False,
) -> dict[str, Any]:
    """The ``metadata`` of a model field that describes it (``attrs.field(metadata=...)``).

    ``notation``: its JSON's notation when its type does not say it (an enum, a map);
    ``column``: stored as a column (filterable, sortable); ``shown=False``: kept from views;
    ``managed``: set by the server only; ``sensitive``: a payload whose marked values are
    kept apart when the record is written with sensitive encoding, and put back only for a
    read that may reveal them.
    """
    return {
        _NOTATION: notation, _COLUMN: column, _SHOWN: shown, _MANAGED: managed,
        _SENSITIVE: sensitive,
    }


def enum(*values: str, nullable: bool = False) -> str:
    """The notation of a string that is one of ``values`` (or null)."""
    return f"enum:{','.join(values)}{'?' if nullable else ''}"


def description_of(cls: type) -> ResourceDescription:
    """The :func:`resource` declaration of ``cls``."""
    found = getattr(cls, _DESCRIPTION, None)
    if not isinstance(found, ResourceDescription):
        raise TypeError(f"{cls.__name__} is not marked as a resource")
    return found


@functools.cache
def _types(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _nullable(annotation: Any) -> tuple[Any, bool]:
    """The type ``annotation`` holds besides None, and whether it admits None."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        members = [member for member in typing.get_args(annotation) if member is not type(None)]
        if len(members) == 1:
            return members[0], len(members) < len(typing.get_args(annotation))
    return annotation, False


_SCALARS: dict[Any, str] = {str: "str", int: "int", float: "num", bool: "bool", datetime: "ts"}


def _notation_of_type(name: str, annotation: Any) -> str:
    kind, nullable = _nullable(annotation)
    origin = typing.get_origin(kind) or kind
    if kind is str and (name == "id" or name.endswith("_id")):
        notation = "id"
    elif kind in _SCALARS:
        notation = _SCALARS[kind]
    elif origin is dict:
        notation = "obj"
    elif origin is list:
        (item,) = typing.get_args(kind)
        notation = "ids" if name.endswith("_ids") else f"list:{_notation_of_type('', item)}"
    else:
        notation = "any"
    return f"{notation}?" if nullable else notation


def _field_notation(cls: type, field: attrs.Attribute[Any]) -> str:
    named = field.metadata.get(_NOTATION)
    if isinstance(named, str):
        return named
    return _notation_of_type(field.name, _types(cls)[field.name])


@functools.cache
def view_notations(cls: type) -> Mapping[str, str]:
    """Every field a view of ``cls`` shows, with its notation, computed values last."""
    shown = {
        field.name: _field_notation(cls, field)
        for field in attrs.fields(cls) if field.metadata.get(_SHOWN, True)
    }
    return types.MappingProxyType({**shown, **description_of(cls).computed})


@functools.cache
def hidden_fields(cls: type) -> frozenset[str]:
    """The fields of ``cls`` its views leave out."""
    return frozenset(
        field.name for field in attrs.fields(cls) if not field.metadata.get(_SHOWN, True)
    )


_COLUMN_TYPES: dict[Any, ColumnType] = {int: "integer", bool: "integer", float: "real"}


@functools.cache
def stored_columns(cls: type) -> tuple[str, ...]:
    """The fields of ``cls`` stored as columns, as ``name`` or ``name:type`` (not text)."""
    found = []
    for field in attrs.fields(cls):
        if field.metadata.get(_COLUMN):
            column_type = _COLUMN_TYPES.get(_nullable(_types(cls)[field.name])[0], "text")
            found.append(field.name if column_type == "text" else f"{field.name}:{column_type}")
    return tuple(found)


@functools.cache
def server_managed_fields(cls: type) -> frozenset[str]:
    """What a request can never set on ``cls``: managed fields and values computed on read."""
    managed = {
        field.name for field in attrs.fields(cls)
        if field.metadata.get(_MANAGED) or field.name in _STAMPS
    }
    return frozenset(managed | set(description_of(cls).computed))


@functools.cache
def sensitive_fields(cls: type) -> tuple[str, ...]:
    """The payloads of ``cls`` whose marked values are kept apart (``sensitive=True``)."""
    return tuple(field.name for field in attrs.fields(cls) if field.metadata.get(_SENSITIVE))
