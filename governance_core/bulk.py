"""The bulk request's rules: its name, its size limit and the checks of its items.

The ``bulk`` operation itself (:mod:`governance_core.operations.bulk`) runs the items in
order, each as the matching single operation would run (so its output is the same envelope
byte for byte) in a savepoint of the request's one transaction, stopping at the first error.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from governance_core.errors import FieldErrors
from governance_core.idempotency import KEY_MAX, KEY_MIN

__all__ = ["BULK", "MAX_ITEMS", "check_items"]

BULK = "bulk"
MAX_ITEMS = 1000


def check_items(params: Mapping[str, Any], operations: Collection[str]) -> list[dict[str, Any]]:
    """The request's items, after the request-level checks (else ``validation_errors``)."""
    errors = FieldErrors()
    items = params.get("items")
    if items is None and isinstance(params.get("details"), Mapping):
        items = params["details"].get("items")
    if items is None:
        errors.required("items")
    elif not isinstance(items, list):
        errors.invalid("items", "items must be a list")
    elif not 1 <= len(items) <= MAX_ITEMS:
        errors.invalid("items", f"items must hold 1 to {MAX_ITEMS} operations")
    else:
        seen: set[str] = set()
        for index, item in enumerate(items):
            if not isinstance(item, dict):
                errors.invalid(("items", index), "each item must be an object")
                continue
            kind = item.get("_type")
            if kind is None:
                errors.required(("items", index, "_type"), "_type is required")
            elif not isinstance(kind, str) or kind not in operations or kind == BULK:
                errors.invalid(("items", index, "_type"), f"unknown operation type {kind!r}")
            key = item.get("idempotency_key")
            if key is None:
                errors.required(("items", index, "idempotency_key"), "idempotency_key is required")
            elif not isinstance(key, str) or not KEY_MIN <= len(key) <= KEY_MAX:
                errors.invalid(
                    ("items", index, "idempotency_key"),
                    f"idempotency_key must be a string of {KEY_MIN} to {KEY_MAX} characters",
                )
            elif key in seen:
                errors.invalid(
                    ("items", index, "idempotency_key"), "idempotency_key must be unique"
                )
            else:
                seen.add(key)
    errors.raise_if_any()
    assert isinstance(items, list)
    return items
