"""How many SQL statements an OTLP export runs: a regression guard, not a timing.

An export's steps read what their spans need (idempotency records, id claims, the parents
other runs' spans name) a window at a time, and write each table's records together; the
reads per step do not grow with its spans.
"""

from __future__ import annotations

import collections
from pathlib import Path

from governance_core.otel import ingest
from governance_core.otel.ingest import ExportSteps
from governance_core.otel.otlp_codec import decode_request
from governance_core.service import Governance
from governance_core.storage import SQLiteStore
from tests.core.test_statement_counts import statements
from tests.otel.exports import export

PROTOBUF = "application/x-protobuf"


def _reads(tmp_path: Path, spans: int) -> collections.Counter[str]:
    gov = Governance(SQLiteStore(tmp_path / f"{spans}.db"))
    principal = gov.authenticate(gov.bootstrap().token)
    body = decode_request(export(1, spans), PROTOBUF, 64)
    assert isinstance(gov.store, SQLiteStore)
    try:
        with statements(gov.store) as seen:
            # Steps of 200 spans whatever the machine's speed (by default a step also ends
            # after 50 ms).
            result = ingest(gov, principal, body, steps=ExportSteps(max_seconds=3600))
        assert result.accepted == spans and not result.rejected
        return collections.Counter(s for s in seen if s.startswith("SELECT "))
    finally:
        gov.close()


def test_an_exports_reads_do_not_grow_with_its_spans(tmp_path: Path) -> None:
    small, large = _reads(tmp_path, 64), _reads(tmp_path, 512)
    per_span = ("SELECT idempotency_keys", "SELECT ids", "SELECT agent_spans")
    # A 512-span export is three steps: each reads each of these a few times.
    for read in per_span:
        assert large[read] <= 3 * max(small[read], 3), (read, small, large)
    assert sum(large.values()) <= 50, large
