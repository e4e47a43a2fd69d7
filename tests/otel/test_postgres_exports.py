"""Exports sent at once to one PostgreSQL database are all stored: their steps take turns.

Two steps side by side each look up and insert ids and idempotency keys in the same index
pages, and PostgreSQL's serializable isolation (which tracks reads by page) cancels one of
them, again on every re-run: before the steps took turns, seven of eight such exports failed.
"""

from __future__ import annotations

import threading

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.otel.ingest import ingest
from governance_core.otel.model import Span
from governance_core.otel.otlp_codec import decode_protobuf
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_core.storage.postgres import PostgresStore
from tests.otel.exports import export
from tests.stores import scratch_schema

EXPORTS = 6


def test_exports_sent_at_once_are_each_stored_whole() -> None:
    # Each export its own traces of one agent (the trace ids count on from the export's).
    everything = decode_protobuf(export(EXPORTS * 4, 25))
    by_trace: dict[bytes | str, list[Span]] = {}
    for span in everything:
        by_trace.setdefault(span.trace_id, []).append(span)
    traces = list(by_trace.values())
    batches = [
        [span for trace in traces[number::EXPORTS] for span in trace]
        for number in range(EXPORTS)
    ]
    with scratch_schema("exports") as url:
        gov = Governance(PostgresStore(url), config=Config(cipher=PlaintextForTests()))
        try:
            boot = gov.bootstrap()
            principal = gov.as_account(boot.account_id).principal
            failures: list[BaseException] = []
            start = threading.Barrier(EXPORTS)

            def send(batch: list[Span]) -> None:
                start.wait()
                try:
                    ingest(gov, principal, batch)
                except BaseException as error:
                    failures.append(error)

            threads = [threading.Thread(target=send, args=(batch,)) for batch in batches]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert failures == []
            # As many spans and runs as the same exports sent one after another store.
            alone = Governance(MemoryStore(), config=Config(cipher=PlaintextForTests()))
            alone_principal = alone.as_account(alone.bootstrap().account_id).principal
            for batch in batches:
                ingest(alone, alone_principal, batch)
            for table in ("agent_spans", "agent_instances"):
                assert gov.store.count(table) == alone.store.count(table) > 0, table
            assert gov.store.count("agent_instances") == len(traces)
        finally:
            gov.close()
