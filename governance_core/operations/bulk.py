"""Bulk: several operations in one request, each item as its own endpoint would answer it."""

from __future__ import annotations

from typing import Any

from governance_core.bulk import BULK, check_items
from governance_core.context import Context
from governance_core.errors import GovernanceError, WriteConflict
from governance_core.fields import Fields
from governance_core.idempotency import read_ahead
from governance_core.registry import ANY_SCOPE, operation

__all__ = ["run_bulk"]


@operation(BULK, write=True, scopes=ANY_SCOPE, idempotent=False, batch=True)
def run_bulk(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Run several operations in order, stopping at the first that fails (``{status, outputs}``).

    Each item runs in a savepoint of the request's one transaction, so it is stored whole or
    not at all and a failing item leaves those before it stored; its key is an idempotency
    key, so re-sending a request replays the items already done and runs the rest.
    """
    outputs: dict[str, Any] = {}
    items = check_items(fields.data, ctx.registry)
    read_ahead(ctx, [(item["_type"], item["idempotency_key"]) for item in items])
    for item in items:
        key = item["idempotency_key"]
        params = {name: value for name, value in item.items() if name != "_type"}
        try:
            outputs[key] = ctx.invoke(item["_type"], params)
        except WriteConflict:
            # Not the item's answer: the request's transaction is lost and is run again whole.
            raise
        except GovernanceError as error:
            outputs[key] = error.to_payload()
            break
    return {"status": "success", "outputs": outputs}
