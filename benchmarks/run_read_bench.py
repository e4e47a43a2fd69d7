"""Reading a whole run over HTTP: one JSON Lines request against the span list's pages.

Builds, in a SQLite file, one run of ``--spans`` spans (each with a small payload and a
result that reports token usage, as model calls do), serves the store with ``governance
serve`` and reads the run whole, ``--rounds`` times each way, over one kept-alive connection:

- ``GET /api/v1/agent_instance/{id}/export.jsonl``: the run and every span, one request;
- ``GET /api/v1/agent_instance/{id}/export?page_size=1000`` and its ``next_cursor`` pages;
- the run (``GET /api/v1/agent_instance/{id}``) and ``GET /api/v1/agent_spans`` pages of 100
  in start order, as clients read a run before the export existed.

Each way is checked to read every span. It prints the median time of each, the number of
requests and bytes read, and the JSON Lines read beside its goal (a 2,000-span run in 0.1 s or
less).
Usage: ``PYTHONPATH=. python benchmarks/run_read_bench.py [--spans 2000] [--rounds 7]``.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from servers import HOST, free_port, governance_serve, start_server, stop_server

from governance_core.clock import format_timestamp
from governance_core.service import Governance

GOAL_S = 0.100
"""The goal: a 2,000-span run read whole over HTTP in 0.1 s or less."""

SCHEMA = {
    "external_identifier": "bench-schema",
    "span_type_schemas": [{"name": "llm", "params_schema": {"type": "object"},
                           "template": "{{ prompt }}"}],
}


def build_run(db: Path, spans: int) -> tuple[str, str]:
    """Write a run of ``spans`` spans into a new store at ``db``; its id and a token."""
    gov = Governance.open(db)
    boot = gov.bootstrap()
    session = gov.session(boot.token)
    agent = session.details("agents/create", {"name": "bench agent"})
    run = session.details("agent_instances/register", {
        "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    start = gov.clock() - timedelta(hours=1)
    with gov.transaction():
        for index in range(spans):
            at = start + timedelta(milliseconds=index * 20)
            session.call("agent_spans/create", {
                "agent_instance_id": run["id"], "schema_name": "llm", "status": "complete",
                "started_at": format_timestamp(at),
                "finished_at": format_timestamp(at + timedelta(milliseconds=15)),
                "payload": {"model": "gpt-4o-mini", "prompt": f"call {index}"},
                "result_payload": {"text": "ok",
                                   "usage": {"input_tokens": 120, "output_tokens": 30}},
            })
    gov.close()
    return str(run["id"]), boot.token


class Client:
    """GET requests over one kept-alive connection, counted."""

    def __init__(self, port: int, token: str) -> None:
        self.connection = http.client.HTTPConnection(HOST, port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}"}
        self.requests = 0
        self.received = 0

    def get(self, path: str, **query: Any) -> bytes:
        """The body of a 200 answer to ``path`` with ``query``."""
        target = f"/api/v1{path}" + (f"?{urlencode(query)}" if query else "")
        self.connection.request("GET", target, headers=self.headers)
        answer = self.connection.getresponse()
        body = answer.read()
        self.requests += 1
        self.received += len(body)
        assert answer.status == 200, (target, answer.status, body[:200])
        return body


def whole(client: Client, run_id: str) -> int:
    """Read the run as JSON Lines; the number of spans read."""
    lines = client.get(f"/agent_instance/{run_id}/export.jsonl").splitlines()
    assert json.loads(lines[0])["id"] == run_id
    return len(lines) - 1


def export_pages(client: Client, run_id: str) -> int:
    """Read the run's export pages of 1,000 spans; the number of spans read."""
    read, query = 0, {"page_size": 1000}
    while True:
        page = json.loads(client.get(f"/agent_instance/{run_id}/export", **query))
        read += len(page["spans"])
        if page["next_cursor"] is None:
            return read
        query = {"page_size": 1000, "cursor": page["next_cursor"]}


def list_pages(client: Client, run_id: str) -> int:
    """Read the run, then its spans in list pages of 100; the number of spans read."""
    client.get(f"/agent_instance/{run_id}")
    read = 0
    while True:
        page = json.loads(client.get(
            "/agent_spans", agent_instance_id=run_id, sorting="started_at",
            **{"pagination[page_size]": 100, "pagination[offset]": read},
        ))
        read += len(page["summaries"])
        if page["pagination"]["next_page_offset"] is None:
            return read


def timed(
    client: Client, run_id: str, read: Callable[[Client, str], int], rounds: int, spans: int
) -> tuple[float, int, int]:
    """Median seconds of ``rounds`` reads (after one untimed), requests and bytes per read."""
    assert read(client, run_id) == spans
    samples = []
    requests, received = client.requests, client.received
    for _ in range(rounds):
        began = time.perf_counter()
        assert read(client, run_id) == spans
        samples.append(time.perf_counter() - began)
    return (statistics.median(samples), (client.requests - requests) // rounds,
            (client.received - received) // rounds)


def main() -> None:
    """Build the run, serve it, time each way of reading it, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        run_id, token = build_run(db, args.spans)
        port = free_port()
        server = start_server(governance_serve(str(db), port), port)
        try:
            client = Client(port, token)
            ways = [
                ("JSON Lines, one request", whole),
                ("export pages of 1,000", export_pages),
                ("span list pages of 100", list_pages),
            ]
            results = {name: timed(client, run_id, read, args.rounds, args.spans)
                       for name, read in ways}
        finally:
            stop_server(server)
    print(f"reading a run of {args.spans:,} spans over HTTP, median of {args.rounds} rounds:")
    for name, (seconds, requests, received) in results.items():
        print(f"  {name:26s} {seconds * 1000:8.1f} ms  {requests:3d} requests  "
              f"{received / 1e6:6.2f} MB")
    lines_s = results["JSON Lines, one request"][0]
    paged_s = results["span list pages of 100"][0]
    print(f"JSON Lines: {lines_s * 1000:.1f} ms against the goal of {GOAL_S * 1000:.0f} ms "
          f"(ratio {lines_s / GOAL_S:.2f}); {paged_s / lines_s:.1f}x faster than list pages")


if __name__ == "__main__":
    main()
