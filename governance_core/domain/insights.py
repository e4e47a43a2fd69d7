"""What a run read shows beyond its stored fields: quality summaries, cost and risk.

All three are computed on read from what span and quality writes keep on the instance record
(``quality_payloads``, ``token_groups``, ``span_schema_counts``), the run's schema version and
its agent's risk profile: a read costs a few key lookups whatever the number of spans, and a
price table or risk profile change applies from the next read on.

Figures over many runs (cost and risk levels per day, the runs list's risk filter) cannot be
computed run by run on read. Each run therefore also keeps two rollups, declared fields of the
store so that one grouped query (:meth:`~governance_core.storage.protocol.Store.aggregate`)
or one indexed filter answers them:

- ``total_cost``: the run's ``cost_breakdown.total_cost`` as a float (None when no span
  reported usage or no model of it has a price), set by every span write that moves the
  run's token usage, priced with the catalogue of the process that wrote it;
- ``risk_level``: the run's ``risk_score.risk_level``, set by every span create of a type that
  declares a data risk (only those move the score), and set again for every run concerned
  when a risk profile's ruleset or an agent's profile changes (:func:`rescore_runs`), in
  that write's transaction.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from decimal import Decimal
from typing import Any

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.domain.risk import (
    Rulesets,
    instance_risk_score,
    run_total_score,
    span_type_data_risks,
)
from governance_core.repository import Filter, Record, tenant_filter
from governance_core.rules.cost import PricingCatalogue, cost_breakdown
from governance_core.rules.risk import is_assessable, risk_level
from governance_core.rules.states import SPAN, states
from governance_core.rules.templates import render_template
from governance_core.rules.token_groups import stored_token_groups
from governance_core.storage.protocol import GroupBy

__all__ = [
    "RUN_GROUPS",
    "count_run_spans",
    "instance_cost",
    "keep_risk_level",
    "keep_total_cost",
    "quality_summaries",
    "rescore_runs",
    "run_insights",
    "run_risk_level",
    "run_totals",
]

RUN_GROUPS: dict[str, GroupBy] = {
    "day": GroupBy("started_at", day=True),
    "status": GroupBy("status"),
    "risk_level": GroupBy("risk_level"),
    "agent_id": GroupBy("agent_id"),
}
"""What :func:`run_totals` groups runs by: the UTC day they started, status, level, agent."""


def quality_summaries(
    schema_version: Record | None, payloads: Mapping[str, Any]
) -> dict[str, str]:
    """Render each quality payload with its quality schema's template.

    Only names whose schema has a template that renders are present.
    """
    schemas = (schema_version or {}).get("quality_schemas") or {}
    summaries: dict[str, str] = {}
    for name, payload in payloads.items():
        entry = schemas.get(name)
        if not isinstance(entry, Mapping) or not isinstance(payload, Mapping):
            continue
        summary = render_template(entry.get("template"), payload)
        if summary is not None:
            summaries[name] = summary
    return summaries


def instance_cost(instance: Record, pricing: PricingCatalogue) -> dict[str, Any] | None:
    """Return the instance's ``cost_breakdown``, or None when no span reported token usage."""
    groups = stored_token_groups(instance)
    if not groups:
        return None
    return cost_breakdown(groups, pricing)


def run_insights(
    ctx: Context, instance: Record, rulesets: Rulesets | None = None
) -> dict[str, Any]:
    """Return ``quality_summaries``, ``cost_breakdown`` and ``risk_score`` of a stored run.

    ``rulesets`` shares ruleset lookups across the rows of one list.
    """
    schema_version = ctx.caches.schema_version(ctx.store, instance["agent_schema_version_id"])
    ran = any(count > 0 for count in (instance.get("span_schema_counts") or {}).values())
    risk_score = None
    if ran:
        ruleset = (rulesets or Rulesets(ctx)).for_agent(instance["agent_id"])
        risk_score = instance_risk_score(instance, schema_version, ruleset)
    return {
        "quality_summaries": quality_summaries(
            schema_version, instance.get("quality_payloads") or {}
        ),
        "cost_breakdown": instance_cost(instance, ctx.config.pricing),
        "risk_score": risk_score,
    }


def run_risk_level(
    ctx: Context, instance: Record, schema_version: Record | None, rulesets: Rulesets
) -> str | None:
    """Return the run's ``risk_score.risk_level`` as a read computes it, from its sums alone.

    None unless some span type that ran declares a data risk; the level of the run's total
    score otherwise (each type's score is kept by the caches, so this adds a few products).
    """
    counts: Mapping[str, int] = instance.get("span_schema_counts") or {}
    data_risks = span_type_data_risks(schema_version)
    if not any(count > 0 and is_assessable(data_risks.get(name)) for name, count in counts.items()):
        return None
    ruleset = rulesets.for_agent(instance["agent_id"])
    return risk_level(run_total_score(ctx, instance, schema_version, ruleset), ruleset)


