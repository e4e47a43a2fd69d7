"""Every state machine of the library, as data: one transition table per machine.

Nothing else assigns a status: a resource is created in its machine's :data:`INITIAL` state
(``initial(AGENT)``) and moves by ``advance(MACHINE, state, trigger)``, which answers the new
state or raises ``invalid_action``; docs and tests are derived from these tables.
"""

from __future__ import annotations

from collections.abc import Mapping

from governance_core.errors import InvalidAction

__all__ = [
    "AGENT",
    "ALERT",
    "INSTANCE",
    "INVITE",
    "MACHINES",
    "SPAN",
    "TOKEN",
    "Machine",
    "FINISH_STATUSES",
    "INITIAL",
    "SPAN_CREATE_STATES",
    "advance",
    "allowed",
    "initial",
    "reinstated_state",
    "states",
]

Machine = Mapping[tuple[str, str], str]
"""(state, trigger) -> new state."""

INSTANCE: Machine = {
    ("pending", "start"): "active",
    ("pending", "span"): "active",
    ("pending", "complete"): "complete",
    ("pending", "failed"): "failed",
    ("pending", "cancelled"): "cancelled",
    ("active", "complete"): "complete",
    ("active", "failed"): "failed",
    ("active", "cancelled"): "cancelled",
    ("pending", "terminate"): "terminated",
    ("active", "terminate"): "terminated",
}
"""Agent instance. ``start`` elsewhere is a no-op (clients send it late), not an error."""

FINISH_STATUSES = ("complete", "failed", "cancelled")
"""The statuses a ``finish`` of a run or of a span may ask for."""

SPAN: Machine = {
    ("active", "complete"): "complete",
    ("active", "failed"): "failed",
    ("active", "cancelled"): "cancelled",
    ("active", "terminate"): "cancelled",
}
"""Agent span, after creation (created active, complete, failed or cancelled)."""

SPAN_CREATE_STATES: Mapping[str, str] = {
    "pending": "active",
    "active": "active",
    "complete": "complete",
    "failed": "failed",
    "cancelled": "cancelled",
}
"""The status a span may be created with, and the status it is stored with."""

AGENT: Machine = {
    ("pending", "instance"): "active",
    ("active", "instance"): "active",
    ("pending", "retire"): "retired",
    ("active", "retire"): "retired",
    ("retired", "reinstate"): "active",
}
"""Agent (stored states; ``dormant`` is derived on read from activity). Reinstating an agent
without instances lands in ``pending``: see :func:`reinstated_state`."""

ALERT: Machine = {
    ("raised", "raise"): "raised",
    ("cleared", "raise"): "raised",
    ("raised", "clear"): "cleared",
}
"""Alert. Clearing a cleared alert is ``alert_already_cleared``, not ``invalid_action``."""

INVITE: Machine = {
    ("pending", "revoke"): "revoked",
    ("pending", "accept"): "accepted",
    ("pending", "expire"): "expired",
}
"""Admin user invite."""

TOKEN: Machine = {
    ("active", "suspend"): "suspended",
    ("suspended", "activate"): "active",
    ("active", "revoke"): "revoked",
    ("suspended", "revoke"): "revoked",
}
"""API token."""

MACHINES: Mapping[str, Machine] = {
    "agent_instance": INSTANCE,
    "agent_span": SPAN,
    "agent": AGENT,
    "alert": ALERT,
    "admin_user_invite": INVITE,
    "api_token": TOKEN,
}

INITIAL: Mapping[str, str] = {
    "agent_instance": "pending",
    "agent": "pending",
    "alert": "raised",
    "admin_user_invite": "pending",
    "api_token": "active",
}
"""The state each machine's resources are created in, by machine name. A span is created in
the state its create asks for (:data:`SPAN_CREATE_STATES`)."""


def initial(machine: Machine) -> str:
    """The state a resource of ``machine`` is created in."""
    for name, table in MACHINES.items():
        if table is machine:
            return INITIAL[name]
    raise ValueError("not a machine of this module")


def states(machine: Machine) -> tuple[str, ...]:
    """Every state of ``machine``, in the order the table first names them."""
    named: dict[str, None] = {}
    for (state, _), after in machine.items():
        named.setdefault(state, None)
        named.setdefault(after, None)
    return tuple(named)


def allowed(machine: Machine, state: str, trigger: str) -> bool:
    """Whether ``trigger`` may fire in ``state``."""
    return (state, trigger) in machine


def advance(machine: Machine, state: str, trigger: str, *, what: str = "resource") -> str:
    """Return the state after ``trigger``; ``invalid_action`` when the table has none."""
    try:
        return machine[(state, trigger)]
    except KeyError:
        article = "an" if what[:1] in "aeiou" else "a"
        raise InvalidAction(f"cannot {trigger} {article} {what} that is {state}") from None


def reinstated_state(instance_total: int) -> str:
    """Where ``reinstate`` lands: active, or pending for an agent without instances."""
    return "active" if instance_total else "pending"
