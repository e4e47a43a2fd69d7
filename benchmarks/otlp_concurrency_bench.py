"""Another client's waits while one large OTLP export is ingested.

Run: ``python benchmarks/otlp_concurrency_bench.py [--spans 50000] [--trace-spans 500]``.

Two ``governance serve`` processes (one worker each, as ``--workers 2`` makes them) share a
fresh SQLite store. One receives a single OTLP/HTTP export of ``--spans`` spans in binary
protobuf (traces of ``--trace-spans`` spans: an agent span over bare steps, one in ten a chat call
with token usage),
sent again as an exporter does while it answers ``503`` (``Retry-After`` honoured). The
other meanwhile serves a second client on one kept-alive connection, alternating
``GET /api/v1/ping`` and a single-span ``POST /api/v1/agent_spans``, until the export is
answered ``200``. The same client's latencies with no export running come first, for
comparison on a loaded machine.

It prints that client's p50, p99 and longest wait beside the goal (no write waits more
than about 100 ms for the export), how many of its requests failed, and the export's total
time and attempts.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2
from servers import HOST, free_port, governance_serve, start_server, stop_server

from governance_core.service import Governance

GOAL_S = 0.100
MAX_ATTEMPTS = 200
CLIENT_LIMIT_S = 900.0


def _attribute(key: str, value: str | int) -> common_pb2.KeyValue:
    if isinstance(value, str):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))


def export_body(spans: int, trace_spans: int) -> bytes:
    """One ``ExportTraceServiceRequest`` of ``spans`` spans, traces of ``trace_spans``."""
    now = time.time_ns()
    scope = trace_pb2.ScopeSpans()
    scope.scope.name = "bench"
    made = 0
    trace = 0
    while made < spans:
        trace += 1
        trace_id = trace.to_bytes(16, "big")
        root_id = (trace << 20).to_bytes(8, "big")
        count = min(trace_spans, spans - made)
        scope.spans.append(trace_pb2.Span(
            trace_id=trace_id, span_id=root_id, name="invoke_agent bench",
            start_time_unix_nano=now, end_time_unix_nano=now + count * 1_000_000,
            attributes=[_attribute("gen_ai.operation.name", "invoke_agent")],
        ))
        for step in range(1, count):
            # One span in ten is a chat call with usage; the others bare steps (as the
            # exports that prompted this measure were: about 56 bytes a span).
            chat = step % 10 == 0
            scope.spans.append(trace_pb2.Span(
                trace_id=trace_id, span_id=((trace << 20) + step).to_bytes(8, "big"),
                parent_span_id=root_id, name="chat" if chat else "step",
                start_time_unix_nano=now + step * 1_000_000,
                end_time_unix_nano=now + step * 1_000_000 + 900_000,
                attributes=[
                    _attribute("gen_ai.operation.name", "chat"),
                    _attribute("gen_ai.request.model", "gpt-4o-mini"),
                    _attribute("gen_ai.usage.input_tokens", 812),
                    _attribute("gen_ai.usage.output_tokens", 164),
                ] if chat else [],
            ))
        made += count
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(
            resource=resource_pb2.Resource(attributes=[_attribute("service.name", "bench")]),
            scope_spans=[scope],
        ),
    ])
    body: bytes = request.SerializeToString()
    return body


def prepare(db: Path) -> tuple[str, str]:
    """Bootstrap the store and register the second client's run; its token and run id."""
    with Governance.open(db) as gov:
        made = gov.bootstrap(account_name="Bench", admin_email="bench@example.test")
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


class Client:
    """The second client: pings and span creates on one connection, each timed."""

    def __init__(self, port: int, token: str, instance_id: str, label: str) -> None:
        self.connection = http.client.HTTPConnection(HOST, port, timeout=60)
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        self.instance_id = instance_id
        self.label = label
        self.waits: list[float] = []
        self.failures: dict[int, int] = {}

    def one(self, number: int) -> None:
        """Send request ``number``: even numbers ping, odd ones create a span."""
        body = None
        method, target = "GET", "/api/v1/ping"
        if number % 2:
            method, target = "POST", "/api/v1/agent_spans"
            body = json.dumps({
                "agent_instance_id": self.instance_id, "schema_name": "bench:llm",
                "status": "complete", "started_at": "2026-11-21T16:41:59Z",
                "finished_at": "2026-11-21T16:42:00Z", "payload": {"prompt": f"q{number}"},
                "idempotency_key": f"{self.label}-{number:08d}",
            })
        began = time.perf_counter()
        try:
            self.connection.request(method, target, body=body, headers=self.headers)
            response = self.connection.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException):
            status = 0
            self.connection.close()
        self.waits.append(time.perf_counter() - began)
        if status != 200:
            self.failures[status] = self.failures.get(status, 0) + 1

    def run(self, count: int | None = None, until: threading.Event | None = None) -> None:
        """``count`` requests, or requests until ``until`` is set (at most CLIENT_LIMIT_S)."""
        stop = time.monotonic() + CLIENT_LIMIT_S
        number = 0
        while (count is None or number < count) and time.monotonic() < stop:
            if until is not None and until.is_set():
                break
            self.one(number)
            number += 1
        self.connection.close()


