"""OTLP exports under overload: each answered in time, or shed early and sent again.

Run: ``python benchmarks/otlp_overload_bench.py [--clients 32] [--exports 3] [--db URL]``.

``governance serve`` (its defaults: one worker a CPU) on a fresh SQLite file, or on the
PostgreSQL database ``--db`` names (its tables are dropped first), receives exports of 512
spans from ``--clients`` OpenTelemetry SDK exporters at once (``OTLPSpanExporter``, OTLP/HTTP
protobuf, its default 10 s timeout, in four client processes), each sending ``--exports`` of
them back to back: far more work than the server can do in 10 s, as an application's batch
processors send it when the collector they share falls behind.

It prints, beside the goal that every request is answered within the exporter's 10 s, the
slowest answer and how the requests were answered (200, 503 shed or cut), and how many
exports the exporters gave up on and how many spans are not stored. An export shed with
``503`` is sent again by its exporter (``Retry-After`` honoured) while its 10 s last.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import requests
from mlflow_bench import EXPORT_SPANS, exports, make_traces
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace.export import SpanExportResult
from servers import HOST, free_port, governance_serve, start_server, stop_server

from governance_core.encryption import generate_key
from governance_core.service import Governance
from governance_http.settings import ENCRYPTION_KEY_VARIABLE

PROCESSES = 4
ANSWER_GOAL_S = 10.0
"""The OTLP exporters' default timeout: an answer after it reaches nobody."""


class TimedSession(requests.Session):
    """A session noting each request's wall time and status (None: no answer)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[float, int | None]] = []

    def request(self, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        """Send as a session does, and note how long the answer took."""
        began = time.perf_counter()
        try:
            response = super().request(*args, **kwargs)
        except requests.RequestException:
            self.seen.append((time.perf_counter() - began, None))
            raise
        self.seen.append((time.perf_counter() - began, response.status_code))
        return response


def client(
    args: tuple[str, str, int, int],
) -> tuple[list[tuple[float, int | None]], int, int, int]:
    """One process's exporters: what they sent and how it was answered.

    Each request's (seconds, status), the exports given up, the spans and the exports sent.
    """
    endpoint, token, threads, count = args
    spans = make_traces(threads * count * EXPORT_SPANS // 10, 10)
    batches = exports(spans)
    mine = [batches[number::threads] for number in range(threads)]
    seen: list[tuple[float, int | None]] = []
    failed = [0]
    lock = threading.Lock()

    def send(batches: list[Any]) -> None:
        session = TimedSession()
        exporter = OTLPSpanExporter(
            endpoint=endpoint, headers={"Authorization": f"Bearer {token}"}, session=session,
        )
        for batch in batches:
            if exporter.export(batch) is not SpanExportResult.SUCCESS:
                with lock:
                    failed[0] += 1
        with lock:
            seen.extend(session.seen)

    workers = [threading.Thread(target=send, args=(batch,)) for batch in mine]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return seen, failed[0], len(spans), len(batches)


def stored_spans(db: str) -> int:
    """How many spans the store holds."""
    with Governance.open(db) as gov:
        return gov.store.count("agent_spans")


def reset_postgres(url: str) -> None:
    """Drop every table of the database ``url`` (a benchmark's own)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


def main(argv: Sequence[str] | None = None) -> int:
    """Overload the server with exports and print how it answered."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32, help="exporters sending at once")
    parser.add_argument("--exports", type=int, default=3, help="exports of 512 each sends")
    parser.add_argument("--db", help="a PostgreSQL URL (default: a fresh SQLite file)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "overload.db")
        if args.db:
            reset_postgres(args.db)
        with Governance.open(db) as gov:
            token = gov.bootstrap().token
        port = free_port()
        # A PostgreSQL store is served only with an encryption key.
        env = {**os.environ, ENCRYPTION_KEY_VARIABLE: generate_key()} if args.db else None
        server = start_server(governance_serve(db, port, "--no-access-log"), port, env=env)
        endpoint = f"http://{HOST}:{port}/v1/traces"
        share = [args.clients // PROCESSES + (n < args.clients % PROCESSES)
                 for n in range(PROCESSES)]
        began = time.perf_counter()
        try:
            with multiprocessing.get_context("spawn").Pool(PROCESSES) as pool:
                results = pool.map(client, [(endpoint, token, n, args.exports)
                                            for n in share if n])
        finally:
            elapsed = time.perf_counter() - began
            stop_server(server)
        stored = stored_spans(db)
    seen = [entry for result in results for entry in result[0]]
    failed = sum(result[1] for result in results)
    sent = sum(result[2] for result in results)
    statuses = Counter("no answer" if status is None else str(status) for _, status in seen)
    answered = sorted(seconds for seconds, status in seen if status is not None)
    slowest = answered[-1] if answered else float("nan")
    where = args.db.rsplit("@", 1)[-1] if args.db else "SQLite"
    print(f"{args.clients} exporters x {args.exports} exports of {EXPORT_SPANS} spans,"
          f" {where}, {elapsed:.1f} s")
    print(f"requests: {len(seen)}; " + ", ".join(f"{k}: {v}" for k, v in statuses.items()))
    print(f"answer time: p50 {statistics.median(answered):.2f} s,"
          f" p99 {answered[max(0, int(len(answered) * 0.99) - 1)]:.2f} s,"
          f" slowest {slowest:.2f} s  goal <= {ANSWER_GOAL_S:.0f} s:"
          f" {'met' if slowest <= ANSWER_GOAL_S else 'NOT met'}")
    unanswered = sorted(seconds for seconds, status in seen if status is None)
    if unanswered:
        print(f"requests the exporter stopped waiting for (its 10 s were spent):"
              f" {len(unanswered)}, after {unanswered[0]:.2f}-{unanswered[-1]:.2f} s")
    print(f"exports given up by their exporter: {failed} of {sum(r[3] for r in results)};"
          f" spans not stored: {sent - stored} of {sent}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
