"""Measure pings and span creates while clients hold request bodies open.

Each slow client opens a connection, sends ``POST /api/v1/team`` with ``Content-Length: 1000``
and then only ``{``, and holds it for the whole measurement. With ``--slow`` (default 50) such
connections open, 4 client processes send ``GET /api/v1/ping`` and then single-span creates;
the script prints requests a second and the p99 latency of each, beside the goal (p99 under
100 ms with 50 slow connections held) and beside the same figures with no slow connection.

Two servers are measured, each with 2 workers of 1 thread on SQLite: ``governance serve``
(request bodies read on the event loop, see ``governance_http/gateway.py``), and granian's
WSGI interface running the same app, which ``serve`` used before and which hands a request to
its thread before the body arrives. The body timeout is raised to 10 minutes for the run, so
the slow connections are held throughout rather than answered ``408``.

    python benchmarks/slow_body_bench.py [--requests 2000] [--slow 50]
"""

from __future__ import annotations

import argparse
import os
import socket
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from serve_bench import concurrent_rate, prepare
from servers import HOST, free_port, start_server, stop_server

from governance_http.settings import BODY_TIMEOUT_VARIABLE, DB_ENVIRONMENT_VARIABLE

GOAL_P99_MS = 100.0
WORKERS = 2

SERVERS: dict[str, list[str]] = {
    "governance serve (body read first)": [
        "-c", "import sys; from governance_http.serving import serve; "
        f"serve(sys.argv[2], host='{HOST}', port=int(sys.argv[1]), workers={WORKERS})",
        "{port}", "{db}",
    ],
    "granian wsgi (body read in the thread)": [
        "-m", "granian", "--interface", "wsgi", "--workers", str(WORKERS),
        "--blocking-threads", "1", "--host", HOST, "--port", "{port}", "--factory",
        "governance_http.serving:wsgi_app", "--log-level", "warning",
    ],
}


def hold_slow_bodies(port: int, count: int) -> list[socket.socket]:
    """Open ``count`` connections that each declare 1000 body bytes and send one."""
    held = []
    for _ in range(count):
        connection = socket.create_connection((HOST, port))
        connection.sendall(
            b"POST /api/v1/team HTTP/1.1\r\nHost: bench\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        held.append(connection)
    time.sleep(0.5)
    return held


def answers_ping(port: int, timeout_s: float = 2.0) -> bool:
    """Whether ``/api/v1/ping`` answers within ``timeout_s``."""
    try:
        with socket.create_connection((HOST, port), timeout=timeout_s) as connection:
            connection.sendall(b"GET /api/v1/ping HTTP/1.1\r\nHost: bench\r\n\r\n")
            return connection.recv(12).startswith(b"HTTP/1.1 200")
    except OSError:
        return False


def measure(name: str, argv: Sequence[str], requests: int, slow: int, tmp: Path) -> None:
    """Print ping and span figures of one server without and with ``slow`` held bodies."""
    for holding in (0, slow):
        db = tmp / f"{len(os.listdir(tmp))}.db"
        token, instance_id = prepare(db)
        port = free_port()
        env = {**os.environ, DB_ENVIRONMENT_VARIABLE: str(db), BODY_TIMEOUT_VARIABLE: "600"}
        process = start_server([part.format(port=port, db=db) for part in argv], port, env=env)
        held = hold_slow_bodies(port, holding)
        try:
            label = f"{name}, {holding} slow"
            if not answers_ping(port):
                print(f"{label:58} no answer to /ping within 2 s")
                continue
            for method, what in (("GET", "ping"), ("POST", "span")):
                try:
                    rate, p99 = concurrent_rate(port, token, method, instance_id, requests, 4,
                                                f"{what}{holding}")
                except TimeoutError:
                    # The held bodies took every thread: a request waited out the client.
                    print(f"{label + ', ' + what:58} starved: a request waited over 30 s")
                    break
                verdict = "" if not holding else (
                    f"  goal p99 < {GOAL_P99_MS:.0f} ms: "
                    f"{'met' if p99 * 1e3 < GOAL_P99_MS else 'MISSED'}"
                )
                print(f"{label + ', ' + what:58} {rate:7.0f} req/s  p99 {p99 * 1e3:6.1f} ms"
                      f"{verdict}")
        finally:
            for connection in held:
                connection.close()
            stop_server(process)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the measurement; see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--slow", type=int, default=50)
    parser.add_argument("--only", help="measure only the server whose name holds this")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        for name, command in SERVERS.items():
            if args.only is None or args.only in name:
                measure(name, command, args.requests, args.slow, Path(tmp))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
