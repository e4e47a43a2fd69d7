"""Span ingest on PostgreSQL: in-process and over HTTP with 1, 2 and 4 servers, against raw psycopg.

Run: ``python benchmarks/postgres_bench.py [--url postgresql://postgres@127.0.0.1:5432/postgres]
[--spans 1000] [--requests 2000] [--rounds 3]`` (the URL defaults to
``$GOVERNANCE_TEST_POSTGRES_URL``). Each round works in a database of its own, created and
dropped on that server.

The baseline inserts, with psycopg, one row a transaction of the same JSON each span is
(``id``, ``instance``, ``data json``; the instance indexed) into a plain table, from one
connection and from as many connections as the HTTP clients have threads: the ceilings a span
ingest on this server is measured against (each commit waits for the WAL to reach the disk;
concurrent commits share that wait). The library side records the same finished
LLM spans through ``gov.call("agent_spans/create")`` (validation, idempotency, the span and its
run's aggregates, one SERIALIZABLE transaction a span), then in bulk requests of 100. Over
HTTP, ``governance serve --workers 1`` runs in 1, 2 and 4 processes on the one database;
client processes (threads on persistent connections, each writing to a run of its own, spread
over the servers) send ``--requests`` span creates. A create answered ``503`` or ``429``
(``temporarily_unavailable``: a write that still collided after the server's own re-runs, a
busy database) is sent again after its ``Retry-After``, as a client does, up to
:data:`RESENDS` times; its time counts in the rate. Each server count's line tells the answers
that were not ``200``, by status with the first one's body, and whether the spans stored are
the ones answered ``200``. It prints the median of ``--rounds`` rounds of each figure and its
ratio to the baseline. On a 2-core machine the servers, the clients and PostgreSQL share the
cores: the ratio between server counts says how far writes scale here, not on a larger
machine.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit

import psycopg
from ingest_bench import SCHEMA, span_body  # the same spans as the SQLite benchmark
from servers import HOST, free_port, governance_serve, start_server, stop_server

from governance_core.encryption import generate_key
from governance_core.service import Governance
from governance_core.storage import Filter
from governance_http.settings import ENCRYPTION_KEY_VARIABLE

RESENDS = 10
"""How many times a client sends a create again that was answered 503 or 429."""
RETRIED = (429, 503)
"""The statuses a client sends again, after the answer's ``Retry-After``."""


@contextmanager
def scratch_database(server: str) -> Iterator[str]:
    """A new database on ``server``; its URL; dropped afterwards."""
    name = f"governance_bench_{os.getpid()}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(server, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        yield urlunsplit(urlsplit(server)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(server, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


def baseline_rate(url: str, spans: int, connections: int = 1) -> float:
    """Raw psycopg: one row of the same JSON a span, one transaction each.

    The rows are spread over ``connections`` threads with a connection each.
    """
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE TABLE IF NOT EXISTS spans"
                     " (id text PRIMARY KEY, instance text, data json)")
        conn.execute("CREATE INDEX IF NOT EXISTS spans_instance ON spans (instance)")
        conn.execute("TRUNCATE spans")

    def insert(first: int) -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            for number in range(20):  # warm up, untimed
                conn.execute("INSERT INTO spans VALUES (%s, %s, %s)",
                             (f"warm-{first}-{number}", "warm", "{}"))
            ready.wait()
            for number in range(first, spans, connections):
                text = json.dumps(span_body(f"instance-{first}", number))
                conn.execute("INSERT INTO spans VALUES (%s, %s, %s)",
                             (f"span-{number}", f"instance-{first}", text))

    ready = threading.Barrier(connections + 1)
    threads = [threading.Thread(target=insert, args=(n,)) for n in range(connections)]
    for thread in threads:
        thread.start()
    ready.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    return spans / (time.perf_counter() - started)


def prepare(gov: Governance, runs: int) -> tuple[str, list[str]]:
    """Bootstrap an account and register ``runs`` runs; its token and the run ids."""
    token = gov.bootstrap(account_name="Bench", admin_email="bench@example.test").token
    agent = gov.call("agents/create", {"name": "bench"}, token=token)["details"]
    instances = [
        gov.call("agent_instances/register", {
            "agent_id": agent["id"], "agent_version": {"name": "1", "external_identifier": "1"},
            "agent_schema_version": {"external_identifier": "s1", **SCHEMA},
        }, token=token)["details"]["id"]
        for _ in range(runs)
    ]
    return token, instances


def library_rates(url: str, spans: int) -> tuple[float, float]:
    """Spans a second in-process, one request a span and in bulk requests of 100."""
    with Governance.open(url) as gov:
        token, (instance,) = prepare(gov, 1)
        started = time.perf_counter()
        for number in range(spans):
            gov.call("agent_spans/create", span_body(instance, number), token=token)
        single = spans / (time.perf_counter() - started)
        started = time.perf_counter()
        for batch in range(0, spans, 100):
            items = [{"_type": "agent_spans/create", "idempotency_key": f"bench-{batch + i:08d}",
                      **span_body(instance, batch + i)} for i in range(100)]
            gov.call("bulk", {"items": items}, token=token)
        bulk = spans / (time.perf_counter() - started)
    return single, bulk


# -- over HTTP --------------------------------------------------------------------------------
def start_on(url: str) -> tuple[subprocess.Popen[bytes], int]:
    """``governance serve --workers 1`` on ``url``, once it answers ``/ping``; and its port.

    A PostgreSQL store is served only with an encryption key: the server gets a new one.
    """
    port = free_port()
    env = {**os.environ, ENCRYPTION_KEY_VARIABLE: generate_key()}
    return start_server(governance_serve(url, port, "--workers", "1"), port, env=env), port


