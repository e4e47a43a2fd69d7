"""Recording decoded OpenTelemetry spans through the core's operations.

:func:`ingest` is what both the OTLP endpoint and the in-process exporter call. It writes
only through :meth:`Governance.call <governance_core.service.Governance.call>` (agents,
environments, ``agent_instances/register``, ``agent_spans/create``, ``record_quality``,
``agent_instances/finish``), with ids and idempotency keys derived from the OTel ids, and
keeps on each span it stored the digest of its create (``create_digest``, which no view shows).

An export is written in steps (:class:`ExportSteps`), each its own store transaction, so that
a large export never holds the store's writer for longer than one step: other writers take
turns between steps. A step ends after a number of spans or a time, whichever comes first; a
trace may span several steps (each span write updates its run's aggregates in its own
transaction, so where a trace is cut changes nothing that is stored). Every span's id is
derived from the OTel ids, and the span is stored with the digest of its create, so an
export sent again (after it was cut short, or days later) stores only what its earlier
attempts did not: the spans they stored are read by id (a step's worth in one query) and
their digests compared with what is sent, so a span sent again with other content is still
refused, and nothing is stored twice. A digest is all that is kept: no response of a span's
create is ever answered again, so none is stored, and no idempotency record either (its
random id cost each span a page of the records' index in every commit). Spans stored before
the digest was kept on them have it in an idempotency record, read for them alone.

Before each step's transaction opens, the payloads of the spans it will write are checked
against the schema version their run has, or will have once registered (the one of the
agent version the trace names), and their summaries rendered
(:meth:`_Recorder.prepare_ahead`): the step's transaction holds the store's writer for the
writes only. A span whose run turns out to have another schema version is checked in it.
"""

from __future__ import annotations

import contextlib
import itertools
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Final

import attrs

from governance_core.domain.batch import batch_of
from governance_core.domain.runs import (
    SPAN_TYPES,
    keep_run_parties,
    run_schema_version,
    runs_by_external_id,
    set_quality,
)
from governance_core.domain.spans import read_unnamed
from governance_core.errors import GovernanceError, TemporarilyUnavailable
from governance_core.fields import Fields
from governance_core.idempotency import (
    fingerprint,
    key_already_used,
    record_id,
    same_request,
)
from governance_core.operations.agent_spans import prepare_create_for
from governance_core.operations.agent_versions import find_agent_version
from governance_core.otel.idle import end_idle_runs
from governance_core.otel.mapping import (
    MappingSettings,
    RunTarget,
    TraceGroup,
    agent_version_member,
    derived_span_id,
    group_spans,
    is_root,
    quality_records,
    run_parties,
    run_status,
    span_members,
    timestamp,
)
from governance_core.otel.model import Rejection, Span
from governance_core.repository import Filter, Record, RecordTable, SortKey, tenant_filter
from governance_core.service import Governance

if TYPE_CHECKING:
    from governance_core.context import Principal

__all__ = [
    "EXPORT_TURN",
    "IDLE_SWEEP_EVERY",
    "STEP_PAUSE_SECONDS",
    "STEP_SECONDS",
    "STEP_SPANS",
    "ExportCutShort",
    "ExportSteps",
    "IngestResult",
    "ingest",
]

IDLE_SWEEP_EVERY: Final = timedelta(minutes=1)
"""How often at most an account's exports end its idle trace runs (:func:`end_idle_runs`)."""
STEP_SPANS: Final = 200
"""The most spans one step of an export writes in its transaction."""
EXPORT_TURN: Final = "otlp-export"
"""The turn every export step holds (:meth:`Governance.turn`): on PostgreSQL two steps at once
cancel each other (both look up and insert ids in the same index pages), so they take turns,
as SQLite's writers do anyway."""
STEP_SECONDS: Final = 0.05
"""How long one step of an export may hold the store's writer before it commits."""
STEP_PAUSE_SECONDS: Final = 0.002
"""How long an export waits after each step, for a writer waiting for the store to get it."""
_CUT_RETRY_AFTER_MS: Final = 1000
_CREATE: Final = "agent_spans/create"
_SPAN_DIGESTS: Final = "otel/span"
"""The scope of the idempotency records that held the digests of the spans the ingest stored
(by derived span id) before each span held its own: its own scope, so that no idempotency key
sent to ``agent_spans/create`` finds one of them. Read for spans stored without a digest."""
# Spans read ahead in one query.
_LOOKAHEAD: Final = STEP_SPANS

