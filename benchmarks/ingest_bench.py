"""Span ingest through the library against raw sqlite3 doing the minimum a span create must.

Run: ``python benchmarks/ingest_bench.py [--spans 2000] [--rounds 3] [--show-spans 100000]``.

The library side records finished LLM spans (token usage in the payload, a span type with
data risk, an idempotency key) into one run through ``gov.call("agent_spans/create")`` on a
SQLite file: one transaction a span; then the same number of spans in bulk requests of 100.

The baseline is raw sqlite3 on a WAL file with ``synchronous=NORMAL`` doing what a span
create must persist, with rows of the sizes the library wrote: read the idempotency record and
the run, insert the span, rewrite the run, insert the idempotency record. It runs one
transaction a span, and 100 spans a transaction (the bulk baseline).

Beside each rate, where Linux tells it (``/proc/self/io``), the bytes the process wrote a
span (the WAL's frames, and the checkpoints' copies into the file): a commit writes every page
it changed whole, so the pages a span create changes (its row and its indexes', its run's,
its idempotency record's) weigh on a span a transaction more than its CPU.

Reads stay flat: ``agent_instances/show`` of a run with ``--show-spans`` spans against one
with 10.

Each figure is the median of ``--rounds`` rounds; each ratio is printed beside its goal.
"""

from __future__ import annotations

import argparse
import math
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from governance_core.service import Governance

SCHEMA = {
    "span_type_schemas": [
        {
            "name": "llm",
            "params_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
            "data_risk": {"action_profile": {"read_data": "allowed"},
                          "params_data_categories": {"personal_identifiers": "included"}},
            "template": "{{ prompt | truncate: 40 }}",
        }
    ]
}
GOALS = {"single": 0.5, "bulk": 0.3, "show": 1.5}
BATCH = 100


def span_body(instance_id: str, number: int) -> dict[str, Any]:
    """A finished LLM span as the TypeScript client sends it."""
    return {
        "agent_instance_id": instance_id,
        "schema_name": "llm",
        "status": "complete",
        "started_at": "2026-11-21T16:41:59Z",
        "finished_at": "2026-11-21T16:42:00Z",
        "payload": {"prompt": f"Review application {number}", "model": "gpt-4o",
                    "token_usage": {"prompt_tokens": 812, "completion_tokens": 164}},
        "result_payload": {"text": "approve " * 20},
    }


def prepare(gov: Governance) -> tuple[str, str]:
    """Bootstrap an account, create an agent and register a run; its token and run id."""
    token = gov.bootstrap(account_name="Bench", admin_email="bench@example.test").token
    agent = gov.call("agents/create", {"name": "bench"}, token=token)["details"]
    instance = gov.call("agent_instances/register", {
        "agent_id": agent["id"], "agent_version": {"name": "1", "external_identifier": "1"},
        "agent_schema_version": {"external_identifier": "s1", **SCHEMA},
    }, token=token)["details"]["id"]
    return token, instance


def written() -> float:
    """Bytes this process has written so far (``wchar``); NaN where Linux does not tell."""
    try:
        with open("/proc/self/io") as io:
            for line in io:
                name, _, value = line.partition(":")
                if name == "wchar":
                    return float(value)
    except OSError:
        pass
    return math.nan


def library_rates(db: Path, spans: int) -> tuple[float, float, float, float]:
    """Spans a second through the library, one a call and in bulk requests of 100; bytes a span.

    Answers the two rates, then the bytes written a span of each.
    """
    with Governance.open(db) as gov:
        token, instance = prepare(gov)
        before, started = written(), time.perf_counter()
        for number in range(spans):
            body = {**span_body(instance, number), "idempotency_key": f"one-{number:08d}"}
            gov.call("agent_spans/create", body, token=token)
        single = spans / (time.perf_counter() - started)
        single_bytes = (written() - before) / spans
        before, started = written(), time.perf_counter()
        for batch in range(0, spans, BATCH):
            items = [{"_type": "agent_spans/create", "idempotency_key": f"bulk-{batch + i:08d}",
                      **span_body(instance, batch + i)} for i in range(BATCH)]
            gov.call("bulk", {"items": items}, token=token)
        bulk = spans / (time.perf_counter() - started)
        bulk_bytes = (written() - before) / spans
    return single, bulk, single_bytes, bulk_bytes


def stored_rows(db: Path) -> tuple[str, str, str]:
    """The JSON of a span, a run and an idempotency record as the library stored them."""
    conn = sqlite3.connect(db)
    try:
        rows = tuple(
            conn.execute(f"SELECT data FROM {table} ORDER BY length(data) DESC LIMIT 1")
            .fetchone()[0]
            for table in ("agent_spans", "agent_instances", "idempotency_keys")
        )
    finally:
        conn.close()
    return rows  # type: ignore[return-value]


