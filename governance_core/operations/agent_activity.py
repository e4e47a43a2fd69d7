"""An agent's ``last_activity_span_at``: the latest of its runs', moved on every span write."""

from __future__ import annotations

from governance_core.registry import Context
from governance_core.rules.aggregates import latest
from governance_core.storage.protocol import Record

__all__ = ["follow_run_activity"]


def follow_run_activity(ctx: Context, agent_id: str, run_activity: str | None) -> Record:
    """Move the agent's ``last_activity_span_at`` up to a run's (a stored timestamp).

    Call it after any write that moved a run's ``last_activity_span_at``, in the same
    transaction; an earlier time leaves the agent as it is. Returns the agent as stored.
    """
    agent = ctx.store.get("agents", agent_id)
    assert agent is not None, "a run's agent is never deleted before its runs"
    current = agent.get("last_activity_span_at")
    if latest(current, run_activity) != current:
        agent = {**agent, "last_activity_span_at": run_activity}
        ctx.store.put("agents", agent)
    return agent
