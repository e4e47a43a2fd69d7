"""OTLP ingest in process: CPU a span on PostgreSQL against SQLite, the same spans, one run.

Run: ``python benchmarks/otlp_store_bench.py [--spans 10240] [--rounds 3] [--url URL]``
(the URL of a PostgreSQL server defaults to ``$GOVERNANCE_TEST_POSTGRES_URL``; without one
only SQLite is measured).

The spans are made once with the OpenTelemetry SDK as ``otlp_bench.py`` makes them (traces of
512 spans: an agent span over chat calls with token usage and messages, and tool calls) and
recorded through the in-process exporter (:class:`GovernanceSpanExporter`, the mapping the
OTLP endpoint uses), sensitive values encrypted, into a fresh store each round: a SQLite file,
a SQLite file on an account with ``decision_bench.py``'s 50 policies live (detective mode
judges every span), then a new database on the PostgreSQL server (dropped afterwards).
Rounds alternate them.

Each round prints the CPU time a span of this process (the library) and, for PostgreSQL, of
the server's processes too (read from ``/proc``: the server must run on this machine, else
that figure is left out); for SQLite, the bytes this process wrote a span (its WAL frames and
checkpoints, from ``/proc/self/io``, where Linux tells it). Then the medians, what judging
costs a span against SQLite's, and the ratio of PostgreSQL's (library and database) to
SQLite's against the goal of 1.5.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from decision_bench import POLICIES, policy_source
from ingest_bench import written
from opentelemetry.sdk.trace import ReadableSpan
from otlp_bench import BATCH, make_traces
from postgres_bench import scratch_database

from governance_core.encryption import generate_key
from governance_core.otel.exporter import GovernanceSpanExporter
from governance_core.service import Governance

GOAL = 1.5
_TICKS = os.sysconf("SC_CLK_TCK")


def database_cpu() -> float | None:
    """CPU seconds of every ``postgres`` process of this machine so far; None if none runs."""
    total, found = 0, False
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as stat:
                text = stat.read()
        except OSError:
            continue
        name, rest = text[text.index("(") + 1:text.rindex(")")], text[text.rindex(")") + 2:]
        if name.startswith("postgres"):
            fields = rest.split()
            total += int(fields[11]) + int(fields[12])
            found = True
    return total / _TICKS if found else None


def record(
    location: str, traces: list[list[ReadableSpan]], policies: int = 0
) -> tuple[float, float | None, float]:
    """Record ``traces`` into the store at ``location``; the CPU seconds it took, and bytes.

    The CPU seconds of this process and of the database server (None where none runs on this
    machine), and the bytes this process wrote meanwhile. With ``policies``, that many of the
    decision benchmark's policies are live first, and every span is judged as it is recorded
    (detective mode).
    """
    gov = Governance.open(location, encryption_key=generate_key())
    try:
        token = gov.bootstrap().token
        session = gov.session(token)
        for number in range(policies):
            session.call("policies/create", {
                "name": f"policy {number}", "source": policy_source(number),
            })
        exporter = GovernanceSpanExporter(gov, token)
        database = database_cpu() if location.startswith("postgresql") else None
        began, bytes_before = time.process_time(), written()
        for trace in traces:
            exporter.export(trace)
            assert exporter.last_result is not None and not exporter.last_result.rejected
        mine, wrote = time.process_time() - began, written() - bytes_before
        after = database_cpu() if database is not None else None
    finally:
        gov.close()
    return mine, None if database is None or after is None else after - database, wrote


def main() -> None:
    """Measure each store in alternating rounds; print each figure and the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=10_240)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--url", default=os.environ.get("GOVERNANCE_TEST_POSTGRES_URL"))
    args = parser.parse_args()
    traces = make_traces(max(1, args.spans // BATCH), "otlp-store-bench")
    spans = sum(len(trace) for trace in traces)
    ms = 1e3 / spans

    def sqlite() -> tuple[float, float | None, float]:
        with tempfile.TemporaryDirectory() as scratch:
            return record(str(Path(scratch) / "bench.db"), traces)

    def postgres() -> tuple[float, float | None, float]:
        with scratch_database(args.url) as url:
            return record(url, traces)

    def judged() -> tuple[float, float | None, float]:
        with tempfile.TemporaryDirectory() as scratch:
            return record(str(Path(scratch) / "bench.db"), traces, policies=POLICIES)

    stores: dict[str, Callable[[], tuple[float, float | None, float]]] = {
        "SQLite": sqlite, f"SQLite, {POLICIES} policies": judged,
    }
    if args.url:
        stores["PostgreSQL"] = postgres
    else:
        print("PostgreSQL skipped: no --url and no $GOVERNANCE_TEST_POSTGRES_URL")
    figures: dict[str, list[tuple[float, float | None, float]]] = {name: [] for name in stores}
    for number in range(1, args.rounds + 1):
        for name, measure in stores.items():
            mine, database, wrote = measure()
            figures[name].append((mine, database, wrote))
            if name == "PostgreSQL":
                # This process writes to a socket there, not to files: no bytes shown.
                extra = "" if database is None else f", the database {database * ms:.3f} ms"
            else:
                extra = f", {wrote / spans / 1024:.1f} KB written a span"
            print(f"round {number}, {name}: the library {mine * ms:.3f} CPU ms a span{extra}")
    sqlite_ms = statistics.median(mine for mine, _, _ in figures["SQLite"]) * ms
    sqlite_kb = statistics.median(wrote for _, _, wrote in figures["SQLite"]) / spans / 1024
    print(f"\n{spans} spans, medians of {args.rounds} rounds")
    print(f"SQLite:     {sqlite_ms:.3f} CPU ms a span, {sqlite_kb:.1f} KB written a span")
    judged_ms = statistics.median(
        mine for mine, _, _ in figures[f"SQLite, {POLICIES} policies"]
    ) * ms
    print(f"SQLite with the decision benchmark's {POLICIES} policies live (every span judged):"
          f" {judged_ms:.3f} CPU ms a span, {judged_ms / sqlite_ms:.2f} times SQLite's")
    if "PostgreSQL" in figures:
        library = statistics.median(mine for mine, _, _ in figures["PostgreSQL"]) * ms
        databases = [database for _, database, _ in figures["PostgreSQL"] if database is not None]
        line = f"PostgreSQL: {library:.3f} CPU ms a span (the library)"
        total = library
        if databases:
            database_ms = statistics.median(databases) * ms
            total += database_ms
            line += f" + {database_ms:.3f} (the database) = {total:.3f}"
        print(line)
        print(f"  PostgreSQL / SQLite: {total / sqlite_ms:.2f} (goal <= {GOAL}),"
              f" the library alone {library / sqlite_ms:.2f}")


if __name__ == "__main__":
    main()
