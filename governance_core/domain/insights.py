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

A run's ``session_id`` and ``user_id`` (set once, by the first span naming them: see
:func:`~governance_core.domain.runs.keep_run_parties`) are declared fields too: the runs list
filters by them and :func:`run_sessions` groups the runs of a window by session.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import attrs

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.domain.risk import (
    Rulesets,
    instance_risk_score,
    run_total_score,
    span_type_data_risks,
)
from governance_core.domain.runs import (
    RUN_PARTIES,
    bucket_bound,
    in_reach,
    span_bucket_count,
    span_count_bucket,
)
from governance_core.repository import Filter, Record, RecordTable, tenant_filter
from governance_core.rules.cost import PricingCatalogue, cost_breakdown
from governance_core.rules.risk import RISK_LEVELS, is_assessable, risk_level
from governance_core.rules.states import SPAN, states
from governance_core.rules.templates import render_template
from governance_core.rules.token_groups import stored_token_groups
from governance_core.storage.protocol import GroupBy, SortKey

__all__ = [
    "ANCESTORS_READ",
    "FAILED_SPANS_TRACED",
    "RUN_GROUPS",
    "RUN_SORTS",
    "RunFilter",
    "SessionSummary",
    "child_counts",
    "count_run_spans",
    "failed_span_ancestors",
    "instance_cost",
    "keep_risk_level",
    "keep_run_models",
    "keep_total_cost",
    "list_runs",
    "run_filters",
    "quality_summaries",
    "rescore_runs",
    "run_insights",
    "run_parties",
    "run_risk_level",
    "run_sessions",
    "run_totals",
    "run_trends",
]

FAILED_SPANS_TRACED = 500
"""The most failed spans of a run :func:`failed_span_ancestors` traces (the first in time)."""

ANCESTORS_READ = 2000
"""The most ancestor spans :func:`failed_span_ancestors` reads for one run."""

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
    schema_version = ctx.caches.schema_version(
        ctx.tables.agent_schema_versions, instance["agent_schema_version_id"]
    )
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
    """Return the run ``after`` a span write with ``total_cost`` and ``span_total`` kept.

    ``span_total`` (and its ``span_bucket``) follows ``span_counts.total`` (the run is
    written by the span write anyway). The cost is priced again only when the write moved
    the run's token usage (or the run has usage and no cost kept yet); then the run's
    ``run_models`` rows follow too (:func:`keep_run_models`).
    """
    total_spans = (after.get("span_counts") or {}).get("total")
    if total_spans is not None and (
        after.get("span_total") != total_spans or "span_bucket" not in after
    ):
        after = {
            **after, "span_total": total_spans, "span_bucket": span_count_bucket(total_spans),
        }
    groups = after.get("token_groups")
    if groups == before.get("token_groups") and ("total_cost" in after or not groups):
        return after
    keep_run_models(ctx, before, after)
    cost = instance_cost(after, ctx.config.pricing)
    total = None if cost is None else cost["total_cost"]
    return {**after, "total_cost": None if total is None else float(total)}


def _model_row_id(run_id: str, group: Mapping[str, Any]) -> str:
    key = f"{group['model_name']}\0{group.get('provider') or ''}".encode()
    return f"{run_id}.{hashlib.sha256(key).hexdigest()[:24]}"