def keep_total_cost(ctx: Context, before: Record, after: Record) -> Record:
    """Return the run ``after`` a span write with its ``total_cost`` kept.

    The cost is priced again only when the write moved the run's token usage (or the run has
    usage and no cost kept yet).
    """
    groups = after.get("token_groups")
    if groups == before.get("token_groups") and ("total_cost" in after or not groups):
        return after
    cost = instance_cost(after, ctx.config.pricing)
    total = None if cost is None else cost["total_cost"]
    return {**after, "total_cost": None if total is None else float(total)}


def keep_risk_level(
    ctx: Context,
    instance: Record,
    schema_version: Record | None,
    span_type: Mapping[str, Any] | None,
    rulesets: Rulesets,
    agent: Record | None = None,
) -> Record:
    """Store the run's ``risk_level`` again after a span create of type ``span_type``.

    Only a type that declares a data risk moves the score, so any other create costs
    nothing; the run is written only when its level changed (a few times in its life).
    ``rulesets`` is the span write's own (the ``risk_critical`` check has looked its agent's
    ruleset up already, unless the run was critical before); ``agent`` the run's agent when
    the write read it. Returns the run as stored.
    """
    if span_type is None or not is_assessable(span_type.get("data_risk")):
        return instance
    rulesets.for_agent(instance["agent_id"], agent)
    level = run_risk_level(ctx, instance, schema_version, rulesets)
    if level == instance.get("risk_level") and "risk_level" in instance:
        return instance
    stored = {**instance, "risk_level": level}
    ctx.store.put("agent_instances", stored)
    return stored


def rescore_runs(ctx: Context, agent_ids: Collection[str] | None = None) -> int:
    """Set ``risk_level`` again on the runs of ``agent_ids`` (every agent when None).

    Call it in the transaction of a change of what scores those agents' runs (a profile's
    ruleset, an agent's profile). Only runs with a level can change: a run has none exactly
    when no type that ran declares a data risk, whatever the ruleset. Returns how many runs
    changed level.
    """
    filters = [tenant_filter(ctx.account_id), Filter("risk_level", "ne", None)]
    if agent_ids is not None:
        filters.append(Filter("agent_id", "in", sorted(agent_ids)))
    rulesets = Rulesets(ctx)
    changed = []
    for run in ctx.store.iterate("agent_instances", filters):
        schema_version = ctx.caches.schema_version(ctx.store, run["agent_schema_version_id"])
        level = run_risk_level(ctx, run, schema_version, rulesets)
        if level != run.get("risk_level"):
            changed.append({**run, "risk_level": level})
    # Written after the iteration, so no page of it reads a row this rewrote.
    for run in changed:
        ctx.store.put("agent_instances", run)
    return len(changed)


def run_totals(
    ctx: Context,
    group_by: Sequence[str],
    *,
    start_time: datetime | None = None,
    filters: Sequence[Filter] = (),
) -> list[dict[str, Any]]:
    """Count the caller's runs and add up their cost, per group of ``group_by``.

    ``group_by`` names keys of :data:`RUN_GROUPS`; ``start_time`` keeps runs started then or
    later (a run not started has no ``started_at`` and is left out); ``filters`` narrow the
    runs further. One grouped query of the store answers it, whatever the number of runs.
    Each row holds its keys by name, ``runs`` and ``total_cost`` (a Decimal, None when no
    run of the group has a priced cost). An ingestion token sees its own agent and
    environment only, as in the runs list.
    """
    unknown = [name for name in group_by if name not in RUN_GROUPS]
    if unknown:
        raise ValueError(f"runs cannot be grouped by {unknown[0]!r}")
    conditions = [tenant_filter(ctx.account_id), *filters]
    principal = ctx.principal
    if principal is not None and principal.is_ingestion:
        conditions += [
            Filter("agent_id", "eq", principal.agent_id),
            Filter("environment_id", "eq", principal.environment_id),
        ]
    if start_time is not None:
        conditions.append(Filter("started_at", "ge", format_timestamp(start_time)))
    rows = ctx.store.aggregate(
        "agent_instances", [RUN_GROUPS[name] for name in group_by], ["total_cost"], conditions
    )
    return [
        {
            **dict(zip(group_by, row.key, strict=True)),
            "runs": row.count,
            "total_cost": None if row.sums[0] is None else Decimal(repr(row.sums[0])),
        }
        for row in rows
    ]


def count_run_spans(ctx: Context, instance_id: str) -> int:
    """Count every span of the caller's run ``instance_id``: activity, quality and alert spans.

    The run's ``span_counts`` count its activity spans only. Naming every span status lets
    the store count from its index of spans by status, run and start, a few thousand index
    entries a millisecond, whatever the run's other spans.
    """
    return ctx.store.count("agent_spans", [
        tenant_filter(ctx.account_id), Filter("agent_instance_id", "eq", instance_id),
        Filter("status", "in", list(states(SPAN))),
    ])