def send_export(port: int, token: str, body: bytes) -> tuple[float, list[str]]:
    """POST the export until it is answered 200; total seconds and each attempt's outcome."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/x-protobuf"}
    outcomes = []
    started = time.perf_counter()
    for _ in range(MAX_ATTEMPTS):
        connection = http.client.HTTPConnection(HOST, port, timeout=CLIENT_LIMIT_S)
        attempt = time.perf_counter()
        connection.request("POST", "/v1/traces", body, headers)
        response = connection.getresponse()
        answer = response.read()
        connection.close()
        took = time.perf_counter() - attempt
        if response.status == 200:
            outcomes.append(f"200 in {took:.1f} s")
            return time.perf_counter() - started, outcomes
        if response.status != 503:
            raise SystemExit(f"the export answered {response.status}: {answer[:300]!r}")
        outcomes.append(f"503 in {took:.1f} s")
        time.sleep(float(response.getheader("Retry-After") or "1"))
    raise SystemExit(f"the export was not stored after {MAX_ATTEMPTS} attempts")


def summary(waits: list[float]) -> dict[str, float]:
    """p50, p99 and the longest of ``waits``, in milliseconds."""
    ordered = sorted(waits)
    return {
        "p50": statistics.median(ordered) * 1000,
        "p99": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000,
        "max": ordered[-1] * 1000,
    }


def count_spans(db: Path, token: str) -> int:
    """The spans stored in the export's runs (every run but the second client's)."""
    with Governance.open(db) as gov:
        session = gov.session(token)
        runs: list[dict[str, Any]] = []
        offset: int | None = 0
        while offset is not None:
            page = session.call("agent_instances/list", {
                "pagination": {"offset": offset, "page_size": 100},
            })
            runs += page["summaries"]
            offset = page["pagination"]["next_page_offset"]
        return sum(
            run["span_counts"]["total"] for run in runs if run.get("external_identifier")
        )


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000, help="spans in the one export")
    parser.add_argument("--trace-spans", type=int, default=500, help="spans a trace")
    parser.add_argument("--baseline", type=int, default=300, help="requests with no export")
    args = parser.parse_args()
    body = export_body(args.spans, args.trace_spans)
    print(f"one export of {args.spans} spans (traces of {args.trace_spans}), "
          f"{len(body) / 1e6:.1f} MB of protobuf")
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        token, instance_id = prepare(db)
        ports = free_port(), free_port()
        servers = [start_server(governance_serve(str(db), port, "--workers", "1"), port)
                   for port in ports]
        try:
            baseline = Client(ports[1], token, instance_id, "baseline")
            baseline.run(count=args.baseline)
            during = Client(ports[1], token, instance_id, "during")
            done = threading.Event()
            client = threading.Thread(target=during.run, kwargs={"until": done})
            client.start()
            try:
                total, outcomes = send_export(ports[0], token, body)
            finally:
                done.set()
                client.join()
        finally:
            for process in servers:
                stop_server(process)
        stored = count_spans(db, token)
    quiet, busy = summary(baseline.waits), summary(during.waits)
    print(f"export: {total:.1f} s in {len(outcomes)} attempt(s) ({', '.join(outcomes)}); "
          f"{stored} of {args.spans} spans stored, {args.spans / total:.0f} spans/s")
    print(f"second client, no export:     p50 {quiet['p50']:7.1f} ms  p99 {quiet['p99']:7.1f} ms"
          f"  longest {quiet['max']:7.1f} ms  ({len(baseline.waits)} requests)")
    print(f"second client, during export: p50 {busy['p50']:7.1f} ms  p99 {busy['p99']:7.1f} ms"
          f"  longest {busy['max']:7.1f} ms  ({len(during.waits)} requests, "
          f"failed: {during.failures or 'none'})")
    print(f"goal: no wait over ~{GOAL_S * 1000:.0f} ms for the export: p99 "
          f"{'meets' if busy['p99'] <= GOAL_S * 1000 else 'misses'} it "
          f"(ratio {busy['p99'] / (GOAL_S * 1000):.2f}), longest "
          f"{'meets' if busy['max'] <= GOAL_S * 1000 else 'misses'} it "
          f"(ratio {busy['max'] / (GOAL_S * 1000):.2f})")


if __name__ == "__main__":
    main()
