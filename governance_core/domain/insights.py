"""What a run read shows beyond its stored fields: quality summaries, cost and risk.

All three are computed on read from what span and quality writes keep on the instance record
(``quality_payloads``, ``token_groups``, ``span_schema_counts``), the run's schema version and
its agent's risk profile: a read costs a few key lookups whatever the number of spans, and a
price table or risk profile change applies from the next read on.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governance_core.context import Context
from governance_core.domain.risk import Rulesets, instance_risk_score
from governance_core.repository import Record
from governance_core.rules.cost import PricingCatalogue, cost_breakdown
from governance_core.rules.templates import render_template
from governance_core.rules.token_groups import stored_token_groups

__all__ = ["instance_cost", "quality_summaries", "run_insights"]


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
