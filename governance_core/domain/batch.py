"""What the span writes of one transaction share, and what they leave to its end.

A bulk request or an OpenTelemetry export step writes many spans, often of one run, in one
transaction. :class:`WriteBatch` is that transaction's: its span writes note their run
instead of pricing it (:func:`~governance_core.domain.insights.keep_total_cost`) and scoring
its risk (:func:`~governance_core.domain.insights.keep_risk_level`) again each time, look each
agent's ruleset up once, and may be told which span ids no span of another run names as its
parent (read for many spans at once). :meth:`WriteBatch.keep` keeps the noted runs' rollups
once a run before the transaction commits, and before any other operation of the same
transaction runs (:class:`~governance_core.service.Governance` does both), so whatever reads
them reads them current. The rollups are functions of the run as it stands, so a savepoint
taken back changes nothing: its run is kept as the savepoint left it.

A single span write has a batch of its own that keeps nothing for later (``defers`` off):
its rollups are kept as it goes, since it writes each record once anyway.

A batch may also be given a ``judge``: the policies' detective mode
(:func:`governance_core.policies.detective.judge_and_keep`), which :meth:`WriteBatch.keep`
asks about the activity spans the batch created, run by run, from the run as it stood
before them: what the policies in scope say of them is kept, and the write goes on.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Final

from governance_core.context import Context
from governance_core.domain.insights import keep_total_cost, run_risk_level
from governance_core.domain.risk import Rulesets
from governance_core.repository import Record

__all__ = [
    "SETTINGS_KEPT_ACROSS", "SETTINGS_KEPT_BY", "RecordedJudge", "WriteBatch", "batch_of",
    "deferring_batch", "keeps_settings", "span_rollups", "write_rulesets", "writes_run_records",
]

SETTINGS_KEPT_ACROSS: Final = frozenset({
    "agent_instances", "agent_spans", "alerts", "approvals", "decisions",
})
"""The resources whose write operations never change a policy or what a ruleset is read from
(a risk profile, the profile an agent is assigned, the account's default): a batch keeps its
rulesets across them, and a call its settings mark (:class:`~governance_core.context.
Context`)."""


SETTINGS_KEPT_BY: Final = frozenset({"agents/create"})
"""Writes of other resources that change no setting either. A new agent's risk profile is
read when its first run is scored: no ruleset or policy kept before names the agent."""


def writes_run_records(operation: str) -> bool:
    """Whether ``operation`` writes a resource of :data:`SETTINGS_KEPT_ACROSS`."""
    return operation.partition("/")[0] in SETTINGS_KEPT_ACROSS


def keeps_settings(operation: str, *, write: bool) -> bool:
    """Whether ``operation`` (a read, or a listed write) leaves every ruleset and policy as is.

    The write of a resource in :data:`SETTINGS_KEPT_ACROSS` changes none, nor does one of
    :data:`SETTINGS_KEPT_BY`. An export of short traces finishes a run a trace (and its
    first makes the agent), and a batch would otherwise look its agent's profile and the
    account's policies up again after each.
    """
    return not write or writes_run_records(operation) or operation in SETTINGS_KEPT_BY


RecordedJudge = Callable[[Context, Record, Sequence[Record]], None]
"""Judges the spans a batch recorded on a run: ``judge(ctx, run_before, spans)``."""


class WriteBatch:
    """One transaction's span writes: the runs they moved, shared look-ups, ids known free."""

    def __init__(self, *, defers: bool = True, judge: RecordedJudge | None = None) -> None:
        self.defers = defers
        self._judge = judge
        self._runs: dict[str, tuple[Context, Record]] = {}
        self._scored: dict[str, Record | None] = {}
        self._created: dict[str, list[Record]] = {}
        self._rulesets: Rulesets | None = None
        self._unnamed: set[str] = set()

    def rulesets(self, ctx: Context) -> Rulesets:
        """The rulesets the transaction's span writes share until :meth:`keep`."""
        if self._rulesets is None:
            self._rulesets = Rulesets(ctx)
        return self._rulesets

    def note(self, ctx: Context, before: Record) -> None:
        """Note the run ``before`` a span write moves it (the first note of a run stands)."""
        self._runs.setdefault(before["id"], (ctx, before))

    def note_created(self, ctx: Context, before: Record, span: Record) -> None:
        """Note an activity span created on the run ``before`` (for the batch's judge)."""
        if self._judge is not None:
            self._runs.setdefault(before["id"], (ctx, before))
            self._created.setdefault(before["id"], []).append(span)

    def note_risk(self, run_id: str, schema_version: Record | None) -> None:
        """Note that a span write of a type declaring a data risk moved the run ``run_id``."""
        self._scored[run_id] = schema_version

    def known_unnamed(self, span_ids: Collection[str]) -> None:
        """Know that no stored span of another run names any of ``span_ids`` as its parent."""
        self._unnamed.update(span_ids)

    def unnamed(self, span_id: str) -> bool:
        """Whether ``span_id`` is known to be named as a parent by no span of another run."""
        return span_id in self._unnamed

    def names_parent(self, parent_id: str) -> None:
        """A span written in the transaction names ``parent_id``: it is known unnamed no more."""
        self._unnamed.discard(parent_id)

    def keep(self, *, keep_rulesets: bool = False) -> None:
        """Keep the noted runs' rollups, in the transaction that moved them, and forget them.

        The rulesets are forgotten too, unless ``keep_rulesets`` (the operation about to run
        cannot change one: :func:`keeps_settings`).
        """
        runs, scored, rulesets, created = self._runs, self._scored, self._rulesets, self._created
        self._runs, self._scored, self._created = {}, {}, {}
        if not keep_rulesets:
            self._rulesets = None
        for run_id, (ctx, before) in runs.items():
            if self.defers:
                self._keep_rollups(ctx, before, scored, rulesets)
            if self._judge is not None and run_id in created:
                self._judge(ctx, before, created[run_id])

    @staticmethod
    def _keep_rollups(
        ctx: Context, before: Record, scored: dict[str, Record | None], rulesets: Rulesets | None
    ) -> None:
        run_id = before["id"]
        current = ctx.tables.agent_instances.get(run_id)
        assert current is not None, "a run is never deleted in the transaction moving it"
        after = keep_total_cost(ctx, before, current)
        if run_id in scored:
            level = run_risk_level(ctx, after, scored[run_id], rulesets or Rulesets(ctx))
            if level != after.get("risk_level") or "risk_level" not in after:
                after = {**after, "risk_level": level}
        if after != current:
            ctx.tables.agent_instances.put(after)


def batch_of(ctx: Context) -> WriteBatch | None:
    """The batch the write ``ctx`` runs in, or None (a write made outside a Governance)."""
    return ctx.write_batch if isinstance(ctx.write_batch, WriteBatch) else None


def deferring_batch(ctx: Context) -> WriteBatch | None:
    """The batch the write ``ctx`` runs in when it keeps rollups to its end, else None."""
    batch = batch_of(ctx)
    return batch if batch is not None and batch.defers else None


def span_rollups(ctx: Context, before: Record) -> Callable[[Record], Record]:
    """What a span write of the run ``before`` does with the run's rollups.

    Kept now (:func:`~governance_core.domain.insights.keep_total_cost`), or noted in the
    write's batch.
    """
    batch = deferring_batch(ctx)
    if batch is None:
        return lambda after: keep_total_cost(ctx, before, after)

    def noted(after: Record) -> Record:
        batch.note(ctx, before)
        return after

    return noted


def write_rulesets(ctx: Context) -> Rulesets:
    """The rulesets a span write looks agents up in: its batch's, else its own."""
    batch = deferring_batch(ctx)
    return Rulesets(ctx) if batch is None else batch.rulesets(ctx)
