"""The ``risk_critical`` alert: raised once, by the span write that takes a run to critical.

The check runs in the transaction of each new activity span. It is skipped, at no cost, for
runs already alerted (the instance's ``risk_critical_raised`` flag) and for spans whose type
declares nothing assessable (they add nothing to the score). Otherwise the run's score is
computed as a read would compute it; at ``critical`` the alert is raised through
:func:`governance_core.operations.alerts.raise_alert` and the flag set, so a later span, a
clear of the alert or a profile change never raises it again for that run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governance_core.converter import json_ready
from governance_core.operations.alerts import raise_alert
from governance_core.operations.run_risk import Rulesets, instance_risk_score
from governance_core.registry import Context
from governance_core.repository import Record
from governance_core.rules.risk import is_assessable

__all__ = ["RISK_CRITICAL", "raise_if_critical"]

RISK_CRITICAL = "risk_critical"
"""The name of the alert raised when a run's risk level reaches critical."""


def raise_if_critical(
    ctx: Context,
    instance: Record,
    span: Record,
    schema_version: Record | None,
    span_type: Mapping[str, Any] | None,
    agent: Record | None = None,
) -> Record:
    """Raise ``risk_critical`` if the new activity ``span`` took its run to critical.

    ``instance`` is the run as stored after the span write, ``schema_version`` the run's
    schema version (already read by the span write) and ``span_type`` the span's entry in it.
    ``agent`` is the run's agent when the span write read it. Returns the instance as stored
    afterwards. The alert's payload names the score, the
    threshold and the span that crossed it; the alert schema ``risk_critical``, when the
    run's schema version declares one, gives its title and summary.
    """
    if instance.get("risk_critical_raised"):
        return instance
    if span_type is None or not is_assessable(span_type.get("data_risk")):
        return instance
    ruleset = Rulesets(ctx).for_agent(instance["agent_id"], agent)
    score = instance_risk_score(instance, schema_version, ruleset)
    if score is None or score["risk_level"] != "critical":
        return instance
    payload: dict[str, Any] = json_ready({
        "risk_level": score["risk_level"],
        "total_score": score["total_score"],
        "critical_threshold": score["critical_threshold"],
        "agent_span_id": span["id"],
        "schema_name": span["schema_name"],
    })
    written = raise_alert(
        ctx, {**instance, "risk_critical_raised": True}, RISK_CRITICAL, "critical", payload
    )
    return written.instance
