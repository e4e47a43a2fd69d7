"""Approvals: actions held for a person (list, show, approve, reject). Account tokens only.

An approval is approved or rejected once; a pending one past ``expires_at`` is ``expired``
(it counts as rejected) and can no longer be resolved. Who resolved it (the token, and the
admin user it belongs to), when and why is kept.
"""

from __future__ import annotations

from typing import Any

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.envelopes import ready_envelope
from governance_core.errors import Conflict
from governance_core.fields import Fields
from governance_core.models.policies import APPROVAL_STATUSES, Approval
from governance_core.operations.common import equality_filters, list_response, load_record
from governance_core.policies.deciding import approval_status
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.views import model_view

__all__ = ["SORTABLE", "approval_details"]

SORTABLE = ("id", "expires_at")
REASON_MAX = 2000


def approval_details(ctx: Context, record: Record) -> dict[str, Any]:
    """The Approval resource of a stored approval, its status as of now."""
    return model_view(
        Approval, record,
        status=approval_status(record, ctx.now), created_at=record["inserted_at"],
    )


def _status_filters(ctx: Context, fields: Fields) -> list[Filter]:
    """The ``status`` filter: pending and expired are told apart by ``expires_at``."""
    status = fields.str("status", choices=APPROVAL_STATUSES)
    now = format_timestamp(ctx.now)
    if status == "pending":
        return [Filter("status", "eq", "pending"), Filter("expires_at", "gt", now)]
    if status == "expired":
        return [Filter("status", "eq", "pending"), Filter("expires_at", "le", now)]
    return [] if status is None else [Filter("status", "eq", status)]


@operation("approvals/list", write=False)
def list_approvals(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List approvals; filters ``status`` and ``agent_instance_id``."""
    filters = [*_status_filters(ctx, fields), *equality_filters(fields, ids=("agent_instance_id",))]
    return list_response(
        ctx, fields, ctx.tables.approvals, sortable=SORTABLE, filters=filters,
        summarize=lambda record: approval_details(ctx, record),
    )


@operation("approvals/show", write=False)
def show_approval(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get an approval."""
    record = load_record(ctx, ctx.tables.approvals, fields.raw("approval_id"))
    return ready_envelope(approval_details(ctx, record))


def _resolve(ctx: Context, fields: Fields, status: str) -> dict[str, Any]:
    record = load_record(ctx, ctx.tables.approvals, fields.raw("approval_id"))
    reason = fields.str("reason", max_length=REASON_MAX)
    fields.done()
    current = approval_status(record, ctx.now)
    if current != "pending":
        raise Conflict(f"the approval is {current}: only a pending approval can be resolved")
    principal = ctx.principal
    assert principal is not None
    now = format_timestamp(ctx.now)
    record = {
        **record, "status": status, "resolved_at": now, "updated_at": now,
        "resolved_by": {"token_id": principal.token_id, "admin_user_id": principal.admin_user_id},
        "resolution_reason": reason or None,
    }
    ctx.tables.approvals.put(record)
    return ready_envelope(approval_details(ctx, record))


@operation("approvals/approve", write=True)
def approve(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Approve a pending action: the same action's next decide is allowed, once."""
    return _resolve(ctx, fields, "approved")


@operation("approvals/reject", write=True)
def reject(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Reject a pending action: its decisions stay held, and the agent learns it was refused."""
    return _resolve(ctx, fields, "rejected")
