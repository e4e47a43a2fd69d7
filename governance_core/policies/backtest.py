"""Back-testing: what a draft policy would have decided over the runs already recorded.

:func:`backtest_policy` judges every activity span of the runs started in a window (by the
draft's scope and the window's agent and environment) as the action it records
(:func:`~governance_core.policies.recorded.recorded_action`), with the run's figures as
they stood before that span (:class:`~governance_core.policies.recorded.RunSoFar`): the
runs in ``started_at`` order, each run's spans in ``started_at`` order, both read in keyset
pages, so memory holds a page at a time whatever the window holds. The draft is parsed and
compiled once. Nothing is written.

The report counts each span's outcome under the draft's mode (an ``observe`` draft allows
everything and counts what enforcing would have said as ``observed_outcomes``) and lists the
spans, and the runs, that the draft would stop (deny, or hold for approval; an observe
draft's observed outcome), the first ``limit`` of each, with their counts.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Final

import attrs

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.models.policies import OUTCOMES
from governance_core.policies.deciding import compile_policies
from governance_core.policies.engine import require_engine
from governance_core.policies.recorded import JudgedSpan, RecordedJudge
from governance_core.repository import Filter, Record, RecordTable, SortKey, tenant_filter
from governance_core.rules.aggregates import ACTIVITY

__all__ = [
    "BACKTEST_MODES",
    "DRAFT_ID",
    "BacktestReport",
    "BacktestWindow",
    "Draft",
    "backtest_policy",
]

BACKTEST_MODES: Final = ("enforce", "observe")
"""The modes a draft is judged in (a disabled policy decides nothing)."""

DRAFT_ID: Final = "draft"
"""The id a draft that is not a saved policy is judged under (its reasons show null)."""

_STOPPING: Final = frozenset({"deny", "pending_approval"})
_RUN_PAGE: Final = 200
_SPAN_PAGE: Final = 1000
_ORDER: Final = (SortKey("started_at"), SortKey("id"))


def _empty_scope() -> dict[str, list[str]]:
    return {"environment_ids": [], "agent_ids": []}


@attrs.frozen
class Draft:
    """Policy text to back-test, in a mode and scope; a saved policy's id when it is one.

    ``version`` is the version its reasons name: a saved policy's next one when the text
    changed, its own when not, 1 for a new draft.
    """

    source: str
    mode: str = "enforce"
    scope: Mapping[str, Sequence[str]] = attrs.field(factory=_empty_scope)
    name: str = "draft"
    policy_id: str | None = None
    version: int = 1

    def record(self, account_id: str) -> Record:
        """The draft as a policy record, judged as a stored policy is."""
        return {
            "id": self.policy_id or DRAFT_ID, "account_id": account_id, "name": self.name,
            "mode": self.mode, "source": self.source, "version": self.version,
            "scope": {key: list(value) for key, value in self.scope.items()},
        }


@attrs.frozen
class BacktestWindow:
    """The recorded runs to judge: started from ``since`` up to ``until``, optionally narrowed."""

    since: datetime
    until: datetime
    agent_id: str | None = None
    environment_id: str | None = None


@attrs.define
class BacktestReport:
    """What the draft would have decided (see the module); :meth:`to_json` is its answer."""

    policy: dict[str, Any]
    window: BacktestWindow
    limit: int
    runs: int = 0
    spans: int = 0
    outcomes: dict[str, int] = attrs.field(factory=lambda: dict.fromkeys(OUTCOMES, 0))
    observed_outcomes: dict[str, int] | None = None
    warnings: int = 0
    errors: int = 0
    stopped_run_count: int = 0
    stopped_runs: list[dict[str, Any]] = attrs.field(factory=list)
    stopped_span_count: int = 0
    stopped_spans: list[dict[str, Any]] = attrs.field(factory=list)

    def count(self, instance: Record, judged: JudgedSpan, run_item: dict[str, Any] | None
              ) -> dict[str, Any] | None:
        """Count one judged span of ``instance``; the run's stopped item (made at its first).

        ``run_item`` is what this returned for the run's previous span (None at first).
        """
        verdict = judged.verdict
        self.spans += 1
        self.outcomes[verdict.outcome] += 1
        if self.observed_outcomes is not None and verdict.observed_outcome is not None:
            self.observed_outcomes[verdict.observed_outcome] += 1
        self.warnings += 1 if verdict.warnings else 0
        self.errors += 1 if verdict.errors else 0
        said = verdict.observed_outcome or verdict.outcome
        if said not in _STOPPING:
            return run_item
        span = judged.span
        self.stopped_span_count += 1
        if len(self.stopped_spans) < self.limit:
            self.stopped_spans.append({
                "agent_span_id": span["id"], "agent_instance_id": instance["id"],
                "schema_name": span["schema_name"], "started_at": span["started_at"],
                "action": {
                    "kind": judged.action.kind, "name": judged.action.name,
                    "span_type": judged.action.span_type,
                },
                "outcome": verdict.outcome, "observed_outcome": verdict.observed_outcome,
                "warnings": list(verdict.warnings),
                "reasons": [
                    {**reason, "policy_id": self.policy["id"]} for reason in verdict.reasons
                ],
            })
        if run_item is None:
            self.stopped_run_count += 1
            run_item = {
                "agent_instance_id": instance["id"], "agent_id": instance["agent_id"],
                "environment_id": instance["environment_id"],
                "started_at": instance["started_at"], "first_agent_span_id": span["id"],
                "first_action": {"kind": judged.action.kind, "name": judged.action.name},
                "stopped_spans": 0,
            }
            if len(self.stopped_runs) < self.limit:
                self.stopped_runs.append(run_item)
        run_item["stopped_spans"] += 1
        return run_item

    def to_json(self) -> dict[str, Any]:
        """The report as ``policies/test`` answers it."""
        return {
            "policy": dict(self.policy),
            "window": {
                "since": format_timestamp(self.window.since),
                "until": format_timestamp(self.window.until),
                "agent_id": self.window.agent_id,
                "environment_id": self.window.environment_id,
            },
            "runs": self.runs,
            "spans": self.spans,
            "outcomes": dict(self.outcomes),
            "observed_outcomes": (
                None if self.observed_outcomes is None else dict(self.observed_outcomes)
            ),
            "warnings": self.warnings,
            "errors": self.errors,
            "stopped_runs": {"count": self.stopped_run_count, "items": list(self.stopped_runs)},
            "stopped_spans": {
                "count": self.stopped_span_count, "items": list(self.stopped_spans),
            },
        }


def _keyset_pages(
    ctx: Context, table: RecordTable, filters: Sequence[Filter], size: int
) -> Iterator[list[Record]]:
    """Every record of ``table`` matching ``filters`` in (started_at, id) order, page by page.

    The store's filters are conjunctive, so "after (started_at, id)" is two indexed queries:
    the same start with a greater id, then later starts. No page reads a record before it.
    """
    page = table.query(list(filters), sort=_ORDER, limit=size)
    while page:
        yield page
        if len(page) < size:
            return
        last = page[-1]
        page = table.query([
            *filters, Filter("started_at", "eq", last["started_at"]),
            Filter("id", "gt", last["id"]),
        ], sort=_ORDER, limit=size)
        if len(page) < size:
            page += table.query(
                [*filters, Filter("started_at", "gt", last["started_at"])],
                sort=_ORDER, limit=size - len(page),
            )


def _run_filters(ctx: Context, window: BacktestWindow, scope: Mapping[str, Sequence[str]]
                 ) -> list[Filter]:
    filters = [
        tenant_filter(ctx.account_id),
        Filter("started_at", "ge", format_timestamp(window.since)),
        Filter("started_at", "le", format_timestamp(window.until)),
    ]
    if window.agent_id is not None:
        filters.append(Filter("agent_id", "eq", window.agent_id))
    if window.environment_id is not None:
        filters.append(Filter("environment_id", "eq", window.environment_id))
    if scope.get("agent_ids"):
        filters.append(Filter("agent_id", "in", list(scope["agent_ids"])))
    if scope.get("environment_ids"):
        filters.append(Filter("environment_id", "in", list(scope["environment_ids"])))
    return filters


def backtest_policy(
    ctx: Context, draft: Draft, window: BacktestWindow, *, limit: int = 100
) -> BacktestReport:
    """Judge the recorded runs of ``window`` by ``draft`` alone; what it would have decided.

    ``limit`` bounds each list of stopped runs and spans (their counts are whole). The
    draft's text must have passed :func:`~governance_core.policies.engine.check_source`.
    """
    require_engine()
    record = draft.record(ctx.account_id)
    active = compile_policies({record["id"]: record})
    judge = RecordedJudge(ctx, active, earlier_runs="before_run")
    report = BacktestReport(
        policy={
            "id": draft.policy_id, "name": draft.name, "mode": draft.mode,
            "version": draft.version, "scope": record["scope"],
        },
        window=window, limit=limit,
        observed_outcomes=dict.fromkeys(OUTCOMES, 0) if draft.mode == "observe" else None,
    )
    runs_in_window = _run_filters(ctx, window, draft.scope)
    for runs in _keyset_pages(ctx, ctx.tables.agent_instances, runs_in_window, _RUN_PAGE):
        for instance in runs:
            run = judge.start(instance, stored=False)
            if run is None:
                continue
            report.runs += 1
            run_item: dict[str, Any] | None = None
            spans = [
                tenant_filter(ctx.account_id), Filter("agent_instance_id", "eq", instance["id"]),
                Filter("purpose", "eq", ACTIVITY),
            ]
            for page in _keyset_pages(ctx, ctx.tables.agent_spans, spans, _SPAN_PAGE):
                for judged in judge.judge(run, page):
                    run_item = report.count(instance, judged, run_item)
    return report