_ENVIRONMENT_PURPOSES: Final = {
    "prod": "production", "production": "production", "live": "production",
    "staging": "staging", "stage": "staging", "preprod": "staging",
    "dev": "development", "development": "development", "local": "development",
    "test": "testing", "testing": "testing", "qa": "testing", "ci": "testing",
}


def _positive(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not value > 0:
        raise ValueError(f"{attribute.name} must be more than 0, not {value!r}")


def _not_negative(instance: object, attribute: attrs.Attribute[Any], value: float) -> None:
    if isinstance(value, bool) or not value >= 0:
        raise ValueError(f"{attribute.name} must be 0 or more, not {value!r}")


@attrs.frozen
class ExportSteps:
    """How an export is cut into steps, each its own transaction.

    A step commits once it has written ``max_spans`` spans or held the store's writer for
    ``max_seconds`` (read from ``timer``, a monotonic clock in seconds), whichever comes
    first; the check follows each span, so a step runs over ``max_seconds`` by at most one
    span's write. After each step but the last the export sleeps ``pause_seconds`` (through
    ``sleep``): a writer woken when the step let the store go takes it before the export's
    next step can, instead of finding it taken again.
    """

    max_spans: int = attrs.field(default=STEP_SPANS, validator=_positive)
    max_seconds: float = attrs.field(default=STEP_SECONDS, validator=_positive)
    pause_seconds: float = attrs.field(default=STEP_PAUSE_SECONDS, validator=_not_negative)
    timer: Callable[[], float] = attrs.field(default=time.monotonic, eq=False, repr=False)
    sleep: Callable[[float], None] = attrs.field(default=time.sleep, eq=False, repr=False)


@attrs.frozen
class IngestResult:
    """What an export stored: how many spans, in which runs, and the spans refused."""

    accepted: int
    rejected: tuple[Rejection, ...]
    run_ids: tuple[str, ...]


class ExportCutShort(TemporarilyUnavailable):
    """An export stopped after some of its steps were stored: send all of it again.

    ``stored`` of its ``total`` spans are stored (a span sent again is found stored, not
    stored twice); of the rest, those an earlier attempt stored are too, the others are not.
    Raised when the store turned busy after the first step, or when the export's deadline
    passed between two steps.
    """

    def __init__(
        self, message: str, *, stored: int, total: int, retry_after_ms: int
    ) -> None:
        super().__init__(message, retry_after_ms=retry_after_ms)
        self.stored = stored
        self.total = total


def ingest(
    governance: Governance,
    principal: Principal,
    spans: Iterable[Span],
    settings: MappingSettings | None = None,
    *,
    steps: ExportSteps | None = None,
    deadline: float | None = None,
) -> IngestResult:
    """Record ``spans`` (one export) as runs of ``principal``'s account, step by step.

    A span whose data the core refuses is reported in ``rejected`` and the rest are stored.
    The export is written in ``steps`` (default :class:`ExportSteps`), each committed on its
    own. When the store turns busy the step under way is rolled back: before any step was
    committed the error is raised as it came (nothing is stored), after that as
    :class:`ExportCutShort` naming how many spans are stored. When ``deadline`` (an instant
    of ``steps.timer``) has passed at the end of a step, spans remain and this call has
    stored at least one span no earlier call had, the export stops there with
    :class:`ExportCutShort` too; steps that stored nothing new move the deadline on by
    their length. Either way the sender sends the whole export again: what was stored is
    found stored, the rest stored. Any other error (not one span's refusal) rolls back the
    step under way and is raised as it came; the steps before it stay stored.

    Then, when ``settings.root_wait`` is set, the account's trace runs idle that long are
    ended (:func:`governance_core.otel.idle.end_idle_runs`), unless an export did so less than
    :data:`IDLE_SWEEP_EVERY` ago (or the root wait, when shorter).
    """
    settings = settings or MappingSettings()
    steps = steps or ExportSteps()
    groups, rejected = group_spans(spans)
    total = sum(len(group.spans) for group in groups)
    recorder = _Recorder(governance, principal, settings, groups)
    work = itertools.chain.from_iterable(recorder.record(group) for group in groups)
    finished = False
    while not finished:
        # Only once this request has stored something new: an export sent again finds
        # what its earlier attempts stored, and each attempt must get further.
        if (
            deadline is not None and recorder.new and recorder.done < total
            and steps.timer() >= deadline
        ):
            raise ExportCutShort(
                f"the export was stopped at its deadline: {_progress(recorder, total)}",
                stored=recorder.accepted, total=total, retry_after_ms=_CUT_RETRY_AFTER_MS,
            )
        before = (recorder.accepted, recorder.new, recorder.done)
        began = steps.timer()
        recorder.prepare_ahead(steps.max_spans)
        try:
            with governance.turn(EXPORT_TURN), governance.transaction():
                # The step's time starts once it holds the store, not while it waits for it.
                started, first = steps.timer(), recorder.done
                for _ in work:
                    if (
                        recorder.done - first >= steps.max_spans
                        or steps.timer() - started >= steps.max_seconds
                    ):
                        break
                else:
                    finished = True
        except TemporarilyUnavailable as busy:
            if not recorder.step:
                raise
            # The step under way was rolled back: only the committed steps count.
            recorder.accepted, recorder.new, recorder.done = before
            raise ExportCutShort(
                f"{busy.message}: {_progress(recorder, total)}",
                stored=recorder.accepted, total=total, retry_after_ms=busy.retry_after_ms,
            ) from busy
        recorder.step += 1
        if deadline is not None and recorder.new == before[1]:
            # A step that stored nothing new (it found what an earlier attempt stored) does
            # not count: each attempt gets as far as the deadline lets new writes go.
            deadline += steps.timer() - began
        if not finished and steps.pause_seconds:
            steps.sleep(steps.pause_seconds)
    if settings.root_wait is not None and _sweep_due(
        governance, principal.account_id, settings.root_wait
    ):
        # After the export's own steps: ending another run never undoes the export, and a
        # busy store leaves it to the next export (the export itself is stored).
        with contextlib.suppress(TemporarilyUnavailable):
            end_idle_runs(
                governance, idle_after=settings.root_wait, account_id=principal.account_id
            )
    return IngestResult(
        accepted=recorder.accepted,
        rejected=(*rejected, *recorder.rejected),
        run_ids=tuple(recorder.run_ids),
    )


def _sweep_due(governance: Governance, account_id: str, root_wait: timedelta) -> bool:
    """Whether this export ends the account's idle trace runs.

    At most once a :data:`IDLE_SWEEP_EVERY` (or ``root_wait``, when shorter), by the
    Governance's clock. A sweep reads every pending or active run of the account last active
    before the wait, and each one's first span: once per export, an account's unfinished runs
    would cost every export as much. A run that turns idle meanwhile is ended by the next
    sweep, that much late.
    """
    now = governance.clock()
    swept = governance.caches.idle_sweeps
    last = swept.get(account_id)
    # A clock set back since the last sweep does not hold the next one back that much longer.
    if last is not None and last <= now < last + min(root_wait, IDLE_SWEEP_EVERY):
        return False
    swept[account_id] = now
    return True


def _progress(recorder: _Recorder, total: int) -> str:
    """What a cut export left stored, for its sender."""
    return (
        f"{recorder.accepted} of its {total} spans are stored ({recorder.new} of them by this"
        f" request) and {total - recorder.done} were not reached; send it again to store the"
        " rest (spans already stored are replayed, not stored twice)"
    )


def _key(*parts: str) -> str:
    return "otel-" + "-".join(parts)


@attrs.frozen
class _Planned:
    """A span's create members (ids left out) and checks, made before its step's transaction.

    ``declared`` is the span types they were mapped with: the create uses them only if its
    run declares the same.
    """

    members: dict[str, Any]
    declared: frozenset[str]
    prepared: object


class _Recorder:
    """One export's writes; lookups of agents and environments are shared across its runs.

    ``step`` counts the steps committed so far (the caller moves it), ``done`` the spans
    written or refused, ``new`` the spans written that no earlier export had stored.
    """

    def __init__(
        self,
        governance: Governance,
        principal: Principal,
        settings: MappingSettings,
        groups: Iterable[TraceGroup] = (),
    ) -> None:
        self.governance = governance
        self.principal = principal
        self.settings = settings
        # Version and environment lookups read as the account: an ingestion token may not
        # list them, and they are read here for its own agent only, never shown to it.
        self.reader = governance.as_account(principal.account_id).principal
        self.accepted = 0
        self.rejected: list[Rejection] = []
        self.run_ids: list[str] = []
        self.step = 0
        self.done = 0
        self.new = 0
        self._agents: dict[str, str] = {}
        # The stored runs of traces about to be recorded, by agent id and trace id (None: not
        # registered), read for many traces at once in the step under way (``_runs_step``).
        self._runs: dict[tuple[str, str], Record | None] = {}
        self._runs_step = -1
        self._environments: dict[str, str] = {}
        self._declared: dict[str, frozenset[str]] = {}
        # Every span of the export in the order it is written, and how far they are planned.
        self._groups = list(groups)
        self._group_index = {id(group): index for index, group in enumerate(self._groups)}
        self._spans = [(group, span) for group in self._groups for span in group.spans]
        self._ahead = 0
        self._planned: dict[tuple[str, str], _Planned] = {}
        # By trace id: the schema version id its run has or is expected to have; by agent and
        # version: the version's schema version id (each once known).
        self._expected: dict[str, str] = {}
        self._version_schemas: dict[tuple[str, str], str] = {}
        self._versions_known: set[tuple[str, str]] = set()

    def call(
        self, operation: str, params: dict[str, Any], prepared: object = None
    ) -> dict[str, Any]:
        return self.governance.call(
            operation, params, principal=self.principal, prepared=prepared
        )

    def read(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.governance.call(operation, params, principal=self.reader)

    def record(self, group: TraceGroup) -> Iterator[None]:
        """Record one trace's run and spans, pausing before each span: a step may end there."""
        try:
            with self.governance.transaction():
                run, registered = self.run_for(group)
        except TemporarilyUnavailable:
            raise
        except GovernanceError as error:
            # What the failed block created was rolled back with it: forget it.
            self._agents.clear()
            self._runs.clear()
            self._environments.clear()
            self._versions_known.clear()
            self.rejected += [
                Rejection(span.trace_id, span.span_id, f"the run was refused: {error.message}")
                for span in group.spans
            ]
            self.done += len(group.spans)
            return
        self.run_ids.append(run["id"])
        if run.get("agent_schema_version_id"):
            self._expected[group.trace_id] = run["agent_schema_version_id"]
        read_in = self.step
        # A run registered by this call: until this step commits no one else knows its id.
        registered_in = read_in if registered else -1
        declared = self.declared_types(run)
        ids: dict[str, str] = {}
        stored: dict[str, str] = {}
        read_in_step = -1
        for index, span in enumerate(group.spans):
            yield
            if index % _LOOKAHEAD == 0 or read_in_step != self.step:
                # Again in each step: what is read ahead lasts for its transaction only.
                ahead = group.spans[index:index - index % _LOOKAHEAD + _LOOKAHEAD]
                stored = self.stored_fingerprints(
                    run["id"], ahead, ids, new_run=registered_in == self.step
                )
                read_in_step = self.step
            self.record_span(run["id"], span, declared, ids, stored)
            self.done += 1
        root = next((span for span in group.spans if is_root(span)), None)
        if root is None:
            return
        if self.step != read_in:
            # Read again: another writer may have ended the run between two steps.
            run = self.read("agent_instances/show", {"agent_instance_id": run["id"]})["details"]
        if run["status"] in ("pending", "active"):
            # No idempotency key: the run is read in this step's transaction, so an export
            # sent again finds it finished and sends no finish (a key only stored a response
            # no one asks for).
            self.call("agent_instances/finish", {
                "agent_instance_id": run["id"], "status": run_status(root),
                "timestamp": timestamp(root.end_time_unix_nano),
            })

    def prepare_ahead(self, count: int) -> None:
        """Map and check the next ``count`` spans to write, outside any transaction.

        Each span is checked against the schema version its run has, or (not registered
        yet) the one its agent version has; a trace whose schema version cannot be told
        without writing (a new agent or version) is checked in its step.
        """
        if self.principal.scope not in self.governance.registry[_CREATE].scopes:
            return
        start, end = max(self._ahead, self.done), min(self.done + count, len(self._spans))
        ctx = self.governance.context(self.principal)
        # Looked up once a step for a trace whose schema version is not known yet: a later
        # step may find it (the agent and its version made by an earlier step).
        expected: dict[str, Record | None] = {}
        window = self._spans[start:end]
        runs = self.find_runs(
            {id(group): group for group, _ in window if group.trace_id not in self._expected
             }.values(),
            find_agents=True,
        )
        for group, span in window:
            if group.trace_id not in expected:
                expected[group.trace_id] = self.expected_schema_version(group, runs)
            schema_version = expected[group.trace_id]
            if schema_version is None:
                continue
            declared = frozenset(schema_version.get("span_type_schemas") or ())
            members = span_members(
                span, span_id="", parent_id=None, settings=self.settings, declared=declared,
            )
            prepared = prepare_create_for(ctx, Fields(members), schema_version)
            if prepared is not None:
                self._planned[(span.trace_id, span.span_id)] = _Planned(
                    members, declared, prepared
                )
        self._ahead = max(self._ahead, end)

    def expected_schema_version(
        self, group: TraceGroup, runs: dict[tuple[str, str], Record | None]
    ) -> Record | None:
        """The schema version the trace's run has, or will have when registered; else None.

        ``runs`` holds what :meth:`find_runs` read for the trace.
        """
        schema_version_id = self._expected.get(group.trace_id) or self._expected_id(group, runs)
        if schema_version_id is None:
            return None
        self._expected[group.trace_id] = schema_version_id
        return self.governance.caches.schema_version(
            self.governance.tables.agent_schema_versions, schema_version_id
        )

    def _expected_id(
        self, group: TraceGroup, runs: dict[tuple[str, str], Record | None]
    ) -> str | None:
        target = group.target
        agent_id = self.known_agent_id(target, find=False)
        if agent_id is None:
            return None
        found = runs.get((agent_id, group.trace_id))
        if found is not None:
            return str(found["agent_schema_version_id"])
        key = (agent_id, target.version)
        if key not in self._version_schemas:
            version = self._find_version(agent_id, target.version)
            if version is None:
                return None
            self._version_schemas[key] = str(version["agent_schema_version_id"])
        return self._version_schemas[key]

    def declared_types(self, run: dict[str, Any]) -> frozenset[str]:
        """The span types the run's schema version declares.

        A schema version never changes: it is read once per process (the run is the
        account's, and so is the schema version it names).
        """
        schema_version_id = run.get("agent_schema_version_id")
        if not schema_version_id:
            return frozenset()
        if schema_version_id not in self._declared:
            version = run_schema_version(self.governance.context(self.reader), run)
            self._declared[schema_version_id] = frozenset((version or {}).get(SPAN_TYPES) or ())
        return self._declared[schema_version_id]

    def span_id(self, run_id: str, span_id: str, trace_id: str, ids: dict[str, str]) -> str:
        """The derived id of OTel span ``span_id`` (computed once per export: it is costly)."""
        derived = ids.get(span_id)
        if derived is None:
            derived = ids[span_id] = derived_span_id(run_id, trace_id, span_id)
        return derived

    def stored_fingerprints(
        self, run_id: str, spans: Iterable[Span], ids: dict[str, str], *, new_run: bool = False
    ) -> dict[str, str]:
        """The fingerprints of the creates of ``spans`` an earlier export stored, by span id.

        One query for many spans: an export sent again after it was cut short finds what
        its earlier attempts stored without a call per span. Empty when the caller may not
        create spans (each call then refuses its span, as it should). Each stored span holds
        its create's digest; for one stored without it, the idempotency record that held it
        is read (under the ingest's scope; or, stored before that, by a create with the
        idempotency key the ingest derived).

        For a ``new_run`` (registered in the step under way) nothing is read: until the step
        commits no one else can know the run's id, so no record is keyed by the span ids
        derived from it (no id is taken, no span of another run names one as its parent, no
        digest is kept). The batch and the store are told so instead of asked.
        """
        if self.principal.scope not in self.governance.registry[_CREATE].scopes:
            return {}
        span_ids = [self.span_id(run_id, span.span_id, span.trace_id, ids) for span in spans]
        ctx = self.governance.context(self.principal)
        tables = ctx.tables
        if new_run:
            batch = batch_of(ctx)
            if batch is not None:
                batch.known_unnamed(span_ids)
            tables.ids.know_absent(span_ids)
            return {}
        # Each create's look-ups (whether its id is taken or named as a parent by another
        # run's span) are answered from what these read for the step, and so are the gets of
        # the spans below: one query a table.
        read_unnamed(ctx, span_ids, run_id)
        tables.ids.read_ahead(span_ids)
        tables.agent_spans.read_ahead(span_ids)
        stored: dict[str, str] = {}
        without: list[str] = []
        for span_id in span_ids:
            record = tables.agent_spans.get(span_id)
            if record is None:
                continue
            digest = record.get("create_digest")
            if digest is not None:
                stored[span_id] = digest
            else:
                without.append(span_id)
        if without:
            stored.update(self._digests_kept_apart(tables.idempotency_keys, without))
        return stored

    def _digests_kept_apart(self, keys: RecordTable, span_ids: list[str]) -> dict[str, str]:
        """The create digests of stored spans that do not hold one, from idempotency records."""
        account_id = self.principal.account_id
        by_record: dict[str, str] = {}
        for span_id in span_ids:
            by_record[record_id(account_id, _SPAN_DIGESTS, span_id)] = span_id
            by_record[record_id(account_id, _CREATE, _key(span_id))] = span_id
        found = keys.query([Filter("id", "in", list(by_record))])
        return {by_record[record["id"]]: record["fingerprint"] for record in found}

    def record_span(
        self,
        run_id: str,
        span: Span,
        declared: frozenset[str],
        ids: dict[str, str],
        stored: dict[str, str],
    ) -> None:
        """Record one span and its evaluations, or find it stored as it is sent.

        ``ids`` holds the trace's derived span ids, ``stored`` the fingerprints of the creates
        an earlier export stored (:meth:`stored_fingerprints`).
        """
        span_id = self.span_id(run_id, span.span_id, span.trace_id, ids)
        parent_id = None if is_root(span) else self.span_id(
            run_id, span.parent_span_id, span.trace_id, ids
        )
        planned = self._planned.pop((span.trace_id, span.span_id), None)
        prepared = None
        if planned is not None and planned.declared == declared:
            members = {**planned.members, "id": span_id, "parent_span_id": parent_id}
            prepared = planned.prepared
        else:
            members = span_members(
                span, span_id=span_id, parent_id=parent_id, settings=self.settings,
                declared=declared,
            )
        create = {**members, "agent_instance_id": run_id}
        digest = fingerprint(_CREATE, create)
        before = stored.get(span_id)
        if before is not None:
            # Stored by an earlier export, with its evaluations (in the same transaction):
            # accepted again if sent as it was, else refused as a create sent again with its
            # key and other content is.
            if same_request(before, digest, _CREATE, create):
                self.accepted += 1
            else:
                refused = key_already_used(_key(span_id), _CREATE)
                self.rejected.append(Rejection(span.trace_id, span.span_id, _describe(refused)))
            return
        try:
            # A span, its digest and its evaluations stand or fall together: the inner block
            # is a savepoint of the step's transaction.
            with self.governance.transaction():
                self.call(_CREATE, create, prepared)
                self.keep_digest(span_id, digest)
                self.record_evaluations(run_id, quality_records(span, span_id))
                self.keep_parties(run_id, span)
        except TemporarilyUnavailable:
            raise
        except GovernanceError as error:
            self.rejected.append(Rejection(span.trace_id, span.span_id, _describe(error)))
            return
        self.accepted += 1
        self.new += 1

    def keep_digest(self, span_id: str, digest: str) -> None:
        """Keep on the span just created the digest of its create, in the span's savepoint.

        The create left the span in the transaction's memory: this rewrites it there, and
        the span is written once, at the step's end.
        """
        spans = self.governance.context(self.principal).tables.agent_spans
        created = spans.get(span_id)
        assert created is not None, "the span's create has just stored it"
        spans.put({**created, "create_digest": digest})

    def record_evaluations(
        self, run_id: str, records: list[tuple[str, dict[str, Any]]]
    ) -> None:
        """Record a span's evaluations as quality payloads of its run, in the span's savepoint.

        They stand or fall with their span's create, whose idempotency record answers a
        re-sent export: no response of theirs is ever replayed, so none is built or kept.
        """
        if not records:
            return
        ctx = self.governance.context(self.principal)
        instance = ctx.tables.agent_instances.get(run_id)
        assert instance is not None, "the span's create has just read its run"
        for name, payload in records:
            instance = set_quality(ctx, instance, name, payload)

    def keep_parties(self, run_id: str, span: Span) -> None:
        """Give the run the session and user the span names, where it has none yet.

        In the span's savepoint: the run was read and rewritten by the span's create in this
        transaction, so this reads it from the transaction's memory, and a change rides on
        the run's one write at the step's end.
        """
        session_id, user_id = run_parties(span)
        if session_id is None and user_id is None:
            return
        ctx = self.governance.context(self.principal)
        run = ctx.tables.agent_instances.get(run_id)
        assert run is not None, "the span's create has just read its run"
        keep_run_parties(ctx, run, session_id, user_id)

    # -- the run a trace is recorded in ----------------------------------------------------
    def run_for(self, group: TraceGroup) -> tuple[dict[str, Any], bool]:
        """The trace's run for the group's agent, registered on first sight; whether it was.

        The runs of the traces that follow in the step are read with it, in one read: each
        is taken once, by its own trace's call.
        """
        agent_id = self.agent_id(group.target)
        key = (agent_id, group.trace_id)
        if self._runs_step != self.step:
            # What was read lasts for the step's transaction only.
            self._runs.clear()
            self._runs_step = self.step
        if key not in self._runs:
            self._runs.update(self.find_runs(self._groups_ahead(group), find_agents=False))
        # Read as stored (the run's view would price and score it for nothing).
        found = self._runs.pop(key)
        if found is not None:
            return found, False
        register: dict[str, Any] = {
            "external_identifier": group.trace_id,
            **agent_version_member(group.target, not self.version_known(agent_id, group)),
        }
        if not self.principal.is_ingestion:
            register["agent_id"] = agent_id
            if group.target.environment is not None:
                register["environment_id"] = self.environment_id(group.target.environment)
        details: dict[str, Any] = self.call("agent_instances/register", register)["details"]
        return details, True

    def find_runs(
        self, groups: Iterable[TraceGroup], *, find_agents: bool
    ) -> dict[tuple[str, str], Record | None]:
        """The stored runs of the traces of ``groups``, by agent id and trace id (None: none).

        One read an agent. A group whose agent is not known is left out: not made yet, or,
        unless ``find_agents``, not looked up yet.
        """
        by_agent: dict[str, set[str]] = {}
        for group in groups:
            agent_id = self.known_agent_id(group.target, find=find_agents)
            if agent_id is not None:
                by_agent.setdefault(agent_id, set()).add(group.trace_id)
        ctx = self.governance.context(self.principal)
        found: dict[tuple[str, str], Record | None] = {}
        for agent_id, trace_ids in by_agent.items():
            runs = runs_by_external_id(ctx, agent_id, trace_ids)
            found.update({(agent_id, trace_id): runs.get(trace_id) for trace_id in trace_ids})
        return found

    def _groups_ahead(self, group: TraceGroup) -> list[TraceGroup]:
        """``group`` and the groups after it, up to a step's worth of spans."""
        ahead: list[TraceGroup] = []
        spans = 0
        for later in itertools.islice(self._groups, self._group_index[id(group)], None):
            if spans >= _LOOKAHEAD:
                break
            ahead.append(later)
            spans += len(later.spans)
        return ahead

    def known_agent_id(self, target: RunTarget, *, find: bool) -> str | None:
        """The target's agent id when known (or, with ``find``, found stored); else None."""
        if self.principal.is_ingestion:
            return self.principal.agent_id
        if target.agent not in self._agents and find:
            found = self._find_agent(target.agent)
            if found is not None:
                self._agents[target.agent] = found
        return self._agents.get(target.agent)

    def agent_id(self, target: RunTarget) -> str:
        """The token's agent, or the agent named by the resource (created on first sight)."""
        if self.principal.is_ingestion:
            assert self.principal.agent_id is not None
            return self.principal.agent_id
        if target.agent not in self._agents:
            found = self._find_agent(target.agent)
            if found is not None:
                self._agents[target.agent] = found
            else:
                made = self.call("agents/create", {
                    "name": target.agent, "external_identifier": target.agent,
                    "description": "Recorded from OpenTelemetry traces.",
                })
                self._agents[target.agent] = made["details"]["id"]
        return self._agents[target.agent]

    def _first(self, kind: str, field: str, value: str) -> Record | None:
        """The account's first ``kind`` resource (by id) whose ``field`` is ``value``.

        One indexed read, where the list operation would also count and shape its page.
        """
        ctx = self.governance.context(self.reader)
        found = ctx.tables.of_kind(kind).query(
            [tenant_filter(ctx.account_id), Filter(field, "eq", value)],
            sort=[SortKey("id")], limit=1,
        )
        return found[0] if found else None

    def _find_agent(self, name: str) -> str | None:
        """The agent whose external identifier is ``name``, if there is one."""
        found = self._first("agent", "external_identifier", name)
        return None if found is None else str(found["id"])

    def version_known(self, agent_id: str, group: TraceGroup) -> bool:
        """Whether the agent already has the version (then its own schemas are kept).

        Once found it is known for the rest of the export (a version is never deleted).
        """
        key = (agent_id, group.target.version)
        if key not in self._versions_known:
            if self._find_version(agent_id, group.target.version) is None:
                return False
            self._versions_known.add(key)
        return True

    def _find_version(self, agent_id: str, external_identifier: str) -> Record | None:
        """The agent's version ``external_identifier``, if there is one."""
        return find_agent_version(
            self.governance.context(self.reader), agent_id, external_identifier
        )

    def environment_id(self, name: str) -> str:
        """The environment whose external identifier (else name) is ``name``; made if none."""
        if name not in self._environments:
            self._environments[name] = self._find_environment(name) or self.call(
                "environments/create", {
                    "name": name, "external_identifier": name,
                    "purpose": _ENVIRONMENT_PURPOSES.get(name.lower(), "other"),
                },
            )["details"]["id"]
        return self._environments[name]

    def _find_environment(self, name: str) -> str | None:
        """The environment whose external identifier is ``name``, else whose name is."""
        found = self._first("environment", "external_identifier", name) or self._first(
            "environment", "name", name
        )
        return None if found is None else str(found["id"])


def _describe(error: GovernanceError) -> str:
    payload = error.to_payload()
    fields = payload.get("errors")
    if isinstance(fields, dict) and fields:
        named = "; ".join(
            f"{field}: {detail.get('message', detail.get('code'))}"
            for field, detail in fields.items()
            if isinstance(detail, dict)
        )
        return f"{error.code} ({named})"
    return f"{error.code}: {error.message}"
