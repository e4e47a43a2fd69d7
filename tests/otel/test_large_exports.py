"""Large exports are written in steps: other writers take turns, and a cut export re-sent is whole.

The exports are built as OTLP protobuf and decoded as the endpoint decodes them. Stores are
wrapped to record what each outermost transaction wrote, or to act between two of them; the
step's clock is injected, so nothing here depends on how fast the machine is.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs
import falcon
import falcon.testing
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace.export import SpanExportResult

from governance_core.clock import FixedClock
from governance_core.context import Config, Principal
from governance_core.encryption import PlaintextForTests
from governance_core.errors import GovernanceError, TemporarilyUnavailable
from governance_core.idempotency import record_id
from governance_core.ids import SeededIds
from governance_core.otel.exporter import GovernanceSpanExporter
from governance_core.otel.ingest import (
    STEP_SPANS,
    ExportCutShort,
    ExportSteps,
    IngestResult,
    ingest,
)
from governance_core.otel.model import Span
from governance_core.otel.otlp_codec import decode_protobuf
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore
from governance_core.storage.sqlite import SQLiteStore
from governance_http.body import BodyLimits
from governance_http.otlp import add_otlp_routes
from tests.otel.exports import export
from tests.otel.traces import comparable_run, memory_batches, record_agent_trace, runs, tree


def spans_of(traces: int, per_trace: int) -> list[Span]:
    return decode_protobuf(export(traces, per_trace))


class CountingStore(MemoryStore):
    """Records the spans each outermost transaction wrote, and can turn busy at the n-th."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0
        self.writing = 0
        self.committed: list[int] = []
        self.busy_at: int | None = None
        self.begun = 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self.depth == 0:
            self.begun += 1
            if self.begun == self.busy_at:
                raise TemporarilyUnavailable("the database is busy", retry_after_ms=1500)
            self.writing = 0
        self.depth += 1
        try:
            with super().transaction():
                yield
        finally:
            self.depth -= 1
        if self.depth == 0 and self.writing:
            self.committed.append(self.writing)

    def write_prepared(self, table: str, prepared: Any) -> None:
        if table == "agent_spans":
            # New activity spans only: evaluations are spans too, and runs rewrite spans.
            self.writing += sum(
                record_id not in self._tables[table] and json.loads(text)["purpose"] == "activity"
                for record_id, text, *_ in prepared
            )
        super().write_prepared(table, prepared)


class StoppedClock:
    """A monotonic clock that moves only by ``tick`` each time it is read."""

    def __init__(self, tick: float = 0.0) -> None:
        self.now = 100.0
        self.tick = tick

    def __call__(self) -> float:
        self.now += self.tick
        return self.now


@pytest.fixture
def store() -> CountingStore:
    return CountingStore()


@pytest.fixture
def gov(store: CountingStore) -> Iterator[Governance]:
    governance = Governance(
        store, clock=FixedClock(), ids=SeededIds(7), config=Config(cipher=PlaintextForTests()),
    )
    yield governance
    governance.close()


@pytest.fixture
def boot(gov: Governance) -> Bootstrap:
    return gov.bootstrap()


@pytest.fixture
def principal(gov: Governance, boot: Bootstrap) -> Principal:
    return gov.as_account(boot.account_id).principal


def stored_spans(gov: Governance, principal: Principal) -> list[dict[str, Any]]:
    return [span for span in gov.store.query("agent_spans")
            if span["account_id"] == principal.account_id and span["purpose"] == "activity"]


def test_a_large_export_is_written_in_steps_of_at_most_step_spans(
    gov: Governance, principal: Principal, store: CountingStore,
) -> None:
    # One trace longer than two steps: a trace is split across steps too.
    total = 2 * STEP_SPANS + 50
    store.committed.clear()
    result = ingest(gov, principal, spans_of(1, total))
    assert (result.accepted, result.rejected) == (total, ())
    assert sum(store.committed) == total
    assert len(store.committed) >= 3
    assert max(store.committed) <= STEP_SPANS
    [run] = runs(gov.as_account(principal.account_id))
    assert run["span_counts"]["total"] == total and run["status"] == "complete"


