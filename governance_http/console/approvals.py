"""The approvals queue: actions a policy holds for a person, approved or rejected here.

The page lists the account's pending approvals (soonest to expire first), then the resolved
ones (latest first: who, when, why) and the latest that expired unanswered. It refreshes its
lists by itself: the page's script asks ``/approvals/live`` (the same lists as a fragment)
every :data:`LIVE_SECONDS` and keeps a reason being typed. Approving or rejecting is a form
post running ``approvals/approve`` or ``approvals/reject`` as the signed-in caller, answered
with a redirect to the page, which confirms it once.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from governance_core.errors import NotFound, RequiredValue, ValidationErrors
from governance_core.operations.approvals import REASON_MAX, approval_details
from governance_core.pagination import PageRequest, pagination_output
from governance_core.policies.reads import resolved_approvals
from governance_http.console.governance import (
    KIND_LABELS,
    args_summary,
    relative_time,
    resolver_names,
)
from governance_http.console.pages import Action, Page
from governance_http.console.web import Console, Visit, whole_number

__all__ = ["LIVE_SECONDS", "approval_routes"]

LIVE_SECONDS = 5
"""How often the page refreshes its lists."""
PENDING_SHOWN = 100
"""The most pending approvals the page lists (the soonest to expire)."""
RESOLVED_PAGE = 25
EXPIRED_SHOWN = 10
"""How many of the latest expired approvals the page lists."""
ACTIONS = {"approve": "approval_approved", "reject": "approval_rejected"}
"""The resolutions and the confirmation each shows."""


def _row(visit: Visit, approval: dict[str, Any], agents: dict[str, str]) -> dict[str, Any]:
    return {
        **approval,
        "agent_name": agents.get(approval["agent_id"], "…" + approval["agent_id"][-8:]),
        "args_summary": args_summary(approval["action"].get("args")),
        "requested": relative_time(approval["created_at"], visit.now),
        "expires": relative_time(approval["expires_at"], visit.now),
        "why": [reason["message"] for reason in approval.get("reasons") or ()],
    }


def _lists(visit: Visit) -> dict[str, Any]:
    """The pending, resolved and expired approvals the page and its fragment show."""
    agents = visit.names("agents/list")
    pending = visit.call("approvals/list", status="pending", sorting="expires_at",
                         **{"pagination[page_size]": PENDING_SHOWN})
    offset = whole_number(visit.query("offset"), 10**9) or 0
    ctx = visit.context()
    records, total = resolved_approvals(ctx, offset=offset, limit=RESOLVED_PAGE)
    resolved = [_row(visit, approval_details(ctx, record), agents) for record in records]
    expired = visit.call("approvals/list", status="expired", sorting="-expires_at",
                         **{"pagination[page_size]": EXPIRED_SHOWN})
    chosen = visit.query("resolved")
    return {
        "pending": [_row(visit, row, agents) for row in pending["summaries"]],
        "pending_count": pending["pagination"]["item_count"],
        "resolved": resolved, "resolvers": resolver_names(visit, resolved),
        "resolved_pagination": pagination_output(
            PageRequest(offset, RESOLVED_PAGE), total, len(resolved)
        ),
        "expired": [_row(visit, row, agents) for row in expired["summaries"]],
        "expired_count": expired["pagination"]["item_count"],
        "kinds": KIND_LABELS, "reason_max": REASON_MAX, "highlight": chosen,
        "params": {k: v for k, v in {"resolved": chosen}.items() if v},
    }


def approvals_page(visit: Visit) -> None:
    """The queue: pending approvals with their approve and reject forms, then the history."""
    query = urlencode({k: v for k, v in (
        ("offset", visit.query("offset")), ("resolved", visit.query("resolved"))) if v})
    visit.render("approvals.html", **_lists(visit), live_seconds=LIVE_SECONDS,
                 live_url="/approvals/live" + (f"?{query}" if query else ""))


def approvals_live(visit: Visit) -> None:
    """The page's lists as a fragment, which its script swaps in."""
    visit.render("approvals_live.html", **_lists(visit))


def resolve_approval(visit: Visit, approval_id: str, action: str) -> None:
    """Approve or reject a pending approval with the reason given (a rejection needs one)."""
    if action not in ACTIONS:
        raise NotFound("unknown approval action")
    reason = visit.form.get("reason", "").replace("\r\n", "\n").strip()
    if action == "reject" and not reason:
        raise ValidationErrors({"reason": RequiredValue(
            "a rejection needs a reason: it is recorded, and the agent reads it"
        )})
    visit.call(f"approvals/{action}", approval_id=approval_id, reason=reason or None)
    visit.flash(ACTIONS[action])
    visit.redirect("/approvals?" + urlencode({"resolved": approval_id}))


def approval_routes(console: Console) -> list[tuple[str, object]]:
    """The approvals page's paths and their resources."""
    return [
        ("/approvals", Page(console, approvals_page)),
        ("/approvals/live", Page(console, approvals_live, fragment=True)),
        ("/approvals/{approval_id}/{action}", Action(console, resolve_approval)),
    ]
