"""Reads of the approvals no list operation answers: the resolved ones by resolution time."""

from __future__ import annotations

from governance_core.context import Context
from governance_core.repository import Filter, Record, SortKey, tenant_filter

__all__ = ["RESOLVED_STATUSES", "resolved_approvals"]

RESOLVED_STATUSES = ("approved", "rejected")
"""The statuses of an approval a person resolved (an expired one nobody resolved)."""


def resolved_approvals(
    ctx: Context, *, offset: int = 0, limit: int = 25
) -> tuple[list[Record], int]:
    """The caller's account's approved and rejected approvals, latest resolved first.

    One page from ``offset``, and how many there are in all.
    """
    conditions = [tenant_filter(ctx.account_id), Filter("status", "in", list(RESOLVED_STATUSES))]
    records = ctx.tables.approvals.query(
        conditions,
        sort=[SortKey("resolved_at", descending=True), SortKey("id", descending=True)],
        offset=offset, limit=limit,
    )
    return records, ctx.tables.approvals.count(conditions)