def test_a_step_ends_after_its_time_whatever_its_span_count(
    gov: Governance, principal: Principal, store: CountingStore,
) -> None:
    # Every read of the clock moves it 10 ms: a 50 ms step holds 5 units of work.
    steps = ExportSteps(max_spans=1000, max_seconds=0.05, pause_seconds=0,
                        timer=StoppedClock(tick=0.01))
    store.committed.clear()
    assert ingest(gov, principal, spans_of(2, 30), steps=steps).accepted == 60
    assert sum(store.committed) == 60
    assert max(store.committed) <= 5


def test_an_export_split_into_many_steps_stores_what_one_step_stores() -> None:
    """Each span write moves its run's aggregates in its own transaction: cuts change nothing."""
    # The SDK's trace too: sensitive values, a failed tool call, cost and quality.
    everything = [span for batch in memory_batches(record_agent_trace) for span in batch]
    recorded = []
    for steps in (ExportSteps(max_spans=1, pause_seconds=0), ExportSteps(max_spans=10_000)):
        gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(11),
                         config=Config(cipher=PlaintextForTests()))
        session = gov.as_account(gov.bootstrap().account_id)
        ingest(gov, session.principal, spans_of(3, 40), steps=steps)
        exporter = GovernanceSpanExporter(gov, session.principal, steps=steps)
        assert exporter.export(everything) is SpanExportResult.SUCCESS
        recorded.append([
            (comparable_run(run), tree(session, run["id"]))
            for run in sorted(runs(session), key=lambda run: run["external_identifier"])
        ])
    assert len(recorded[0]) == 4
    assert recorded[0] == recorded[1]


def test_another_writer_commits_between_the_steps_of_an_export(tmp_path: Path) -> None:
    """On SQLite, a writer that will not wait at all gets in between two steps."""
    path = tmp_path / "steps.db"
    total = 2 * STEP_SPANS + 10
    seen: list[tuple[int, str]] = []

    class Watched(SQLiteStore):
        """Runs ``between`` after each outermost commit (the export's thread is between steps)."""

        between: Callable[[], None] | None = None
        depth = 0

        @contextmanager
        def transaction(self) -> Iterator[None]:
            self.depth += 1
            try:
                with super().transaction():
                    yield
            finally:
                self.depth -= 1
            if self.depth == 0 and self.between is not None:
                self.between()

    watched = Watched(path)
    gov = Governance(watched, config=Config(cipher=PlaintextForTests()))
    account = gov.bootstrap().account_id
    principal = gov.as_account(account).principal
    other = Governance(SQLiteStore(path, busy_timeout_ms=0))

    def write_from_another_thread() -> None:
        def write() -> None:
            session = other.as_account(account)
            agent = session.details("agents/create", name=f"other {len(seen)}")
            stored = sum(span["purpose"] == "activity" for span in gov.store.query("agent_spans"))
            seen.append((stored, agent["id"]))

        thread = threading.Thread(target=write)
        thread.start()
        thread.join()

    watched.between = write_from_another_thread
    try:
        result = ingest(gov, principal, spans_of(1, total))
    finally:
        watched.between = None
    assert result.accepted == total
    # The other writer committed while the export had stored only part of its spans.
    assert seen and seen[0][0] < total
    assert len(seen) >= 3
    gov.close()
    other.close()


