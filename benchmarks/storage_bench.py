"""Write throughput of SQLiteStore on a WAL file against raw sqlite3 doing the same inserts.

Run: ``python benchmarks/storage_bench.py [--single 3000] [--batches 60] [--repeat 3]``.

Both sides write span-shaped records into the ``agent_spans`` table as the adapter creates it
(the same columns and indexes, copied from the adapter's own file), on a fresh file each run,
with the adapter's pragmas (WAL, ``synchronous=NORMAL``) and ``BEGIN IMMEDIATE`` transactions.
The raw side gets its JSON text and column values ready-made, so the ratio is everything the
adapter adds: argument and type checks, JSON encoding, connection handling. A third figure,
raw inserts into a bare ``(id, data)`` table, shows what the indexes on declared fields cost.
"""

from __future__ import annotations

import argparse
import json
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from governance_core.storage import SQLiteStore
from governance_core.storage.schema import TABLES

TABLE = "agent_spans"
BATCH = 100


def span(number: int) -> dict[str, Any]:
    """Return a span-shaped record, unique by ``number``."""
    return {
        "id": f"01kdvdna00tv2s9299cbf4{number:010d}",
        "account_id": "01kdvdna00tv2s9299cbf4ezdbrxgred",
        "inserted_at": "2026-11-21T16:42:00.123456Z",
        "agent_instance_id": f"01kdvdna00tv2s9299cbf4inst{number // 1000:06d}",
        "agent_id": "01kdvdna00tv2s9299cbf4agent00001",
        "parent_span_id": None,
        "schema_name": "llm_call",
        "status": "finished",
        "purpose": "generation",
        "started_at": "2026-11-21T16:41:59.000000Z",
        "finished_at": "2026-11-21T16:42:00.000000Z",
        "details": {
            "model": "example-model-1",
            "input_tokens": 812,
            "output_tokens": 164,
            "attributes": {"temperature": 0.2, "tags": ["alpha", "beta"], "retry": False},
            "summary": "x" * 240,
        },
    }


def timed(action: Callable[[], None]) -> float:
    """Return the seconds ``action`` takes."""
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def adapter_run(path: Path, records: Sequence[dict[str, Any]], batch: int) -> float:
    """Write ``records`` through SQLiteStore in transactions of ``batch``; return seconds."""
    store = SQLiteStore(path)

    def write() -> None:
        for start in range(0, len(records), batch):
            with store.transaction():
                for record in records[start : start + batch]:
                    store.put(TABLE, record)

    seconds = timed(write)
    store.close()
    return seconds


def table_ddl(workdir: Path) -> list[str]:
    """Return the CREATE statements of the adapter's table, then of its indexes.

    The adapter's triggers (the ``ids`` table's) are left out: the baseline writes the rows
    alone.
    """
    store = SQLiteStore(workdir / "ddl.db")
    store.close()
    conn = sqlite3.connect(workdir / "ddl.db")
    rows = conn.execute(
        "SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL"
        " AND type IN ('table', 'index') ORDER BY type = 'index'",
        (TABLE,),
    ).fetchall()
    conn.close()
    return [row[0] for row in rows]


def raw_run(path: Path, ddl: list[str], rows: Sequence[Sequence[Any]], batch: int) -> float:
    """Insert ready-made ``rows`` with raw sqlite3 in transactions of ``batch``; return seconds."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("PRAGMA busy_timeout = 5000")
    for statement in ddl:
        conn.execute(statement)
    marks = ", ".join("?" for _ in rows[0])
    insert = f"INSERT OR REPLACE INTO [{TABLE}] VALUES ({marks})"

    def write() -> None:
        for start in range(0, len(rows), batch):
            conn.execute("BEGIN IMMEDIATE")
            for row in rows[start : start + batch]:
                conn.execute(insert, row)
            conn.execute("COMMIT")

    seconds = timed(write)
    conn.close()
    return seconds


def measure(workdir: Path, single: int, batches: int, repeat: int) -> dict[str, float]:
    """Return the median figures of ``repeat`` runs, each on fresh files."""
    ddl = table_ddl(workdir)
    names = [row[1] for row in _columns(workdir / "ddl.db")]
    bare_ddl = [f"CREATE TABLE [{TABLE}] (id TEXT PRIMARY KEY, data TEXT NOT NULL)"]
    figures: dict[str, list[float]] = {}
    for run in range(repeat):
        for label, count, batch in (("single", single, 1), ("batch", batches * BATCH, BATCH)):
            records = [span(run * 10**7 + n) for n in range(count)]
            text = [json.dumps(r, separators=(",", ":")) for r in records]
            pairs = list(zip(records, text, strict=True))
            rows = [[r.get(n) if n != "data" else t for n in names] for r, t in pairs]
            bare = [[r["id"], t] for r, t in pairs]
            results = {
                "adapter": adapter_run(workdir / f"a{run}{label}.db", records, batch),
                "raw": raw_run(workdir / f"r{run}{label}.db", ddl, rows, batch),
                "bare": raw_run(workdir / f"b{run}{label}.db", bare_ddl, bare, batch),
            }
            for side, seconds in results.items():
                figures.setdefault(f"{label} {side}", []).append(count / seconds)
    return {key: statistics.median(values) for key, values in figures.items()}


def _columns(path: Path) -> list[tuple[Any, ...]]:
    conn = sqlite3.connect(path)
    rows = conn.execute(f"PRAGMA table_info([{TABLE}])").fetchall()
    conn.close()
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    """Measure and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--single", type=int, default=3000, help="single-record transactions")
    parser.add_argument("--batches", type=int, default=60, help=f"{BATCH}-record transactions")
    parser.add_argument("--repeat", type=int, default=3, help="runs; the median is reported")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="storage-bench-") as directory:
        figures = measure(Path(directory), args.single, args.batches, args.repeat)
    indexes = len(TABLES[TABLE].wanted_indexes())
    partial = len(TABLES[TABLE].partial)
    print(
        f"Python {platform.python_version()}, SQLite {sqlite3.sqlite_version}, table {TABLE}"
        f" ({indexes} indexes besides the primary key, {partial} of them partial), WAL,"
        " synchronous=NORMAL,"
        f" median of {args.repeat} runs"
    )
    print(f"{'':34}{'SQLiteStore':>12}{'raw sqlite3':>13}{'ratio':>8}{'raw id+data':>13}")
    for label, title, unit in (
        ("single", "1-record transactions", "tx/s"),
        ("batch", f"{BATCH}-record transactions", "rows/s"),
    ):
        adapter, raw, bare = (figures[f"{label} {side}"] for side in ("adapter", "raw", "bare"))
        print(
            f"{title + ' (' + unit + ')':34}{adapter:12,.0f}{raw:13,.0f}{adapter / raw:8.2f}"
            f"{bare:13,.0f}"
        )


if __name__ == "__main__":
    main()