def keep_run_models(ctx: Context, before: Record, after: Record) -> None:
    """Write the ``run_models`` rows of the run ``after``: one per stored token group.

    A row holds the group's tokens and cost (priced as ``total_cost`` is) under the run's
    agent, environment and ``started_day``; a group the write dropped loses its row. Only
    groups the write changed are written: usually one row, on span writes that report usage.
    """
    old = {_model_row_id(before["id"], group): group for group in before.get("token_groups") or []}
    now = format_timestamp(ctx.now)
    kept = set()
    for group in after.get("token_groups") or []:
        row_id = _model_row_id(after["id"], group)
        kept.add(row_id)
        started = after.get("started_at")
        if old.get(row_id) == group and before.get("started_at") == started:
            continue
        priced = cost_breakdown(stored_token_groups({"token_groups": [group]}), ctx.config.pricing)
        cost = priced["total_cost"]
        ctx.tables.run_models.put({
            "id": row_id, "account_id": after["account_id"], "inserted_at": now,
            "agent_instance_id": after["id"], "agent_id": after["agent_id"],
            "environment_id": after["environment_id"],
            # The stored timestamp's UTC date, as the run's started_day.
            "started_day": None if started is None else started[:10],
            "model_name": group["model_name"], "provider": group.get("provider"),
            "input_tokens": int(group.get("input") or 0),
            "output_tokens": int(group.get("output") or 0),
            "cost": None if cost is None else float(cost),
        })
    for row_id in old.keys() - kept:
        ctx.tables.run_models.delete(row_id)


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
    ctx.tables.agent_instances.put(stored)
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
    for run in ctx.tables.agent_instances.iterate(filters):
        schema_version = ctx.caches.schema_version(
            ctx.tables.agent_schema_versions, run["agent_schema_version_id"]
        )
        level = run_risk_level(ctx, run, schema_version, rulesets)
        if level != run.get("risk_level"):
            changed.append({**run, "risk_level": level})
    # Written after the iteration, so no page of it reads a row this rewrote.
    for run in changed:
        ctx.tables.agent_instances.put(run)
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
    rows = ctx.tables.agent_instances.aggregate(
        [RUN_GROUPS[name] for name in group_by], ["total_cost"], conditions
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
    return ctx.tables.agent_spans.count([
        tenant_filter(ctx.account_id), Filter("agent_instance_id", "eq", instance_id),
        Filter("status", "in", list(states(SPAN))),
    ])


def child_counts(ctx: Context, span_ids: Collection[str]) -> dict[str, int]:
    """How many child spans each of the caller's spans ``span_ids`` has (absent: none).

    One grouped query of the index of spans by parent, whatever the number of children.
    """
    if not span_ids:
        return {}
    rows = ctx.tables.agent_spans.aggregate([GroupBy("parent_span_id")], [], [
        tenant_filter(ctx.account_id), Filter("parent_span_id", "in", sorted(span_ids)),
    ])
    return {str(row.key[0]): row.count for row in rows}


def failed_span_ancestors(ctx: Context, instance_id: str) -> tuple[frozenset[str], bool]:
    """The spans of the caller's run ``instance_id`` that have a failed span below them.

    The run's failed spans come from the index of spans by status, run and start (the first
    :data:`FAILED_SPANS_TRACED` of them); their parent chains are read one span at a time,
    each span once, at most :data:`ANCESTORS_READ` spans. The flag says whether a bound
    stopped the walk (some ancestors may then be missing).
    """
    failed = ctx.tables.agent_spans.query(
        [tenant_filter(ctx.account_id), Filter("status", "eq", "failed"),
         Filter("agent_instance_id", "eq", instance_id)],
        sort=[SortKey("started_at")], limit=FAILED_SPANS_TRACED + 1,
    )
    stopped = len(failed) > FAILED_SPANS_TRACED
    ancestors: set[str] = set()
    reads = 0
    for record in failed[:FAILED_SPANS_TRACED]:
        parent = record.get("parent_span_id")
        while isinstance(parent, str) and parent not in ancestors:
            if reads >= ANCESTORS_READ:
                return frozenset(ancestors), True
            reads += 1
            ancestors.add(parent)
            above = ctx.tables.agent_spans.get(parent)
            if above is None or above.get("account_id") != ctx.account_id:
                break
            parent = above.get("parent_span_id")
    return frozenset(ancestors), stopped


RUN_SORTS: dict[str, tuple[str, ...] | None] = {
    "started_at": ("started_at",),
    "duration": ("duration_ms",),
    "cost": ("total_cost",),
    "spans": ("span_bucket", "span_total"),
    "risk": None,
}
"""What :func:`list_runs` sorts by, and the stored fields each sort reads in turn (risk: its
level). The span count is sorted by its bucket first, which an index holds, then by the count
within the bucket."""



@attrs.frozen
class RunFilter:
    """What :func:`list_runs` and :func:`run_trends` keep of the caller's runs.

    ``agent_ids`` None means any agent (an empty tuple matches no run);
    ``started_from`` and ``started_before`` bound ``started_at`` (the first inclusive, the
    second not; a run not started has none and is left out by either);
    ``external_id_prefix`` keeps runs whose external identifier starts with it (code points,
    case-sensitive: an index range, not a scan); ``score_min`` and ``score_max`` bound the
    run's quality score (both inclusive; a run without one is left out by either);
    ``session_id`` and ``user_id`` keep the runs of that session or user (exact match).
    """

    agent_ids: tuple[str, ...] | None = None
    environment_id: str | None = None
    status: str | None = None
    purpose: str | None = None
    risk_level: str | None = None
    started_from: datetime | None = None
    started_before: datetime | None = None
    external_id_prefix: str | None = None
    score_min: float | None = None
    score_max: float | None = None
    session_id: str | None = None
    user_id: str | None = None


def _after_prefix(prefix: str) -> str | None:
    """The least text above every text starting with ``prefix`` (None when there is none)."""
    while prefix:
        last = ord(prefix[-1]) + 1
        if last == 0xD800:  # surrogates are no text: skip over them
            last = 0xE000
        if last <= 0x10FFFF:
            return prefix[:-1] + chr(last)
        prefix = prefix[:-1]
    return None


def _reach(ctx: Context) -> list[Filter]:
    conditions = [tenant_filter(ctx.account_id)]
    principal = ctx.principal
    if principal is not None and principal.is_ingestion:
        conditions += [
            Filter("agent_id", "eq", principal.agent_id),
            Filter("environment_id", "eq", principal.environment_id),
        ]
    return conditions


def run_filters(ctx: Context, chosen: RunFilter) -> list[Filter]:
    """The store's filters for ``chosen`` over the runs the caller may see."""
    conditions = _reach(ctx)
    if chosen.agent_ids is not None:
        conditions.append(Filter("agent_id", "in", sorted(chosen.agent_ids)))
    for field in ("environment_id", "status", "purpose", "risk_level", "session_id", "user_id"):
        value = getattr(chosen, field)
        if value is not None:
            conditions.append(Filter(field, "eq", value))
    if chosen.started_from is not None:
        conditions.append(Filter("started_at", "ge", format_timestamp(chosen.started_from)))
    if chosen.started_before is not None:
        conditions.append(Filter("started_at", "lt", format_timestamp(chosen.started_before)))
    if chosen.score_min is not None:
        conditions.append(Filter("quality_score", "ge", float(chosen.score_min)))
    if chosen.score_max is not None:
        conditions.append(Filter("quality_score", "le", float(chosen.score_max)))
    if chosen.external_id_prefix:
        conditions.append(Filter("external_identifier", "ge", chosen.external_id_prefix))
        above = _after_prefix(chosen.external_id_prefix)
        if above is not None:
            conditions.append(Filter("external_identifier", "lt", above))
    return conditions


def list_runs(
    ctx: Context,
    chosen: RunFilter,
    *,
    sort: str = "started_at",
    descending: bool = True,
    offset: int = 0,
    limit: int = 25,
) -> tuple[list[Record], int]:
    """One page of the caller's runs that ``chosen`` keeps, in ``sort`` order, and their count.

    ``sort`` is a key of :data:`RUN_SORTS`; runs without the sorted value (not finished, no
    priced usage, no level) come last either way, and ties go newest start first. Every sort
    is one store query of a stored field, run for the runs with a value and then (once a
    page reaches them) for those without; ``risk`` orders by level (critical above low),
    one query per level the page reaches, and ``spans`` by count, a few queries per bucket
    of counts the page reaches (:func:`_by_span_count`). A level, bucket or part the page
    starts beyond is counted; the total always is.
    """
    if sort not in RUN_SORTS:
        raise ValueError(f"runs cannot be sorted by {sort!r}")
    filters = run_filters(ctx, chosen)
    newest = SortKey("started_at", descending=True, nulls="last")
    fields = RUN_SORTS[sort]
    if sort == "spans":
        total = ctx.tables.agent_instances.count(filters)
        return _by_span_count(ctx, filters, total, descending, offset, limit), total
    if fields is not None:
        # The runs with a value first, then those without: each part is ordered by an index
        # either way (``NULLS LAST`` on an ascending key would make SQLite sort every row).
        field = fields[0]
        total = ctx.tables.agent_instances.count(filters)
        valued = [*filters, Filter(field, "ne", None)]
        keys = [SortKey(name, descending=descending) for name in fields]
        if field != "started_at":
            keys.append(SortKey("started_at", descending=True))
        rows = ctx.tables.agent_instances.query(valued, keys, offset, limit)
        if len(rows) < limit and total > offset + len(rows):
            # Past the runs with a value: how many there are is known from this page, or
            # (a page past all of them) counted.
            held = (
                offset + len(rows) if rows else ctx.tables.agent_instances.count(valued)
            )
            rows += ctx.tables.agent_instances.query(
                [*filters, Filter(field, "eq", None)],
                [] if field == "started_at" else [newest],
                max(0, offset - held), limit - len(rows),
            )
        return rows, total
    total = ctx.tables.agent_instances.count(filters)
    order = [*(reversed(RISK_LEVELS) if descending else RISK_LEVELS), None]
    page: list[Record] = []
    skip = offset
    for level in order:
        if len(page) >= limit or offset + len(page) >= total:
            break
        at_level = [*filters, Filter("risk_level", "eq", level)]
        got = ctx.tables.agent_instances.query(at_level, [newest], skip, limit - len(page))
        if got:
            page += got
            skip = 0
        elif skip:
            # This level ends before the page starts: only a page past it counts it.
            skip -= ctx.tables.agent_instances.count(at_level)
    return page, total


def _by_span_count(
    ctx: Context, filters: list[Filter], total: int, descending: bool, offset: int, limit: int
) -> list[Record]:
    """One page of the runs ``filters`` keep (``total`` of them), by span count.

    A few queries per span count bucket the page reaches, the account's buckets taken in
    order (each found by the index of buckets, reading one run): a bucket of one count is read in
    its index's order (newest start first) and stops at the page's end, however many runs
    share it; one of several counts is sorted by the count. A single query sorting every
    run by bucket and count would read every run of the first bucket, which most runs often
    share. The runs without a bucket (written before buckets were kept) come last.
    """
    table = ctx.tables.agent_instances
    account = tenant_filter(ctx.account_id)
    newest = SortKey("started_at", descending=True)
    page: list[Record] = []
    skip = offset
    beyond = Filter("span_bucket", "ne", None)
    # The index's own order (the start too, same way): the store's last key, the id, then
    # sorts only the runs that share a start, not every run of the bucket.
    next_bucket = [
        SortKey("span_bucket", descending=descending), SortKey("started_at", descending=descending)
    ]
    while len(page) < limit and offset + len(page) < total:
        following = table.query([account, beyond], next_bucket, 0, 1)
        if not following:
            break
        bucket = following[0]["span_bucket"]
        beyond = Filter("span_bucket", "lt" if descending else "gt", bucket)
        in_bucket = [*filters, Filter("span_bucket", "eq", bucket)]
        if span_bucket_count(bucket) is not None:
            keys = [newest]
        else:
            keys = [SortKey("span_total", descending=descending), newest]
            in_bucket += _named_runs(table, [account, Filter("span_bucket", "eq", bucket)])
        got = table.query(in_bucket, keys, skip, limit - len(page))
        if got:
            page += got
            skip = 0
        elif skip:
            # This bucket ends before the page starts: only a page past it counts it.
            skip -= table.count(in_bucket)
    if len(page) < limit and offset + len(page) < total:
        page += table.query(
            [*filters, Filter("span_bucket", "eq", None)],
            [SortKey("started_at", descending=True, nulls="last")], skip, limit - len(page),
        )
    return page


_NAMED_RUNS = 1000
"""The most runs of a bucket :func:`_named_runs` names by id."""


def _named_runs(table: RecordTable, bucket: list[Filter]) -> list[Filter]:
    """A filter naming the runs of ``bucket`` by id, when there are at most a thousand.

    A bucket of several counts must be sorted by the count. Its runs are few, as a rule (the
    top buckets of an account hold its longest runs), but the database cannot tell: given
    the other filters as well (an agent and a status, say) it may take their index and read
    every run they keep. Named by id (from the bucket's index), only the bucket's runs are
    read.
    """
    if table.count(bucket) > _NAMED_RUNS:
        return []
    ids = [row.key[0] for row in table.aggregate([GroupBy("id")], filters=bucket)]
    return [Filter("id", "in", ids)]


def run_parties(ctx: Context, run_id: str) -> dict[str, str | None]:
    """The ``session_id`` and ``user_id`` of the caller's run ``run_id`` (None when unset).

    Both None for a run the caller may not see. They are fields of the store, not of the
    run's view (see :data:`~governance_core.domain.runs.RUN_PARTIES`).
    """
    record = ctx.tables.agent_instances.get(run_id)
    if record is None or record.get("account_id") != ctx.account_id or not in_reach(ctx, record):
        return dict.fromkeys(RUN_PARTIES)
    return {field: record.get(field) for field in RUN_PARTIES}


@attrs.frozen
class SessionSummary:
    """One session's runs started in a window (see :func:`run_sessions`).

    ``first_day`` and ``last_day`` are the UTC days (``YYYY-MM-DD``) of its earliest and
    latest start in the window; ``total_cost`` adds up its runs' kept costs (None when none
    has a priced cost); ``user_ids`` are the users its runs name, sorted.
    """

    session_id: str
    runs: int
    failed: int
    first_day: str
    last_day: str
    total_cost: Decimal | None
    user_ids: tuple[str, ...]


def run_sessions(
    ctx: Context, started_from: datetime, started_before: datetime | None = None
) -> list[SessionSummary]:
    """The sessions of the caller's runs started from ``started_from`` (before ``started_before``).

    Newest activity first: by the day of their latest start, then more runs first, then by
    id. One grouped query of the store answers it, by session, day of start, status and
    user, whatever the number of runs: the sessions are folded from its groups, never from
    runs. A run without a session, or not started, is in none.
    """
    conditions = [
        *_reach(ctx), Filter("session_id", "ne", None),
        Filter("started_at", "ge", format_timestamp(started_from)),
    ]
    if started_before is not None:
        conditions.append(Filter("started_at", "lt", format_timestamp(started_before)))
    rows = ctx.tables.agent_instances.aggregate(
        [GroupBy("session_id"), GroupBy("started_at", day=True), GroupBy("status"),
         GroupBy("user_id")],
        ["total_cost"], conditions,
    )
    folded: dict[str, dict[str, Any]] = {}
    for row in rows:
        session_id, day, status, user_id = row.key
        entry = folded.setdefault(session_id, {
            "runs": 0, "failed": 0, "first_day": day, "last_day": day, "total_cost": None,
            "user_ids": set(),
        })
        entry["runs"] += row.count
        if status == "failed":
            entry["failed"] += row.count
        entry["first_day"] = min(entry["first_day"], day)
        entry["last_day"] = max(entry["last_day"], day)
        if row.sums[0] is not None:
            entry["total_cost"] = (entry["total_cost"] or Decimal(0)) + Decimal(repr(row.sums[0]))
        if user_id is not None:
            entry["user_ids"].add(user_id)
    sessions = [
        SessionSummary(session_id, **{**entry, "user_ids": tuple(sorted(entry["user_ids"]))})
        for session_id, entry in folded.items()
    ]
    sessions.sort(key=lambda summary: summary.session_id)
    sessions.sort(key=lambda summary: (summary.last_day, summary.runs), reverse=True)
    return sessions


FINISHED = ("complete", "failed", "cancelled", "terminated")
"""The statuses of a finished run: the error rate's denominator."""


def _percentile(buckets: Mapping[int, int], share: float) -> float | None:
    """The nearest-rank ``share`` percentile of counted duration buckets, as a bucket bound."""
    held = sum(buckets.values())
    if held == 0:
        return None
    rank = max(1, math.ceil(share * held))
    for bucket in sorted(buckets):
        rank -= buckets[bucket]
        if rank <= 0:
            return bucket_bound(bucket)
    raise AssertionError("the rank lies within the counted runs")


def run_trends(
    ctx: Context, first_day: date, last_day: date, chosen: RunFilter = RunFilter()
) -> dict[str, Any]:
    """Per UTC day from ``first_day`` to ``last_day``: the figures of the trends page.

    For the runs of ``chosen``'s agents and environment (its other fields are not used),
    by the UTC day they started (``started_day``): runs per status, error rate (failed among
    finished runs), p50 and p95 duration, cost, runs per risk level; tokens and cost per
    model (``run_models``); the mean quality score per agent (of the runs with one, see
    :func:`~governance_core.domain.runs.quality_score`); alerts raised per severity (by
    ``raised_at``, of the same agents and environment). Four grouped queries answer it,
    whatever the number of runs, from indexes alone (no run record is read).

    Durations are those of runs with a start and a finish, counted in buckets 2% wide
    (:func:`~governance_core.domain.runs.duration_bucket`): a percentile is the upper bound
    of the bucket holding the nearest-rank run, never below that run's exact duration and at
    most 2% above it. Returns ``{"days": [...], "models": [...]}``; each day holds ``day``
    (ISO date), ``runs``, ``statuses``, ``error_rate`` (None without finished runs),
    ``p50_ms``, ``p95_ms``, ``total_cost`` (Decimal or None), ``risk``, ``models``
    (``{name: {"input", "output", "cost"}}``), ``quality`` (``{agent_id: {"runs", "mean"}}``)
    and ``alerts`` (per severity).
    """
    conditions = [
        *run_filters(ctx, RunFilter(agent_ids=chosen.agent_ids,
                                    environment_id=chosen.environment_id)),
        Filter("started_day", "ge", first_day.isoformat()),
        Filter("started_day", "le", last_day.isoformat()),
    ]
    days: dict[str, dict[str, Any]] = {}
    for offset in range((last_day - first_day).days + 1):
        name = (first_day + timedelta(days=offset)).isoformat()
        days[name] = {
            "day": name, "runs": 0, "statuses": {}, "total_cost": None, "risk": {},
            "models": {}, "alerts": {}, "durations": {}, "quality": {},
        }
    by_day = GroupBy("started_day")
    for row in ctx.tables.agent_instances.aggregate(
        [by_day, GroupBy("status"), GroupBy("duration_bucket"), GroupBy("risk_level")],
        ["total_cost"], conditions,
    ):
        entry = days[row.key[0]]
        status, bucket, level = row.key[1:]
        entry["runs"] += row.count
        entry["statuses"][status] = entry["statuses"].get(status, 0) + row.count
        if bucket is not None:
            entry["durations"][bucket] = entry["durations"].get(bucket, 0) + row.count
        if level is not None:
            entry["risk"][level] = entry["risk"].get(level, 0) + row.count
        if row.sums[0] is not None:
            entry["total_cost"] = (entry["total_cost"] or Decimal(0)) + Decimal(repr(row.sums[0]))
    models: set[str] = set()
    for row in ctx.tables.run_models.aggregate(
        [by_day, GroupBy("model_name")],
        ["input_tokens", "output_tokens", "cost"], conditions,
    ):
        models.add(row.key[1])
        days[row.key[0]]["models"][row.key[1]] = {
            "input": row.sums[0] or 0, "output": row.sums[1] or 0,
            "cost": None if row.sums[2] is None else Decimal(repr(row.sums[2])),
        }
    for row in ctx.tables.agent_instances.aggregate(
        [by_day, GroupBy("agent_id")], ["quality_score"],
        [*conditions, Filter("quality_score", "ne", None)],
    ):
        days[row.key[0]]["quality"][row.key[1]] = {
            "runs": row.count, "mean": float(row.sums[0] or 0) / row.count,
        }
    start = datetime.combine(first_day, time(0), tzinfo=UTC)
    end = datetime.combine(last_day + timedelta(days=1), time(0), tzinfo=UTC)
    for row in ctx.tables.alerts.aggregate(
        [GroupBy("raised_at", day=True), GroupBy("severity")], (),
        _alert_filters(ctx, chosen, start, end),
    ):
        days[row.key[0]]["alerts"][row.key[1]] = row.count
    for entry in days.values():
        finished = sum(entry["statuses"].get(status, 0) for status in FINISHED)
        failed = entry["statuses"].get("failed", 0)
        entry["error_rate"] = failed / finished if finished else None
        durations = entry.pop("durations")
        entry["p50_ms"] = _percentile(durations, 0.50)
        entry["p95_ms"] = _percentile(durations, 0.95)
    return {"days": list(days.values()), "models": sorted(models)}


def _alert_filters(
    ctx: Context, chosen: RunFilter, start: datetime, end: datetime
) -> list[Filter]:
    conditions = _reach(ctx)
    if chosen.agent_ids is not None:
        conditions.append(Filter("agent_id", "in", sorted(chosen.agent_ids)))
    if chosen.environment_id is not None:
        conditions.append(Filter("environment_id", "eq", chosen.environment_id))
    conditions += [
        Filter("raised_at", "ge", format_timestamp(start)),
        Filter("raised_at", "lt", format_timestamp(end)),
    ]
    return conditions


def run_spans_by_start(
    ctx: Context,
    instance_id: str,
    *,
    status: str | None = None,
    schema_name: str | None = None,
    limit: int,
) -> list[Record]:
    """The first ``limit`` spans of the caller's run ``instance_id`` in start order.

    Narrowed to a ``status`` and a ``schema_name`` when given. One indexed read of the
    stored records, without the count a list page makes, for the console's filters that no
    index answers (name, duration, cost): it looks through these records itself.
    """
    filters = [tenant_filter(ctx.account_id), Filter("agent_instance_id", "eq", instance_id)]
    if status is not None:
        filters.append(Filter("status", "eq", status))
    if schema_name is not None:
        filters.append(Filter("schema_name", "eq", schema_name))
    return ctx.tables.agent_spans.query(
        filters, sort=[SortKey("started_at"), SortKey("id")], limit=limit
    )