def test_an_export_cut_by_a_busy_store_and_sent_again_stores_each_span_once(
    gov: Governance, principal: Principal, store: CountingStore,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    total = 3 * 40
    spans = spans_of(3, 40)
    steps = ExportSteps(max_spans=25, pause_seconds=0, timer=StoppedClock())
    store.committed.clear()
    store.begun, store.busy_at = 0, 3
    with pytest.raises(ExportCutShort) as cut:
        ingest(gov, principal, spans, steps=steps)
    # Two steps were stored, the third (refused as busy) was not.
    assert (cut.value.stored, cut.value.total) == (50, total)
    assert cut.value.retry_after_ms == 1500
    assert "50 of its 120 spans are stored" in cut.value.message
    assert len(stored_spans(gov, principal)) == 50

    store.busy_at = None
    store.committed.clear()
    again = ingest(gov, principal, spans, steps=steps)
    assert (again.accepted, again.rejected) == (total, ())
    # The 50 stored spans were found stored: only the other 70 were written.
    assert sum(store.committed) == total - 50
    recorded = stored_spans(gov, principal)
    assert len(recorded) == total == len({span["id"] for span in recorded})
    session = gov.as_account(principal.account_id)
    listed = runs(session)
    assert [run["span_counts"]["total"] for run in listed] == [40, 40, 40]
    assert {run["status"] for run in listed} == {"complete"}
    # Every fifth chat call's evaluation is recorded once.
    assert all(run["quality_payloads"]["relevance"]["score"] == 0.5 for run in listed)

    # A third sending writes nothing at all: each span is found stored, without a create.
    store.committed.clear()
    operations: list[str] = []
    call = gov.call

    def counted(operation: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        operations.append(operation)
        return call(operation, *args, **kwargs)

    monkeypatch.setattr(gov, "call", counted)
    assert ingest(gov, principal, spans, steps=steps).accepted == total
    assert store.committed == []
    assert "agent_spans/create" not in operations
    assert "agent_instances/record_quality" not in operations


def test_an_export_past_its_deadline_stops_and_each_attempt_gets_further(
    gov: Governance, principal: Principal,
) -> None:
    spans = spans_of(1, 30)
    clock = StoppedClock()
    steps = ExportSteps(max_spans=10, pause_seconds=0, timer=clock)
    stored = []
    for _ in range(2):
        # The deadline has passed before the export starts: each attempt stores one step
        # of new spans (the steps replaying what an earlier one stored do not count).
        with pytest.raises(ExportCutShort) as cut:
            ingest(gov, principal, spans, steps=steps, deadline=clock() - 1)
        assert cut.value.retry_after_ms == 1000
        assert "stopped at its deadline" in cut.value.message
        stored.append((cut.value.stored, len(stored_spans(gov, principal))))
    assert stored == [(10, 10), (20, 20)]
    # The third finds 20 stored and stores the last 10 (then nothing remains to cut).
    result = ingest(gov, principal, spans, steps=steps, deadline=clock() - 1)
    assert result.accepted == 30
    [run] = runs(gov.as_account(principal.account_id))
    assert (run["span_counts"]["total"], run["status"]) == (30, "complete")


def test_an_export_within_its_deadline_is_not_cut(
    gov: Governance, principal: Principal,
) -> None:
    clock = StoppedClock(tick=0.001)
    steps = ExportSteps(max_spans=10, pause_seconds=0, timer=clock)
    result = ingest(gov, principal, spans_of(2, 30), steps=steps, deadline=clock() + 60)
    assert isinstance(result, IngestResult) and result.accepted == 60


def test_the_steps_pause_between_them_and_not_after_the_last(
    gov: Governance, principal: Principal,
) -> None:
    pauses: list[float] = []
    steps = ExportSteps(max_spans=10, pause_seconds=0.002, timer=StoppedClock(),
                        sleep=pauses.append)
    ingest(gov, principal, spans_of(1, 30), steps=steps)
    # Registration and 10 spans, 10 more, the last 10 and the finish: three steps.
    assert pauses == [0.002, 0.002]


def test_a_span_changed_since_it_was_stored_is_still_refused(
    gov: Governance, principal: Principal,
) -> None:
    spans = spans_of(1, 12)
    ingest(gov, principal, spans)
    changed = [*spans[:5], _renamed(spans[5]), *spans[6:]]
    result = ingest(gov, principal, changed)
    assert result.accepted == 11
    [rejection] = result.rejected
    assert "idempotency_key_already_used" in rejection.reason


def _renamed(span: Span) -> Span:
    return attrs.evolve(span, name=span.name + " (changed)")


@pytest.mark.parametrize("steps", [
    {"max_spans": 0}, {"max_seconds": 0}, {"max_seconds": -1.0}, {"pause_seconds": -0.1},
])
def test_step_bounds_must_be_positive(steps: dict[str, Any]) -> None:
    name = next(iter(steps))
    with pytest.raises(ValueError, match=name):
        ExportSteps(**steps)


def test_the_endpoint_answers_a_cut_export_with_503_naming_what_is_stored(
    gov: Governance, boot: Bootstrap, principal: Principal,
) -> None:
    clock = StoppedClock()
    app = falcon.App()
    add_otlp_routes(app, gov, BodyLimits(), environ={},
                    steps=ExportSteps(max_spans=10, pause_seconds=0, timer=clock),
                    deadline_s=-1)
    client = falcon.testing.TestClient(app)
    body = export(1, 30)
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {boot.token}"}

    answers = []
    for _ in range(3):
        answer = client.simulate_post("/v1/traces", body=body, headers=headers)
        answers.append(answer)
    first, second, last = answers
    for cut, stored in ((first, 10), (second, 20)):
        assert cut.status_code == 503 and cut.headers["retry-after"] == "1"
        status = status_pb2.Status.FromString(cut.content)
        assert status.code == 14
        assert f"{stored} of its 30 spans are stored" in status.message
    assert last.status_code == 200
    response = trace_service_pb2.ExportTraceServiceResponse.FromString(last.content)
    assert not response.HasField("partial_success")
    assert len(stored_spans(gov, principal)) == 30


def test_the_in_process_exporter_sends_a_cut_batch_again_and_stores_each_span_once(
    gov: Governance, principal: Principal, store: CountingStore,
    caplog: pytest.LogCaptureFixture,
) -> None:
    everything = [span for batch in memory_batches(record_agent_trace) for span in batch]
    waits: list[float] = []
    steps = ExportSteps(max_spans=2, pause_seconds=0, timer=StoppedClock())
    exporter = GovernanceSpanExporter(gov, principal, retries=1, sleep=waits.append,
                                      steps=steps)
    # Busy at the second step: the first (registration and two spans) is stored.
    store.begun, store.busy_at = 0, 2
    assert exporter.export(everything) is SpanExportResult.SUCCESS
    assert waits == [1.5]
    assert exporter.last_result is not None and exporter.last_result.accepted == 4
    assert len(stored_spans(gov, principal)) == 4
    [run] = runs(gov.as_account(principal.account_id))
    assert (run["span_counts"]["total"], run["status"]) == (4, "complete")

    # Out of retries: a failed export, and the log says what was stored.
    again = memory_batches(record_agent_trace)
    store.begun, store.busy_at = 0, 2
    exporter.retries = 0
    assert exporter.export([span for batch in again for span in batch]) is (
        SpanExportResult.FAILURE
    )
    assert "batch recorded in part" in caplog.text
    assert "2 of its 4 spans are stored" in caplog.text


# -- what is kept to know a span sent again -------------------------------------------------
def test_the_ingest_keeps_a_digest_of_each_span_and_no_response(
    gov: Governance, principal: Principal, boot: Bootstrap,
) -> None:
    spans = spans_of(1, 3)
    ingest(gov, principal, spans)
    # On each span, which no view shows; no idempotency record at all.
    stored = stored_spans(gov, principal)
    assert len(stored) == 3
    assert all(span["create_digest"].startswith("2:") for span in stored)
    assert gov.store.query("idempotency_keys") == []
    shown = [
        gov.call("agent_spans/show", {"agent_span_id": span["id"]}, token=boot.token)["details"]
        for span in stored
    ]
    assert all(span["id"] and "create_digest" not in span for span in shown)
    # A create sent with the key the ingest derives finds no record: it is refused as any
    # create of an id that is taken, not answered a response nobody stored.
    span = stored[0]
    with pytest.raises(GovernanceError) as refused:
        gov.call("agent_spans/create", {
            "id": span["id"], "agent_instance_id": span["agent_instance_id"],
            "schema_name": span["schema_name"], "status": "complete",
            "idempotency_key": f"otel-{span['id']}",
        }, token=boot.token)
    assert refused.value.code == "conflict"


@pytest.mark.parametrize("scope", ["otel/span", "agent_spans/create"])
def test_a_span_stored_with_an_idempotency_record_is_found_when_sent_again(
    gov: Governance, principal: Principal, store: CountingStore, scope: str,
) -> None:
    # As spans were stored before each held its create's digest: the digest in a record of
    # the ingest's own scope; or, before that, each span stored by a create whose
    # idempotency key the ingest derived, its record holding the create's fingerprint.
    spans = spans_of(1, 4)
    ingest(gov, principal, spans)
    for span in stored_spans(gov, principal):
        key = span["id"] if scope == "otel/span" else f"otel-{span['id']}"
        with gov.store.transaction():
            gov.store.put("agent_spans", {**span, "create_digest": None})
            gov.store.put("idempotency_keys", {
                "id": record_id(principal.account_id, scope, key),
                "account_id": principal.account_id, "operation": scope,
                "fingerprint": span["create_digest"], "inserted_at": span["inserted_at"],
            })
    store.committed.clear()
    result = ingest(gov, principal, [*spans[:2], _renamed(spans[2]), spans[3]])
    assert result.accepted == 3
    [rejection] = result.rejected
    assert "idempotency_key_already_used" in rejection.reason
    assert len(stored_spans(gov, principal)) == 4 and sum(store.committed) == 0

