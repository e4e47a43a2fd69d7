"""Sensitive values in payloads (decisions 11): split them out, put them back.

A client marks a value anywhere in a payload with a marker object::

    {"$sensitive": "string", "labels": ["pii"], "value": "123-45-6789"}

:func:`split_sensitive` validates every marker and separates the values from the payload:
the stored payload keeps each marker without its ``value``, and the values are kept apart,
keyed by the marker's JSON Pointer (RFC 6901) in the payload. :func:`restore_sensitive` puts
them back for reads that may see them.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Final

from governance_core.errors import FieldErrors

__all__ = [
    "MARKER_KEY",
    "SENSITIVE_TYPES",
    "has_markers",
    "json_pointer",
    "restore_sensitive",
    "split_sensitive",
]

MARKER_KEY: Final = "$sensitive"
"""The key that makes an object a sensitive marker."""

SENSITIVE_TYPES: Final = ("string", "number", "boolean")
"""The types a marker may declare for its value."""

PathPart = str | int


def json_pointer(parts: tuple[PathPart, ...]) -> str:
    """Return the RFC 6901 JSON Pointer of a path (``("a/b", 0)`` gives ``/a~1b/0``)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def _type_matches(declared: str, value: object) -> bool:
    if declared == "string":
        return isinstance(value, str)
    if declared == "boolean":
        return isinstance(value, bool)
    return isinstance(value, (int, float, Decimal)) and not isinstance(value, bool)


def _check_marker(marker: Mapping[str, object]) -> str | None:
    """Return why a marker is malformed, or None when it is well formed."""
    declared = marker[MARKER_KEY]
    if not isinstance(declared, str) or declared not in SENSITIVE_TYPES:
        return f"{MARKER_KEY} must be one of {', '.join(SENSITIVE_TYPES)}"
    labels = marker.get("labels", [])
    if not isinstance(labels, list) or not all(isinstance(label, str) for label in labels):
        return "labels must be a list of strings"
    if "value" not in marker:
        return f"a {MARKER_KEY} marker needs a value"
    if not _type_matches(declared, marker["value"]):
        return f"value must be a {declared}, as {MARKER_KEY} declares"
    return None


def split_sensitive(payload: object, field: str) -> tuple[object, dict[str, object]]:
    """Separate marked values from a payload.

    Returns the payload with every marker's ``value`` removed (the marker keeps ``$sensitive``,
    ``labels`` and any other member it has), and a map from each marker's JSON Pointer in
    the payload (``/customer/ssn``, ``/items/0``) to its value. A marker is any object with a
    ``$sensitive`` key, at any depth of objects and lists; its value must match the declared
    type (a boolean is not a number), ``labels`` (optional) must be a list of strings, and
    ``value`` is required (a null value matches no type). Every bad marker is reported at
    once, as :class:`~governance_core.errors.ValidationErrors` nested from ``field`` along the
    path (``payload -> customer -> ssn``, list indexes as strings). The input is not modified.
    """
    errors = FieldErrors()
    values: dict[str, object] = {}
    redacted = _split(payload, (), values, errors, field)
    errors.raise_if_any()
    return redacted, values


def _split(
    node: object,
    path: tuple[PathPart, ...],
    values: dict[str, object],
    errors: FieldErrors,
    field: str,
) -> object:
    if type(node) is dict or isinstance(node, Mapping):
        if MARKER_KEY in node:
            problem = _check_marker(node)
            if problem is not None:
                errors.invalid((field, *path), problem)
                return dict(node)
            values[json_pointer(path)] = node["value"]
            return {key: value for key, value in node.items() if key != "value"}
        # Scalars, most members, are taken as they are without a call (this runs on every
        # member of every payload written).
        return {
            key: value if type(value) in _SCALARS
            else _split(value, (*path, key), values, errors, field)
            for key, value in node.items()
        }
    if isinstance(node, (list, tuple)):
        return [
            item if type(item) in _SCALARS
            else _split(item, (*path, index), values, errors, field)
            for index, item in enumerate(node)
        ]
    return node


_SCALARS: Final = frozenset({str, int, float, bool, type(None)})


def restore_sensitive(redacted: object, values: Mapping[str, object]) -> object:
    """Put split values back into their markers; returns new structures, the input untouched.

    A marker whose pointer has no value in ``values`` stays redacted; values whose pointer
    names no marker are ignored.
    """
    if not values:
        return redacted
    return _restore(redacted, (), values)


def _restore(node: object, path: tuple[PathPart, ...], values: Mapping[str, object]) -> object:
    if isinstance(node, Mapping):
        if MARKER_KEY in node:
            restored = dict(node)
            pointer = json_pointer(path)
            if pointer in values:
                restored["value"] = values[pointer]
            return restored
        return {key: _restore(value, (*path, key), values) for key, value in node.items()}
    if isinstance(node, (list, tuple)):
        return [_restore(item, (*path, index), values) for index, item in enumerate(node)]
    return node


def has_markers(payload: object) -> bool:
    """Whether a payload holds a ``$sensitive`` marker at any depth."""
    stack = [payload]
    while stack:
        node = stack.pop()
        if isinstance(node, Mapping):
            if MARKER_KEY in node:
                return True
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return False
