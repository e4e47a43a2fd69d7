"""The bulk runner: items in order, each its own transaction, stopping at the first error.

Each item is run exactly as the matching single operation would be, through the same
registry, so its output is the same envelope byte for byte; its key is an idempotency key, so
re-sending a request replays the items already done and runs the rest.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from governance_core.errors import FieldErrors, GovernanceError, WriteConflict
from governance_core.idempotency import KEY_MAX, KEY_MIN
from governance_core.registry import REGISTRY

__all__ = ["MAX_ITEMS", "BULK", "check_items", "run_bulk"]

BULK = "bulk"
MAX_ITEMS = 1000

RunItem = Callable[[str, dict[str, Any], str], dict[str, Any]]


def check_items(params: Mapping[str, Any]) -> list[dict[str, Any]]:
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
            elif not isinstance(kind, str) or kind not in REGISTRY or kind == BULK:
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


def run_bulk(params: Mapping[str, Any], run_item: RunItem) -> dict[str, Any]:
    """Run the items with ``run_item(operation, params, key)``; the bulk envelope."""
    outputs: dict[str, Any] = {}
    for item in check_items(params):
        key = item["idempotency_key"]
        item_params = {k: v for k, v in item.items() if k != "_type"}
        try:
            outputs[key] = run_item(item["_type"], item_params, key)
        except WriteConflict:
            # Not the item's answer: the whole request is re-run, its done items replayed.
            raise
        except GovernanceError as error:
            outputs[key] = error.to_payload()
            break
    return {"status": "success", "outputs": outputs}