def baseline_rate(
    db: Path, rows: tuple[str, str, str], spans: int, batch: int
) -> tuple[float, float]:
    """Raw sqlite3 doing a span create's minimum, ``batch`` spans a transaction.

    Answers spans a second and the bytes written a span.
    """
    span_row, run_row, key_row = rows
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE spans (id TEXT PRIMARY KEY, run TEXT, started_at TEXT, data TEXT)")
    conn.execute("CREATE INDEX spans_run ON spans (run, started_at)")
    conn.execute("CREATE TABLE runs (id TEXT PRIMARY KEY, data TEXT)")
    conn.execute("CREATE TABLE keys (id TEXT PRIMARY KEY, data TEXT)")
    conn.execute("INSERT INTO runs VALUES ('run', ?)", (run_row,))
    before, started = written(), time.perf_counter()
    for first in range(0, spans, batch):
        conn.execute("BEGIN IMMEDIATE")
        for number in range(first, min(first + batch, spans)):
            key = f"key-{number}"
            conn.execute("SELECT data FROM keys WHERE id = ?", (key,)).fetchone()
            conn.execute("SELECT data FROM runs WHERE id = 'run'").fetchone()
            conn.execute("INSERT INTO spans VALUES (?, 'run', ?, ?)",
                         (f"span-{number}", f"2026-11-21T16:41:59.{number:06d}Z", span_row))
            conn.execute("UPDATE runs SET data = ? WHERE id = 'run'", (run_row,))
            conn.execute("INSERT INTO keys VALUES (?, ?)", (key, key_row))
        conn.execute("COMMIT")
    rate = spans / (time.perf_counter() - started)
    conn.close()
    return rate, (written() - before) / spans


def show_times(db: Path, many: int, reads: int = 200) -> tuple[float, float]:
    """Median seconds of ``agent_instances/show`` of a run of 10 spans and one of ``many``."""
    with Governance.open(db) as gov:
        token, small = prepare(gov)
        big = gov.call("agent_instances/register", {
            "agent_id": gov.call("agent_instances/show", {"agent_instance_id": small},
                                 token=token)["details"]["agent_id"],
            "agent_version": {"name": "1", "external_identifier": "1"},
        }, token=token)["details"]["id"]
        for run, count in ((small, 10), (big, many)):
            for first in range(0, count, 1000):
                items = [{"_type": "agent_spans/create", "idempotency_key": f"{run}-{i:08d}",
                          **span_body(run, i)} for i in range(first, min(first + 1000, count))]
                gov.call("bulk", {"items": items}, token=token)
        times: dict[str, list[float]] = {small: [], big: []}
        # Reads of the two runs alternate, so a machine that slows down meanwhile slows both.
        for _ in range(reads):
            for run in (small, big):
                started = time.perf_counter()
                gov.call("agent_instances/show", {"agent_instance_id": run}, token=token)
                times[run].append(time.perf_counter() - started)
    return statistics.median(times[small]), statistics.median(times[big])


def median_of(rounds: int, measure: Callable[[int], Any]) -> list[float]:
    """Run ``measure(round)`` ``rounds`` times; the median of each figure it returns."""
    results = [measure(number) for number in range(rounds)]
    return [statistics.median(figures) for figures in zip(*results, strict=True)]


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--show-spans", type=int, default=100_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)

        def one_round(number: int) -> tuple[float, ...]:
            library = folder / f"library-{number}.db"
            figures = library_rates(library, args.spans)
            rows = stored_rows(library)
            one = baseline_rate(folder / f"raw-{number}.db", rows, args.spans, 1)
            batched = baseline_rate(folder / f"batched-{number}.db", rows, args.spans, BATCH)
            return (*figures, *one, *batched)

        (single, bulk, single_bytes, bulk_bytes, one, one_bytes, batched,
         batched_bytes) = median_of(args.rounds, one_round)
        small, big = show_times(folder / "show.db", args.show_spans)
    print(f"medians of {args.rounds} rounds of {args.spans} spans")
    kb = 1 / 1024
    print(f"raw sqlite3 minimum, 1 span a transaction:    {one:8.0f} spans/s  (baseline);"
          f"  {one_bytes * kb:6.1f} KB written a span")
    print(f"raw sqlite3 minimum, {BATCH} spans a transaction:  {batched:8.0f} spans/s  "
          f"(bulk baseline);  {batched_bytes * kb:6.1f} KB written a span")
    print(f"library, 1 span a call:                       {single:8.0f} spans/s  "
          f"ratio {single / one:.2f}  goal >= {GOALS['single']};"
          f"  {single_bytes * kb:6.1f} KB written a span ({single_bytes / one_bytes:.1f} times)")
    print(f"library, bulk of {BATCH} spans a call:             {bulk:8.0f} spans/s  "
          f"ratio {bulk / batched:.2f}  goal >= {GOALS['bulk']};"
          f"  {bulk_bytes * kb:6.1f} KB written a span ({bulk_bytes / batched_bytes:.1f} times)")
    print(f"instance show, 10 spans: {small * 1e3:.2f} ms; {args.show_spans} spans: "
          f"{big * 1e3:.2f} ms  ratio {big / small:.2f}  goal <= {GOALS['show']}")


if __name__ == "__main__":
    main()
