"""Measure WSGI servers serving our app, to choose the one ``governance serve`` runs.

Each candidate is started on a free loopback port against the same SQLite store (one run
registered beforehand), warmed up, then driven by a bounded client loop: client processes,
each with a few threads on persistent connections, send ``--requests`` requests in total,
alternating ``GET /api/v1/agent_instance/{id}`` and ``POST /api/v1/agent_spans``. It prints
requests per second for each candidate and the ratio against the best.

    python benchmarks/serve_bench.py [--requests 4000] [--clients 2] [--threads 4] [--rounds 2]

``--goals`` measures the default server (``governance serve``) against the issue's goals
instead, each the median of ``--rounds`` rounds: ``/ping`` and single-span creates from 4
client processes (the span rate at least 25% of the ping rate, its p99 under 50 ms), and
bulk requests of 100 spans over HTTP against the same requests in-process (at least 50%).

Candidates not installed are skipped (``pip install gunicorn waitress cheroot`` adds the
others). Loopback only; every server is stopped before the next starts. The client runs on the
same machine, so absolute figures are lower than a remote client would see; ratios matter.
"""

from __future__ import annotations

import argparse
import http.client
import importlib.util
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from pathlib import Path

from servers import HOST, Request, free_port, start_server, stop_server, timed_requests

from governance_core.service import Governance
from governance_http.serving import DB_ENVIRONMENT_VARIABLE
from governance_http.settings import SQLITE_THREADS

FACTORY = "governance_http.serving:wsgi_app"
WORKERS = os.cpu_count() or 2

CHEROOT = f"""
import sys
from cheroot import wsgi
from governance_http.serving import wsgi_app
server = wsgi.Server(("{HOST}", int(sys.argv[1])), wsgi_app(), numthreads=8)
server.start()
"""

CANDIDATES: dict[str, list[str]] = {
    f"gunicorn sync x{WORKERS}": [
        "-m", "gunicorn", "-k", "sync", "-w", str(WORKERS), "-b", f"{HOST}:{{port}}",
        f"{FACTORY}()",
    ],
    f"gunicorn sync x{2 * WORKERS}": [
        "-m", "gunicorn", "-k", "sync", "-w", str(2 * WORKERS), "-b", f"{HOST}:{{port}}",
        f"{FACTORY}()",
    ],
    f"gunicorn gthread x{WORKERS}, 4 threads": [
        "-m", "gunicorn", "-k", "gthread", "-w", str(WORKERS), "--threads", "4",
        "-b", f"{HOST}:{{port}}", f"{FACTORY}()",
    ],
    f"granian wsgi x{WORKERS}": [
        "-m", "granian", "--interface", "wsgi", "--workers", str(WORKERS), "--host", HOST,
        "--port", "{port}", "--factory", FACTORY, "--log-level", "warning",
    ],
    f"granian wsgi x{WORKERS}, 4 threads": [
        "-m", "granian", "--interface", "wsgi", "--workers", str(WORKERS), "--blocking-threads",
        "4", "--host", HOST, "--port", "{port}", "--factory", FACTORY, "--log-level", "warning",
    ],
    f"granian wsgi x{WORKERS}, {SQLITE_THREADS} thread (serve)": [
        "-m", "granian", "--interface", "wsgi", "--workers", str(WORKERS), "--blocking-threads",
        str(SQLITE_THREADS), "--host", HOST, "--port", "{port}", "--factory", FACTORY,
        "--log-level", "warning",
    ],
    "waitress, 8 threads": [
        "-m", "waitress", "--threads=8", f"--host={HOST}", "--port={port}", "--call", FACTORY,
    ],
    "cheroot, 8 threads": ["-c", CHEROOT, "{port}"],
}


def installed(command: Sequence[str]) -> bool:
    """Tell whether the server a candidate command runs is importable here."""
    module = command[1] if command[0] == "-m" else "cheroot"
    return importlib.util.find_spec(module) is not None


def prepare(db: Path) -> tuple[str, str]:
    """Bootstrap the store and register one run; its token and instance id."""
    with Governance.open(db) as gov:
        made = gov.bootstrap()
        session = gov.session(made.token)
        agent = session.details("agents/create", {"name": "Bench agent"})
        instance = session.details("agent_instances/register", {
            "agent_id": agent["id"],
            "agent_version": {"name": "Bench", "external_identifier": "v1"},
            "agent_schema_version": {
                "external_identifier": "s1",
                "span_type_schemas": [{"name": "bench:llm", "params_schema": {"type": "object"}}],
            },
        })
        return made.token, instance["id"]


