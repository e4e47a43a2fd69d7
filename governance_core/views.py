"""Resources as clients see them, made from stored records by one rule.

A view holds every field of the resource's model, read from the stored record (a field the
record lacks shows the model's default), then the view's hooks: ``hidden`` fields the model
keeps for itself, ``shown`` values computed on read (risk, cost, redaction, ...), and
``type``. Stored records hold JSON values only, so a view needs no conversion on its way out.
"""

from __future__ import annotations

import functools
from collections.abc import Collection
from typing import Any

import attrs

from governance_core.converter import to_record
from governance_core.storage.protocol import Record

__all__ = ["model_view", "view_of"]

_NO_DEFAULT: Any = attrs.NOTHING


@functools.cache
def _defaults(cls: type) -> tuple[tuple[str, Any, bool], ...]:
    """Each field of ``cls``: its name, its default (or factory) and whether that is a factory."""
    found = []
    for field in attrs.fields(cls):
        default = field.default
        if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
            found.append((field.name, default.factory, True))
        else:
            found.append((field.name, None if default is _NO_DEFAULT else default, False))
    return tuple(found)


def model_view(
    cls: type,
    record: Record,
    kind: str,
    *,
    hidden: Collection[str] = (),
    **shown: Any,
) -> dict[str, Any]:
    """The view of a stored ``cls`` record: its fields, ``shown`` laid over them, and ``type``.

    ``hidden`` names fields the view leaves out; ``shown`` values must be JSON-ready.
    """
    view: dict[str, Any] = {}
    for name, default, factory in _defaults(cls):
        if name in hidden:
            continue
        if name in record:
            view[name] = record[name]
        else:
            view[name] = default() if factory else default
    view.update(shown)
    view["type"] = kind
    return view


def view_of(
    model: Any, kind: str, *, hidden: Collection[str] = (), **shown: Any
) -> dict[str, Any]:
    """The view of an attrs model: :func:`model_view` of its stored form."""
    return model_view(type(model), to_record(model), kind, hidden=hidden, **shown)
