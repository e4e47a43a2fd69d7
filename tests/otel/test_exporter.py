"""The in-process exporter: a busy store is retried, then the batch reported as failed."""

from __future__ import annotations

from contextlib import AbstractContextManager

from opentelemetry.sdk.trace.export import SpanExportResult

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.errors import TemporarilyUnavailable
from governance_core.ids import SeededIds
from governance_core.otel.exporter import GovernanceSpanExporter
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from tests.otel.traces import memory_batches, record_agent_trace, runs


class FlakyStore(MemoryStore):
    """A store whose next ``busy_for`` write transactions answer busy."""

    busy_for = 0

    def transaction(self) -> AbstractContextManager[None]:
        if self.busy_for:
            self.busy_for -= 1
            raise TemporarilyUnavailable("busy", retry_after_ms=250)
        return super().transaction()


def test_a_busy_store_is_retried_then_the_batch_fails() -> None:
    store = FlakyStore()
    gov = Governance(store, clock=FixedClock(), ids=SeededIds(5),
                     config=Config(cipher=PlaintextForTests()))
    principal = gov.as_account(gov.bootstrap().account_id).principal
    waits: list[float] = []
    exporter = GovernanceSpanExporter(gov, principal, retries=2, sleep=waits.append)
    batches = memory_batches(record_agent_trace)
    everything = [span for batch in batches for span in batch]

    store.busy_for = 3
    assert exporter.export(everything) is SpanExportResult.FAILURE
    assert waits == [0.25, 0.25]
    assert runs(gov.as_account(principal.account_id)) == []

    store.busy_for = 2
    assert exporter.export(everything) is SpanExportResult.SUCCESS
    assert exporter.last_result is not None and exporter.last_result.accepted == 4
    [run] = runs(gov.as_account(principal.account_id))
    assert run["status"] == "complete" and run["span_counts"]["total"] == 4