def start(argv: Sequence[str], port: int, db: Path) -> subprocess.Popen[bytes]:
    """Start a candidate and wait until it answers ``/ping``."""
    return start_server(
        [part.format(port=port) for part in argv], port,
        env={**os.environ, DB_ENVIRONMENT_VARIABLE: str(db)}, timeout_s=20,
    )


def drive(port: int, token: str, instance_id: str, count: int, threads: int) -> tuple[int, int]:
    """Send ``count`` requests from ``threads`` threads; (successes, failures)."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    span = json.dumps({"details": {
        "agent_instance_id": instance_id, "schema_name": "bench:llm", "status": "complete",
        "payload": {"prompt": "hello"}, "result_payload": {"answer": "hi"},
    }})
    tally = [0, 0]
    lock = threading.Lock()

    def worker(share: int) -> None:
        connection = http.client.HTTPConnection(HOST, port, timeout=30)
        ok = failed = 0
        for index in range(share):
            if index % 2:
                method, path, body = "POST", "/api/v1/agent_spans", span
            else:
                method, path, body = "GET", f"/api/v1/agent_instance/{instance_id}", None
            try:
                connection.request(method, path, body=body, headers=headers)
                response = connection.getresponse()
                response.read()
                if response.status == 200:
                    ok += 1
                else:
                    failed += 1
                if response.getheader("Connection", "").lower() == "close":
                    connection.close()
            except (OSError, http.client.HTTPException):
                failed += 1
                connection.close()
                connection = http.client.HTTPConnection(HOST, port, timeout=30)
        with lock:
            tally[0] += ok
            tally[1] += failed

    pool = [threading.Thread(target=worker, args=(count // threads,)) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return tally[0], tally[1]


def _drive_star(args: tuple[int, str, str, int, int]) -> tuple[int, int]:
    return drive(*args)


def measure(
    port: int, token: str, instance_id: str, requests: int, clients: int, threads: int
) -> tuple[float, int]:
    """Return requests per second over ``requests`` requests, and how many failed."""
    share = (port, token, instance_id, requests // clients, threads)
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        pool.map(_drive_star, [(port, token, instance_id, 200, threads)] * clients)
        began = time.perf_counter()
        results = pool.map(_drive_star, [share] * clients)
        elapsed = time.perf_counter() - began
    done = sum(ok for ok, _ in results)
    failed = sum(bad for _, bad in results)
    return done / elapsed, failed


DEFAULT_SERVER = (
    "import sys; from governance_http.serving import serve; "
    "serve(sys.argv[2], host='127.0.0.1', port=int(sys.argv[1]))"
)


def span_body(instance_id: str, number: int) -> dict[str, object]:
    """A complete LLM span of the run ``instance_id`` (of type ``bench:llm``)."""
    return {
        "agent_instance_id": instance_id, "schema_name": "bench:llm", "status": "complete",
        "started_at": "2026-11-21T16:41:59Z", "finished_at": "2026-11-21T16:42:00Z",
        "payload": {"prompt": f"hello {number}", "model": "gpt-4o",
                    "token_usage": {"prompt_tokens": 812, "completion_tokens": 164}},
        "result_payload": {"answer": "hi"},
    }


def pings_or_spans(args: tuple[int, str, str, str, int, str]) -> list[float]:
    """Send ``count`` pings (GET) or span creates (POST) on one connection; each latency."""
    port, token, method, instance_id, count, label = args
    requests: list[Request] = [
        ("POST", "/api/v1/agent_spans", json.dumps({
            **span_body(instance_id, number),
            "idempotency_key": f"{label}-{os.getpid()}-{number:08d}",
        })) if method == "POST" else ("GET", "/api/v1/ping", None)
        for number in range(count)
    ]
    return timed_requests(port, token, requests)


def concurrent_rate(
    port: int, token: str, method: str, instance_id: str, requests: int, clients: int, label: str
) -> tuple[float, float]:
    """Requests a second from ``clients`` processes, and the p99 latency in seconds."""
    share = requests // clients
    with multiprocessing.get_context("spawn").Pool(clients) as pool:
        warm = [(port, token, method, instance_id, 50, f"warm-{label}-{i}")
                for i in range(clients)]
        pool.map(pings_or_spans, warm)
        jobs = [(port, token, method, instance_id, share, f"{label}-{i}")
                for i in range(clients)]
        began = time.perf_counter()
        results = pool.map(pings_or_spans, jobs)
        elapsed = time.perf_counter() - began
    latencies = sorted(latency for result in results for latency in result)
    return len(latencies) / elapsed, latencies[int(len(latencies) * 0.99) - 1]


def bulk_rates(
    port: int, token: str, instance_id: str, db: Path, batches: int
) -> tuple[float, float]:
    """Spans a second in bulk requests of 100 over HTTP, and in-process on a fresh store."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}

    def items(batch: int, run: str) -> list[dict[str, object]]:
        return [{"_type": "agent_spans/create", "idempotency_key": f"bulk-{batch}-{i:04d}",
                 **span_body(run, i)} for i in range(100)]

    connection = http.client.HTTPConnection(HOST, port, timeout=60)
    bodies = [json.dumps({"items": items(batch, instance_id)}) for batch in range(batches)]
    began = time.perf_counter()
    for body in bodies:
        connection.request("POST", "/api/v1/bulk", body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        if response.status != 200:
            raise RuntimeError(f"bulk answered {response.status}")
    over_http = batches * 100 / (time.perf_counter() - began)
    local_token, local_run = prepare(db)
    with Governance.open(db) as gov:
        requests = [{"items": items(batch, local_run)} for batch in range(batches)]
        began = time.perf_counter()
        for request in requests:
            gov.call("bulk", request, token=local_token)
        in_process = batches * 100 / (time.perf_counter() - began)
    return over_http, in_process


def goals(args: argparse.Namespace) -> int:
    """Measure the default server against the goals; print each figure and ratio."""
    figures: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.rounds):
            db = Path(tmp) / f"goals-{number}.db"
            token, instance_id = prepare(db)
            port = free_port()
            process = start(["-c", DEFAULT_SERVER, "{port}", str(db)], port, db)
            try:
                ping, _ = concurrent_rate(port, token, "GET", instance_id, args.requests, 4,
                                          "ping")
                spans, p99 = concurrent_rate(port, token, "POST", instance_id, args.requests, 4,
                                             f"span{number}")
                over_http, in_process = bulk_rates(
                    port, token, instance_id, Path(tmp) / f"local-{number}.db", 20
                )
            finally:
                stop_server(process)
            for name, value in (("ping", ping), ("spans", spans), ("p99", p99),
                                ("http bulk", over_http), ("in-process bulk", in_process)):
                figures.setdefault(name, []).append(value)
    median = {name: statistics.median(values) for name, values in figures.items()}
    print(f"default server, 4 client processes, medians of {args.rounds} rounds")
    print(f"GET /ping:                     {median['ping']:8.0f} req/s  (baseline)")
    print(f"POST /agent_spans:             {median['spans']:8.0f} req/s  "
          f"ratio {median['spans'] / median['ping']:.2f}  goal >= 0.25; "
          f"p99 {median['p99'] * 1e3:.1f} ms  goal < 50 ms")
    print(f"in-process bulk of 100:        {median['in-process bulk']:8.0f} spans/s  (baseline)")
    print(f"POST /bulk of 100, 1 client:   {median['http bulk']:8.0f} spans/s  "
          f"ratio {median['http bulk'] / median['in-process bulk']:.2f}  goal >= 0.5")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run every candidate ``--rounds`` times; print the best rate of each and its ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--only", action="append", help="run only candidates containing this")
    parser.add_argument("--goals", action="store_true", help="the default server's goals")
    args = parser.parse_args(argv)
    if args.goals:
        return goals(args)
    candidates = {
        name: command for name, command in CANDIDATES.items()
        if (not args.only or any(part in name for part in args.only)) and installed(command)
    }
    for name in CANDIDATES.keys() - candidates.keys():
        print(f"skipped: {name}")
    best: dict[str, float] = {}
    failures: dict[str, int] = {}
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "bench.db"
        token, instance_id = prepare(db)
        for _ in range(args.rounds):
            for name, command in candidates.items():
                port = free_port()
                process = start(command, port, db)
                try:
                    rate, failed = measure(
                        port, token, instance_id, args.requests, args.clients, args.threads
                    )
                finally:
                    stop_server(process)
                best[name] = max(best.get(name, 0.0), rate)
                failures[name] = failures.get(name, 0) + failed
    top = max(best.values())
    print(f"{args.requests} requests x {args.rounds} rounds, {args.clients} client processes x "
          f"{args.threads} threads, GET instance / POST span alternating; best round shown")
    print(f"{'server':34} {'req/s':>8} {'ratio':>6} {'failed':>7}")
    for name, rate in sorted(best.items(), key=lambda item: -item[1]):
        print(f"{name:34} {rate:8.0f} {rate / top:6.2f} {failures[name]:7d}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
