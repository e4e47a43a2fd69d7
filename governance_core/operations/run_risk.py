"""The risk of runs and spans (decisions 9), computed on read from what writes keep.

An instance's ``risk_score`` comes from its per-type activity span counts
(``span_schema_counts``, kept on every span write), the ``data_risk`` of each span type of
its schema version and the ruleset of its agent's risk profile (or the account's default
profile). A read never looks at the spans, so it costs the same at 10 or 100,000 spans, and
a profile change applies from the next read on.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from governance_core.operations.risk_profiles import ruleset_for
from governance_core.registry import Context
from governance_core.repository import Record
from governance_core.rules.risk import Ruleset, is_assessable, risk_level, score_run, type_score

__all__ = [
    "Rulesets",
    "instance_risk_score",
    "span_risk_fields",
    "span_type_data_risks",
]


class Rulesets:
    """The rulesets of the agents one operation touches, each looked up once."""

    def __init__(self, ctx: Context) -> None:
        self._ctx = ctx
        self._by_agent: dict[str, Ruleset] = {}

    def for_agent(self, agent_id: str, agent: Record | None = None) -> Ruleset:
        """Return the ruleset scoring the agent: its risk profile's, else the account default's.

        ``agent`` is the agent's record when the caller has read it already.
        """
        if agent_id not in self._by_agent:
            if agent is None or agent.get("id") != agent_id:
                agent = self._ctx.store.get("agents", agent_id)
            profile_id = None if agent is None else agent.get("risk_profile_id")
            self._by_agent[agent_id] = ruleset_for(self._ctx, profile_id)
        return self._by_agent[agent_id]


def span_type_data_risks(schema_version: Record | None) -> dict[str, Any]:
    """Return each span type's ``data_risk`` (None when it declares none) by type name."""
    span_types = (schema_version or {}).get("span_type_schemas") or {}
    return {
        name: entry.get("data_risk") if isinstance(entry, Mapping) else None
        for name, entry in span_types.items()
    }


def instance_risk_score(
    instance: Record, schema_version: Record | None, ruleset: Ruleset
) -> dict[str, Any] | None:
    """Return the instance's ``risk_score`` object, or None before any activity span ran.

    Span types the schema version does not declare ran but declare nothing.
    """
    counts: Mapping[str, int] = instance.get("span_schema_counts") or {}
    if not any(count > 0 for count in counts.values()):
        return None
    return score_run(counts, span_type_data_risks(schema_version), ruleset)


def span_risk_fields(span_type: Mapping[str, Any] | None, ruleset: Ruleset) -> dict[str, Any]:
    """Return a span's ``risk_score`` (its type's score for one invocation) and ``risk_level``.

    Both are null for quality and alert spans and for types the schema version does not
    declare (``span_type`` None); ``risk_level`` is null, as for a run, when the type
    declares nothing assessable.
    """
    if span_type is None:
        return {"risk_score": None, "risk_level": None}
    data_risk = span_type.get("data_risk")
    score: Decimal = type_score(data_risk, ruleset)
    level = risk_level(score, ruleset) if is_assessable(data_risk) else None
    return {"risk_score": score, "risk_level": level}
