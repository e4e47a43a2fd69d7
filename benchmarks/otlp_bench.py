"""OTLP trace ingest against the same server's bulk endpoint recording the same spans.

Run: ``python benchmarks/otlp_bench.py [--batches 8] [--rounds 3]``.

A real ``governance serve`` (one worker) is started on a loopback port over a fresh SQLite
store. The spans are made once with the OpenTelemetry SDK: traces of 512 spans (the batch
processor's default batch size), an agent span over chat calls with token usage and
messages (sensitive values) and tool calls. Each round sends fresh traces both ways over one
kept-alive connection:

- OTLP: one ``POST /v1/traces`` of protobuf per trace, as the SDK's exporter encodes it;
- bulk: one ``POST /api/v1/bulk`` per trace holding the run's registration, the same 512
  spans as ``agent_spans/create`` items (the members the mapping makes) and the finish.

Bodies are encoded before the clock starts, so the figures are the server's. It prints spans
per second each way per round, and the median ratio OTLP / bulk.
"""

from __future__ import annotations

import argparse
import http.client
import json
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from servers import HOST, free_port, governance_serve, start_server, stop_server

from governance_core.ids import IdFactory, extract_partition
from governance_core.otel import MappingSettings
from governance_core.otel.exporter import from_readable_span
from governance_core.otel.mapping import (
    agent_version_member,
    derived_span_id,
    group_spans,
    is_root,
    run_status,
    span_members,
    timestamp,
)
from governance_core.service import Governance

BATCH = 512


def make_traces(count: int, service: str) -> list[list[ReadableSpan]]:
    """``count`` traces of :data:`BATCH` spans each, every span of a trace in one list."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": service}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    traces = []
    for _ in range(count):
        with tracer.start_as_current_span("invoke_agent", attributes={
            "gen_ai.operation.name": "invoke_agent",
        }):
            for step in range(BATCH - 1):
                if step % 3 == 2:
                    attributes: dict[str, Any] = {
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                        "gen_ai.tool.call.arguments": f'{{"order": {step}}}',
                    }
                else:
                    attributes = {
                        "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                        "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 812,
                        "gen_ai.usage.output_tokens": 164,
                        "gen_ai.input.messages": f'[{{"role": "user", "content": "q{step}"}}]',
                    }
                with tracer.start_as_current_span(f"step {step}", attributes=attributes):
                    pass
        traces.append(memory.get_finished_spans())
        memory.clear()
    provider.shutdown()
    return [list(spans) for spans in traces]


def otlp_body(spans: list[ReadableSpan]) -> bytes:
    """The protobuf body the SDK's OTLP/HTTP exporter sends for ``spans``."""
    body: bytes = encode_spans(spans).SerializeToString()
    return body


def bulk_body(spans: list[ReadableSpan], agent_id: str, partition: int, ids: IdFactory) -> bytes:
    """A bulk request recording ``spans`` as the mapping would: register, spans, finish."""
    settings = MappingSettings()
    [group], _ = group_spans([from_readable_span(span) for span in spans])
    run_id = ids.new(partition, datetime.now(UTC))
    items: list[dict[str, Any]] = [{
        "_type": "agent_instances/register", "idempotency_key": f"reg-{run_id}", "id": run_id,
        "agent_id": agent_id, "external_identifier": group.trace_id,
        **agent_version_member(group.target, declare=True),
    }]
    root = None
    for span in group.spans:
        span_id = derived_span_id(run_id, span.trace_id, span.span_id)
        parent = None if is_root(span) else derived_span_id(
            run_id, span.trace_id, span.parent_span_id)
        members = span_members(span, span_id=span_id, parent_id=parent, settings=settings)
        items.append({"_type": "agent_spans/create", "idempotency_key": f"otel-{span_id}",
                      "agent_instance_id": run_id, **members})
        root = span if is_root(span) else root
    assert root is not None
    items.append({"_type": "agent_instances/finish", "idempotency_key": f"fin-{run_id}",
                  "agent_instance_id": run_id, "status": run_status(root),
                  "timestamp": timestamp(root.end_time_unix_nano)})
    return json.dumps({"items": items}).encode()


def start(db: Path, port: int) -> subprocess.Popen[bytes]:
    """``governance serve`` on ``port``, answering ``/ping``."""
    return start_server(governance_serve(str(db), port, "--workers", "1"), port)


def send(port: int, path: str, bodies: list[bytes], token: str, content_type: str) -> float:
    """Seconds to POST every body in turn over one connection; every answer must be 200."""
    connection = http.client.HTTPConnection(HOST, port, timeout=120)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": content_type}
    started = time.perf_counter()
    for body in bodies:
        connection.request("POST", path, body, headers)
        response = connection.getresponse()
        answer = response.read()
        if response.status != 200:
            raise SystemExit(f"{path} answered {response.status}: {answer[:300]!r}")
    elapsed = time.perf_counter() - started
    connection.close()
    return elapsed


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=8, help="traces of 512 spans a round")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        db = Path(folder) / "bench.db"
        with Governance.open(db) as gov:
            made = gov.bootstrap(account_name="Bench", admin_email="bench@example.test")
            session = gov.session(made.token)
            agent = session.details("agents/create", name="bulk", external_identifier="bulk")
        partition = extract_partition(made.account_id)
        ids = IdFactory()
        warmup = make_traces(1, "bench")
        port = free_port()
        process = start(db, port)
        try:
            send(port, "/v1/traces", [otlp_body(warmup[0])], made.token,
                 "application/x-protobuf")
            ratios = []
            for round_number in range(1, args.rounds + 1):
                otlp = [otlp_body(t) for t in make_traces(args.batches, "bench")]
                bulk = [bulk_body(t, agent["id"], partition, ids)
                        for t in make_traces(args.batches, "bulk")]
                spans = args.batches * BATCH
                otlp_rate = spans / send(port, "/v1/traces", otlp, made.token,
                                         "application/x-protobuf")
                bulk_rate = spans / send(port, "/api/v1/bulk", bulk, made.token,
                                         "application/json")
                ratios.append(otlp_rate / bulk_rate)
                print(f"round {round_number}: OTLP {otlp_rate:7.0f} spans/s   "
                      f"bulk {bulk_rate:7.0f} spans/s   ratio {otlp_rate / bulk_rate:.2f}")
        finally:
            stop_server(process)
    print(f"OTLP/HTTP protobuf, {BATCH} spans a request, against bulk of the same spans: "
          f"median ratio {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
