"""Resources as clients see them, made from stored records by one rule.

A view holds every field its model shows (:mod:`governance_core.models.description`: all but
those declared ``shown=False``), read from the stored record (a field the record lacks shows
the model's default), then the values computed on read that the caller passes (``shown``:
risk, cost, redaction, ...), and ``type``, the resource's kind. Stored records hold JSON values
only, so a view needs no conversion on its way out.
"""

from __future__ import annotations

import functools
from typing import Any

import attrs

from governance_core.converter import to_record
from governance_core.models.description import description_of, hidden_fields
from governance_core.storage.protocol import Record

__all__ = ["model_view", "view_of"]

_NO_DEFAULT: Any = attrs.NOTHING


@functools.cache
def _shown(cls: type) -> tuple[str, tuple[tuple[str, Any, bool], ...]]:
    """The kind of ``cls``, and each field its views show: name, default, is it a factory."""
    hidden = hidden_fields(cls)
    found = []
    for field in attrs.fields(cls):
        if field.name in hidden:
            continue
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            found.append((field.name, default.factory, True))
        else:
            found.append((field.name, None if default is _NO_DEFAULT else default, False))
    return description_of(cls).kind, tuple(found)


def model_view(cls: type, record: Record, **shown: Any) -> dict[str, Any]:
    """The view of a stored ``cls`` record: its shown fields, ``shown`` laid over them, ``type``.

    ``shown`` values must be JSON-ready.
    """
    kind, fields = _shown(cls)
    view: dict[str, Any] = {}
    for name, default, factory in fields:
        if name in record:
            view[name] = record[name]
        else:
            view[name] = default() if factory else default
    view.update(shown)
    view["type"] = kind
    return view


def view_of(model: Any, **shown: Any) -> dict[str, Any]:
    """The view of an attrs model: :func:`model_view` of its stored form."""
    return model_view(type(model), to_record(model), **shown)
