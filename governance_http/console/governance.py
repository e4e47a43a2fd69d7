"""Runtime governance in the console: what its pages share, and a run's decisions.

The approvals queue (:mod:`~governance_http.console.approvals`) and the policies pages
(:mod:`~governance_http.console.policies`) read and act through the core's ``approvals/*``
and ``policies/*`` operations as the signed-in caller; a run's page lists the run's
decisions (``decisions/list``) with :func:`run_decisions`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from governance_core.clock import parse_timestamp
from governance_core.errors import NotFound
from governance_core.models.policies import OUTCOMES
from governance_core.policies import engine_available
from governance_http.console.web import Visit, whole_number

__all__ = [
    "ARGS_SUMMARY_MAX",
    "DECISION_PAGE",
    "KIND_LABELS",
    "OUTCOME_LABELS",
    "args_summary",
    "policy_names",
    "relative_time",
    "resolver_names",
    "run_decisions",
]

ARGS_SUMMARY_MAX = 160
"""The most characters of an action's arguments shown on one line."""
DECISION_PAGE = 50
"""How many of a run's decisions its page lists at a time."""
KIND_LABELS: Mapping[str, str] = {
    "tool_call": "Tool call", "model_call": "Model call", "span": "Span",
}
"""How an action's kind reads."""
OUTCOME_LABELS: Mapping[str, str] = {
    "allow": "allowed", "deny": "denied", "pending_approval": "held for approval",
}
"""How a decision's outcome reads, by outcome."""


def args_summary(args: object) -> str:
    """An action's arguments on one line (``amount: 150 · customer: "C-1"``), cut short.

    At most :data:`ARGS_SUMMARY_MAX` characters; the page shows them whole beside it.
    """
    if not isinstance(args, Mapping) or not args:
        return "no arguments"
    text = " · ".join(
        f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in args.items()
    )
    return text if len(text) <= ARGS_SUMMARY_MAX else text[:ARGS_SUMMARY_MAX - 1] + "…"


def relative_time(moment: object, now: datetime) -> str:
    """How far ``moment`` (a timestamp) is from ``now``: ``in 42 min``, ``3 h ago``."""
    if not isinstance(moment, str) or not moment:
        return ""
    seconds = (parse_timestamp(moment) - now).total_seconds()
    size = abs(seconds)
    if size < 60:
        amount = "under a minute"
    elif size < 3600:
        amount = f"{size // 60:.0f} min"
    elif size < 48 * 3600:
        amount = f"{size // 3600:.0f} h"
    else:
        amount = f"{size // 86400:.0f} days"
    return f"in {amount}" if seconds > 0 else f"{amount} ago"


def policy_names(visit: Visit) -> dict[str, str]:
    """The account's policies' names by id (none without the Cedar engine: none can exist)."""
    return visit.names("policies/list") if engine_available() else {}


def resolver_names(visit: Visit, approvals: Iterable[Mapping[str, Any]]) -> dict[str, str]:
    """Who resolved each approval, by approval id.

    The admin user's name or email, else the token's description (or its last characters).
    """
    known: dict[tuple[str | None, str | None], str] = {}
    found: dict[str, str] = {}
    for approval in approvals:
        by = approval.get("resolved_by") or {}
        key = (by.get("admin_user_id"), by.get("token_id"))
        if key == (None, None):
            continue
        if key not in known:
            known[key] = _resolver(visit, *key)
        found[approval["id"]] = known[key]
    return found


def _resolver(visit: Visit, admin_user_id: str | None, token_id: str | None) -> str:
    try:
        if admin_user_id:
            user = visit.call("admin_users/show", admin_user_id=admin_user_id)["details"]
            return str(user.get("name") or user["email"])
        token = visit.call("api_tokens/show", api_token_id=token_id)["details"]
        return str(token.get("description") or f"token …{str(token_id)[-8:]}")
    except NotFound:
        return f"…{str(admin_user_id or token_id)[-8:]}"


def _approval_ids(decision: Mapping[str, Any]) -> set[str]:
    """The approval a decision opened, and the one it used (named in its reasons)."""
    ids = {decision["approval_id"]} if decision.get("approval_id") else set()
    ids |= {reason["approval_id"] for reason in decision.get("reasons") or ()
            if reason.get("approval_id")}
    return ids


def run_decisions(visit: Visit, run_id: str) -> dict[str, Any]:
    """One page of the run's decisions, newest first, as its page lists them.

    ``decision_outcome`` filters them and ``decisions_offset`` pages them (the run page's
    own ``offset`` pages its span tree). Each row names its policies (name, version,
    message, mode, effect) and the approval it opened or used, with that approval's status.
    """
    outcome = visit.query("decision_outcome")
    chosen = outcome if outcome in OUTCOMES else None
    offset = whole_number(visit.query("decisions_offset"), 10**9) or 0
    page = visit.call(
        "decisions/list", agent_instance_id=run_id, outcome=chosen, sorting="-decided_at",
        **{"pagination[offset]": offset, "pagination[page_size]": DECISION_PAGE},
    )
    decisions = page["summaries"]
    names = policy_names(visit) if any(row["reasons"] for row in decisions) else {}
    wanted: set[str] = set()
    for decision in decisions:
        wanted |= _approval_ids(decision)
    approvals = {
        approval_id: visit.call("approvals/show", approval_id=approval_id)["details"]
        for approval_id in sorted(wanted)
    }
    rows = []
    for decision in decisions:
        reasons = decision.get("reasons") or []
        used = [reason["approval_id"] for reason in reasons if reason.get("approval_id")]
        rows.append({
            **decision,
            "args_summary": args_summary(decision["action"].get("args")),
            "policies": [
                {**reason, "name": names.get(reason["policy_id"], "…" + reason["policy_id"][-8:])}
                for reason in reasons if reason.get("policy_id")
            ],
            "modes": sorted({reason["mode"] for reason in reasons if reason.get("mode")}),
            "approval": approvals.get(decision.get("approval_id") or ""),
            "used_approval": approvals.get(used[0]) if used else None,
        })
    return {
        "rows": rows, "pagination": page["pagination"], "outcome": chosen,
        "outcomes": OUTCOME_LABELS, "kinds": KIND_LABELS,
    }
