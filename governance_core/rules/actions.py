"""What an agent shows on read: its status (``dormant`` is derived) and its available actions.

Pure functions of plain values (decisions 7). The stored status of an agent is pending, active
or retired (:data:`governance_core.rules.states.AGENT`); ``dormant`` is an active agent that has
shown no activity for a while, and is never stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

from governance_core.models.agents import AGENT_STATUSES
from governance_core.rules.states import AGENT, allowed

__all__ = ["AGENT_ACTIONS", "AGENT_STATUSES", "agent_status", "available_actions", "stored_status"]


AGENT_ACTIONS = ("delete", "reinstate", "retire", "update")
"""The members of ``available_actions``."""


def agent_status(
    stored: str, last_activity_at: datetime | None, now: datetime, dormant_after: timedelta
) -> str:
    """Return the status an agent shows: ``dormant`` when active but quiet for ``dormant_after``.

    ``last_activity_at`` is the agent's latest sign of life (its latest activity span or
    instance registration); an active agent always has one, since it became active by
    registering an instance.
    """
    quiet = last_activity_at is not None and now - last_activity_at > dormant_after
    if stored == "active" and quiet:
        return "dormant"
    return stored


def stored_status(status: str) -> str:
    """Return the stored status behind a shown one (``dormant`` is a kind of ``active``)."""
    return "active" if status == "dormant" else status


def available_actions(status: str, instance_counts: Mapping[str, int]) -> dict[str, bool]:
    """Return the ``available_actions`` of an agent with ``status`` (shown or stored) and counts.

    update and retire when not retired, reinstate when retired, delete when the agent has no
    instances. retire and reinstate follow the AGENT transition table.
    """
    stored = stored_status(status)
    return {
        "delete": instance_counts.get("total", 0) == 0,
        "reinstate": allowed(AGENT, stored, "reinstate"),
        "retire": allowed(AGENT, stored, "retire"),
        "update": stored != "retired",
    }
