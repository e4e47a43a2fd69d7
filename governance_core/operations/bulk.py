"""Bulk: several operations in one request, each item as its own endpoint would answer it."""

from __future__ import annotations

from typing import Any

from governance_core.bulk import BULK, check_items
from governance_core.context import Context
from governance_core.errors import GovernanceError, WriteConflict
from governance_core.fields import Fields
from governance_core.idempotency import read_ahead
from governance_core.registry import ANY_SCOPE, operation

__all__ = ["prepare_bulk", "run_bulk"]


def _item_params(item: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in item.items() if name != "_type"}


def prepare_bulk(ctx: Context, fields: Fields) -> dict[str, object]:
    """Prepare each item whose operation has a ``prepare``, before the request's transaction.

    Answers what each answered, by the item's idempotency key; an item that does not parse,
    or whose operation the caller may not run, is left to its run.
    """
    principal = ctx.principal
    prepared: dict[str, object] = {}
    for item in check_items(fields.data, ctx.registry):
        op = ctx.registry[item["_type"]]
        if op.prepare is None or (principal is not None and principal.scope not in op.scopes):
            continue
        try:
            value = op.prepare(ctx, Fields(_item_params(item)))
        except GovernanceError:
            continue
        if value is not None:
            prepared[item["idempotency_key"]] = value
    return prepared


@operation(
    BULK, write=True, scopes=ANY_SCOPE, idempotent=False, batch=True, prepare=prepare_bulk
)
def run_bulk(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Run several operations in order, stopping at the first that fails (``{status, outputs}``).

    Each item runs in a savepoint of the request's one transaction, so it is stored whole or
    not at all and a failing item leaves those before it stored; its key is an idempotency
    key, so re-sending a request replays the items already done and runs the rest. What
    :func:`prepare_bulk` made for an item before the transaction is handed to its run.
    """
    prepared = ctx.prepared if isinstance(ctx.prepared, dict) else {}
    outputs: dict[str, Any] = {}
    items = check_items(fields.data, ctx.registry)
    read_ahead(ctx, [(item["_type"], item["idempotency_key"]) for item in items])
    for item in items:
        key = item["idempotency_key"]
        try:
            outputs[key] = ctx.invoke(item["_type"], _item_params(item), prepared.get(key))
        except WriteConflict:
            # Not the item's answer: the request's transaction is lost and is run again whole.
            raise
        except GovernanceError as error:
            outputs[key] = error.to_payload()
            break
    return {"status": "success", "outputs": outputs}
