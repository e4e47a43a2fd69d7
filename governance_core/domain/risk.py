"""The risk of runs and spans (decisions 9), and the ``risk_critical`` alert.

An instance's ``risk_score`` comes from its per-type activity span counts
(``span_schema_counts``, kept on every span write), the ``data_risk`` of each span type of
its schema version and the ruleset of its agent's risk profile (or the account's default
profile). A read never looks at the spans, so it costs the same at 10 or 100,000 spans, and
a profile change applies from the next read on.

The ``risk_critical`` alert is raised once, by the span write that takes a run to critical.
The check runs in the transaction of each new activity span. It is skipped, at no cost, for
runs already alerted (the instance's ``risk_critical_raised`` flag) and for spans whose type
declares nothing assessable (they add nothing to the score). Otherwise the run's score is
computed as a read would compute it; at ``critical`` the alert is raised through
:func:`governance_core.domain.alerts.raise_alert` and the flag set, so a later span, a
clear of the alert or a profile change never raises it again for that run.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from governance_core import jsontext
from governance_core.context import Context
from governance_core.converter import from_record, json_ready
from governance_core.domain.alerts import raise_alert
from governance_core.models.accounts import RiskProfile
from governance_core.repository import Filter, Record, tenant_filter
from governance_core.rules.risk import (
    DEFAULT_RULESET,
    Ruleset,
    is_assessable,
    parse_ruleset,
    risk_level,
    score_run,
    type_score,
)

__all__ = [
    "RISK_CRITICAL",
    "Rulesets",
    "instance_risk_score",
    "profile_ruleset",
    "raise_if_critical",
    "ruleset_for",
    "run_total_score",
    "span_risk_fields",
    "span_type_data_risks",
]


def _decimals(value: Any) -> Any:
    # Stored rulesets hold their numbers as exact decimal strings (the converter's form).
    if isinstance(value, dict):
        return {key: _decimals(item) for key, item in value.items()}
    if isinstance(value, str):
        return Decimal(value)
    return value


def profile_ruleset(profile: RiskProfile) -> Ruleset:
    """Return the profile's ruleset, read back from its stored form."""
    return parse_ruleset(_decimals(profile.ruleset))


def ruleset_for(ctx: Context, risk_profile_id: str | None) -> Ruleset:
    """Return the ruleset that scores an agent: its profile's, else the account default's.

    Read once per change of any risk profile or policy while the call knows its settings
    mark (:attr:`~governance_core.context.Context.settings_mark`).
    """
    mark = ctx.settings_mark
    if mark is None:
        return _read_ruleset(ctx, risk_profile_id)
    ruleset = ctx.caches.marked_rulesets.get(
        (ctx.account_id, risk_profile_id, mark), lambda: _read_ruleset(ctx, risk_profile_id)
    )
    assert ruleset is not None
    return ruleset


def _read_ruleset(ctx: Context, risk_profile_id: str | None) -> Ruleset:
    if risk_profile_id is not None:
        record = ctx.tables.risk_profiles.get(risk_profile_id)
        if record is not None and record["account_id"] == ctx.account_id:
            return _stored_ruleset(ctx, record)
    defaults = ctx.tables.risk_profiles.query(
        [tenant_filter(ctx.account_id), Filter("is_default", "eq", True)]
    )
    if not defaults:
        return DEFAULT_RULESET
    return _stored_ruleset(ctx, defaults[0])


def _stored_ruleset(ctx: Context, record: Record) -> Ruleset:
    """The ruleset of a stored profile, parsed once per ruleset (keyed by its JSON text)."""
    ruleset = ctx.caches.rulesets.get(
        jsontext.dumps(record["ruleset"]),
        lambda: profile_ruleset(from_record(RiskProfile, record)),
    )
    assert ruleset is not None
    return ruleset


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
                agent = self._ctx.tables.agents.get(agent_id)
            if agent is None:
                # Not kept: an agent made later under this id (a batch keeps its rulesets
                # across an agent's creation) may name a profile of its own.
                return ruleset_for(self._ctx, None)
            self._by_agent[agent_id] = ruleset_for(self._ctx, agent.get("risk_profile_id"))
        return self._by_agent[agent_id]


def span_type_data_risks(schema_version: Record | None) -> dict[str, Any]:
    """Return each span type's ``data_risk`` (None when it declares none) by type name."""
    span_types = (schema_version or {}).get("span_type_schemas") or {}
    return {
        name: entry.get("data_risk") if type(entry) is dict or isinstance(entry, Mapping)
        else None
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


def run_total_score(
    ctx: Context, instance: Record, schema_version: Record | None, ruleset: Ruleset
) -> Decimal:
    """Return the ``total_score`` of the instance's ``risk_score``, and nothing else of it.

    Each span type's score under ``ruleset`` is computed once per schema version and
    ruleset (both are kept by the caches), so a span write that checks for the critical
    alert adds up a handful of products.
    """
    version_id = (schema_version or {}).get("id")
    kept = ctx.caches.type_scores.get(
        (version_id, id(ruleset)), lambda: (ruleset, _type_scores(schema_version, ruleset))
    )
    # The kept entry holds its ruleset, so no other ruleset can have its id while it is kept.
    assert kept is not None and kept[0] is ruleset
    scores = kept[1]
    counts: Mapping[str, int] = instance.get("span_schema_counts") or {}
    return sum(
        (scores.get(name, _ZERO) * count for name, count in counts.items() if count > 0), _ZERO
    )


def _type_scores(schema_version: Record | None, ruleset: Ruleset) -> dict[str, Decimal]:
    return {
        name: type_score(data_risk, ruleset)
        for name, data_risk in span_type_data_risks(schema_version).items()
    }


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


_ZERO = Decimal(0)

RISK_CRITICAL = "risk_critical"
"""The name of the alert raised when a run's risk level reaches critical."""


def raise_if_critical(
    ctx: Context,
    instance: Record,
    span: Record,
    schema_version: Record | None,
    span_type: Mapping[str, Any] | None,
    agent: Record | None = None,
    rulesets: Rulesets | None = None,
) -> Record:
    """Raise ``risk_critical`` if the new activity ``span`` took its run to critical.

    ``instance`` is the run as stored after the span write, ``schema_version`` the run's
    schema version (already read by the span write) and ``span_type`` the span's entry in it.
    ``agent`` is the run's agent when the span write read it; ``rulesets`` the write's own,
    when it looks the ruleset up again afterwards. Returns the instance as stored
    afterwards. The alert's payload names the score, the
    threshold and the span that crossed it; the alert schema ``risk_critical``, when the
    run's schema version declares one, gives its title and summary.
    """
    if instance.get("risk_critical_raised"):
        return instance
    if span_type is None or not is_assessable(span_type.get("data_risk")):
        return instance
    ruleset = (rulesets or Rulesets(ctx)).for_agent(instance["agent_id"], agent)
    # The span's type declares something and ran, so the run's level is its total's.
    if run_total_score(ctx, instance, schema_version, ruleset) < ruleset.critical_threshold:
        return instance
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
