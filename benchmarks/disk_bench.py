"""Disk a stored span takes: OTLP-like spans recorded into a SQLite file, bytes per span.

Run: ``python benchmarks/disk_bench.py [--spans 20000] [--goal 2500]``.

Spans are made with the OpenTelemetry SDK as ``otlp_bench.py`` makes them (traces of 512
spans: an agent span over chat calls with token usage and messages, and tool calls) and
recorded through the in-process exporter (:class:`GovernanceSpanExporter`, the mapping the
OTLP endpoint uses) into a fresh SQLite file, sensitive values encrypted. The file is then
checkpointed and vacuumed, and SQLite's ``dbstat`` table gives the pages each table and its
indexes take.

It prints the bytes per span of the file and of each table (indexes included), then the
bytes per span of the span's own records (the span, its idempotency record and its id's
record) beside the goal.
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
from pathlib import Path

from otlp_bench import BATCH, make_traces

from governance_core.encryption import generate_key
from governance_core.otel.exporter import GovernanceSpanExporter
from governance_core.service import Governance

SPAN_TABLES = ("agent_spans", "idempotency_keys", "ids")
"""The records each span adds: the span, its create's idempotency record, its id's record."""


def record(path: Path, spans: int) -> int:
    """Record ``spans`` spans (whole traces) into a new store at ``path``; how many stored."""
    # Encrypted as a server keeps them: the messages are sensitive values.
    gov = Governance.open(str(path), encryption_key=generate_key())
    token = gov.bootstrap().token
    exporter = GovernanceSpanExporter(gov, token)
    stored = 0
    for trace in make_traces(max(1, spans // BATCH), "disk-bench"):
        exporter.export(trace)
        assert exporter.last_result is not None and not exporter.last_result.rejected
        stored += len(trace)
    gov.close()
    return stored


def table_bytes(path: Path) -> tuple[int, dict[str, int]]:
    """The file's size after a vacuum, and the bytes of each table with its indexes."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.execute("VACUUM")
    owners = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
    sizes: dict[str, int] = {}
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        table = owners.get(name, name)
        sizes[table] = sizes.get(table, 0) + int(size)
    conn.close()
    return path.stat().st_size, sizes


def main() -> None:
    """Record the spans, then print bytes per span, per table and against the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=20_000)
    parser.add_argument("--goal", type=int, default=2_500,
                        help="bytes per span the span's own records may take")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "disk.db"
        spans = record(path, args.spans)
        total, sizes = table_bytes(path)
    print(f"{spans} spans, file {total / 1e6:.1f} MB: {total / spans:,.0f} bytes a span")
    for table, size in sorted(sizes.items(), key=lambda item: -item[1]):
        if size / spans >= 20:
            print(f"  {table:<24} {size / 1e6:8.2f} MB {size / spans:8,.0f} bytes a span")
    own = sum(sizes.get(table, 0) for table in SPAN_TABLES) / spans
    print(f"a span's own records ({', '.join(SPAN_TABLES)}): {own:,.0f} bytes a span,"
          f" goal <= {args.goal:,}: ratio {own / args.goal:.2f}"
          f" ({'met' if own <= args.goal else 'NOT met'})")


if __name__ == "__main__":
    main()
