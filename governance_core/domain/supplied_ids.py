"""Ids a caller supplies on create (decisions 2).

Reading and claiming are two steps so that a malformed id is reported with the request's other
field errors (422), and a taken one only once the request is otherwise valid (409).
"""

from __future__ import annotations

from governance_core.context import Context
from governance_core.errors import Conflict
from governance_core.fields import Fields
from governance_core.ids import extract_partition
from governance_core.repository import KIND_TABLES

__all__ = ["claim_id", "read_supplied_id"]


def read_supplied_id(ctx: Context, fields: Fields, name: str = "id") -> str | None:
    """Read the id the caller asked for, or None (then one is generated).

    A malformed id, or one outside the caller's account partition (every id of an account
    shares its partition), is ``invalid_value`` on ``name``.
    """
    requested = fields.id(name)
    if requested is None:
        return None
    assert ctx.principal is not None
    if extract_partition(requested) != ctx.principal.partition:
        fields.errors.invalid(name, f"{name} must be an id of this account's partition")
        return None
    return requested


def claim_id(ctx: Context, requested: str | None) -> str:
    """Return ``requested`` when no record holds it (else ``conflict``), or a new id."""
    if requested is None:
        return ctx.new_id()
    for table in KIND_TABLES.values():
        if ctx.store.get(table, requested) is not None:
            raise Conflict(f"the id {requested} is already in use")
    return requested