Tally = tuple[int, int, dict[int, int], dict[int, str]]
"""What clients saw: creates answered 200, creates given up, other answers by status, and the
first body of each such status."""


def drive(job: tuple[list[int], str, list[str], int]) -> Tally:
    """One client process: a thread per run, each on one server; what it saw."""
    ports, token, runs, share = job
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    answered = given_up = 0
    answers: Counter[int] = Counter()
    bodies: dict[int, str] = {}
    lock = threading.Lock()

    def worker(index: int, run: str) -> None:
        nonlocal answered, given_up
        connection = http.client.HTTPConnection(HOST, ports[index % len(ports)], timeout=60)
        for number in range(share):
            body = json.dumps({"details": span_body(run, number)})
            for attempt in range(RESENDS + 1):
                connection.request("POST", "/api/v1/agent_spans", body=body, headers=headers)
                response = connection.getresponse()
                answer = response.read()
                if response.status == 200:
                    with lock:
                        answered += 1
                    break
                with lock:
                    answers[response.status] += 1
                    bodies.setdefault(response.status, answer.decode(errors="replace"))
                if response.status not in RETRIED or attempt == RESENDS:
                    with lock:
                        given_up += 1
                    break
                time.sleep(float(response.getheader("Retry-After") or "1"))

    threads = [threading.Thread(target=worker, args=(i, run)) for i, run in enumerate(runs)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return answered, given_up, dict(answers), bodies


def report(servers: int, tallies: Sequence[Tally], spans: int) -> None:
    """Print the answers that were not 200 and ``spans`` beside the creates answered 200.

    An answer other than 200 stores nothing, so the two are equal.
    """
    answered = sum(tally[0] for tally in tallies)
    given_up = sum(tally[1] for tally in tallies)
    answers: Counter[int] = Counter()
    bodies: dict[int, str] = {}
    for tally in tallies:
        answers.update(tally[2])
        for status, body in tally[3].items():
            bodies.setdefault(status, body)
    name = f"{servers} server process{'es' if servers > 1 else ''}"
    for status, count in sorted(answers.items()):
        again = "sent again after Retry-After" if status in RETRIED else "not sent again"
        print(f"  {name}: {count} answers {status} ({again}), the first: {bodies[status][:200]}")
    lost = f", {given_up} given up" if given_up else ""
    print(f"  {name}: {answered} creates answered 200{lost}, {spans} spans stored")


def http_rate(url: str, servers: int, requests: int, clients: int, threads: int) -> float:
    """Span creates a second through ``servers`` server processes."""
    with Governance.open(url) as gov:
        token, runs = prepare(gov, clients * threads)
    started = [start_on(url) for _ in range(servers)]
    ports = [port for _, port in started]
    try:
        share = requests // (clients * threads)
        jobs = [
            ([*ports[c:], *ports[:c]], token, runs[c * threads:(c + 1) * threads], share)
            for c in range(clients)
        ]
        with multiprocessing.get_context("spawn").Pool(clients) as pool:
            warm = pool.map(drive, [(ports, token, runs[:threads], 20)] * clients)  # untimed
            began = time.perf_counter()
            results = pool.map(drive, jobs)
            elapsed = time.perf_counter() - began
    finally:
        for process, _ in started:
            stop_server(process)
    with Governance.open(url) as gov:
        # The runs' alert spans (a run's risk turning critical) are the server's, not sent.
        spans = gov.store.count("agent_spans", [
            Filter("agent_instance_id", "in", runs), Filter("purpose", "eq", "activity"),
        ])
    report(servers, [*warm, *results], spans)
    return sum(answered for answered, *_ in results) / elapsed


def main(argv: Sequence[str] | None = None) -> int:
    """Measure ``--rounds`` times; print the medians and their ratios to the baseline."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default=os.environ.get("GOVERNANCE_TEST_POSTGRES_URL"))
    parser.add_argument("--spans", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    if not args.url:
        print("skipped: give --url or set GOVERNANCE_TEST_POSTGRES_URL to a PostgreSQL server")
        return 0
    figures: dict[str, list[float]] = {}
    for _ in range(args.rounds):
        measured: dict[str, float] = {}
        with scratch_database(args.url) as url:
            measured["raw psycopg, 1 row a transaction"] = baseline_rate(url, args.spans)
            measured[f"raw psycopg, {args.clients * args.threads} connections"] = baseline_rate(
                url, args.requests, args.clients * args.threads
            )
        with scratch_database(args.url) as url:
            single, bulk = library_rates(url, args.spans)
        measured["library, 1 span a request"] = single
        measured["library, bulk of 100 spans a request"] = bulk
        for servers in (1, 2, 4):
            with scratch_database(args.url) as url:
                rate = http_rate(url, servers, args.requests, args.clients, args.threads)
            measured[f"HTTP, {servers} server process{'es' if servers > 1 else ''}"] = rate
        for name, rate in measured.items():
            figures.setdefault(name, []).append(rate)
    baseline = statistics.median(figures["raw psycopg, 1 row a transaction"])
    print(f"median of {args.rounds} rounds; {args.spans} spans in-process; {args.requests} HTTP "
          f"span creates from {args.clients} processes x {args.threads} threads, a run each")
    for name, rates in figures.items():
        rate = statistics.median(rates)
        print(f"{name:40} {rate:8.0f} spans/s  ratio {rate / baseline:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
