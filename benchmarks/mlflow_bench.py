"""OTLP trace ingest: this server against MLflow's, the same traces sent by the real exporter.

Run: ``python benchmarks/mlflow_bench.py [--traces 200] [--rounds 3] [--mlflow PATH]``.

The spans are made once with the OpenTelemetry SDK: ``--traces`` GenAI traces of 10 spans (an
agent invocation over six chat calls with token usage and messages, and three tool calls)
and one trace of 2,000 spans. Each round starts a fresh store on each server and sends them
with the SDK's ``OTLPSpanExporter`` (OTLP/HTTP protobuf) in exports of 512 spans (the batch
processor's default), waiting for each answer:

- this project: ``governance serve`` on a SQLite file (one worker);
- MLflow: ``mlflow server`` on a SQLite file (one worker), into one experiment
  (``x-mlflow-experiment-id``); ``--mlflow`` names its executable (default: ``mlflow`` on
  the PATH, else in ``$GOVERNANCE_BENCH_MLFLOW_VENV/bin``). Without one, MLflow's side is
  skipped with a message.

Rounds alternate the servers. For each it prints spans a second (wall time of the exports)
and the server's CPU time per span (user and system time of the server's processes, read
from ``/proc`` once the server has gone idle after the last export, so work done after an
answer counts too), then the medians and the ratios against the goals: CPU per span at most
0.3 of MLflow's and throughput at least 3 times MLflow's.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from servers import HOST, cpu_seconds, free_port, governance_serve, start_server, stop_server

from governance_core.service import Governance

EXPORT_SPANS = 512
CPU_GOAL = 0.3
RATE_GOAL = 3.0


def make_traces(count: int, per_trace: int) -> list[ReadableSpan]:
    """``count`` GenAI traces of ``per_trace`` spans, in the order the SDK ends them."""
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({
        "service.name": "orders-agent", "service.version": "1.0.0",
    }))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    tracer = provider.get_tracer("bench")
    for trace in range(count):
        with tracer.start_as_current_span("invoke_agent orders", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orders",
        }):
            for step in range(per_trace - 1):
                if step % 3 == 2:
                    with tracer.start_as_current_span("execute_tool lookup", attributes={
                        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup",
                        "gen_ai.tool.call.arguments": json.dumps({"order": trace * 100 + step}),
                    }):
                        pass
                    continue
                with tracer.start_as_current_span("chat gpt-4o-mini", kind=SpanKind.CLIENT,
                                                  attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.provider.name": "openai", "gen_ai.usage.input_tokens": 812,
                    "gen_ai.usage.output_tokens": 164,
                    "gen_ai.input.messages": json.dumps(
                        [{"role": "user", "content": f"Where is order {trace}-{step}?"}]
                    ),
                }):
                    pass
    provider.shutdown()
    return list(memory.get_finished_spans())


def exports(spans: list[ReadableSpan]) -> list[list[ReadableSpan]]:
    """The spans cut into exports of :data:`EXPORT_SPANS`, as the batch processor sends them."""
    return [spans[start:start + EXPORT_SPANS] for start in range(0, len(spans), EXPORT_SPANS)]


def idle_cpu(group: int, quiet_s: float = 0.5) -> float:
    """The session's CPU seconds once they stop growing for ``quiet_s``."""
    last = cpu_seconds(group)
    while True:
        time.sleep(quiet_s)
        now = cpu_seconds(group)
        if now - last < 0.02:
            return now
        last = now


def send(endpoint: str, headers: dict[str, str], batches: list[list[ReadableSpan]]) -> float:
    """Seconds to export every batch with the SDK's exporter; each must succeed."""
    exporter = OTLPSpanExporter(endpoint=endpoint, headers=headers, timeout=120)
    started = time.perf_counter()
    for batch in batches:
        if exporter.export(batch) is not SpanExportResult.SUCCESS:
            raise SystemExit(f"{endpoint} refused an export")
    elapsed = time.perf_counter() - started
    exporter.shutdown()
    return elapsed


class Ours:
    """``governance serve`` on a fresh SQLite file."""

    name = "this project (SQLite)"

    def __init__(self, folder: Path) -> None:
        db = folder / "governance.db"
        with Governance.open(db) as gov:
            self.token = gov.bootstrap(account_name="Bench", admin_email="b@example.test").token
        self.port = free_port()
        self.process = start_server(governance_serve(str(db), self.port, "--workers", "1"),
                                    self.port)

    def target(self) -> tuple[str, dict[str, str]]:
        """The OTLP endpoint and headers."""
        return (f"http://{HOST}:{self.port}/v1/traces",
                {"Authorization": f"Bearer {self.token}"})

    def stop(self) -> None:
        """Stop the server."""
        stop_server(self.process)


class MLflow:
    """``mlflow server`` on a fresh SQLite file, with one experiment."""

    name = "MLflow (SQLite)"

    def __init__(self, folder: Path, executable: str) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [executable, "server", "--host", HOST, "--port", str(self.port), "--workers", "1",
             "--backend-store-uri", f"sqlite:///{folder / 'mlflow.db'}",
             "--default-artifact-root", str(folder / "artifacts")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        )
        deadline = time.monotonic() + 120
        while True:
            try:
                self.experiment = self._call("POST", "/api/2.0/mlflow/experiments/create",
                                             {"name": "bench"})["experiment_id"]
                break
            except (OSError, KeyError, ValueError):
                if time.monotonic() > deadline or self.process.poll() is not None:
                    stop_server(self.process)
                    raise SystemExit("mlflow server did not start") from None
                time.sleep(0.5)

    def _call(self, method: str, path: str, body: dict[str, Any]) -> dict[str, Any]:
        connection = http.client.HTTPConnection(HOST, self.port, timeout=10)
        connection.request(method, path, json.dumps(body),
                           {"Content-Type": "application/json"})
        answer: dict[str, Any] = json.loads(connection.getresponse().read())
        return answer

    def target(self) -> tuple[str, dict[str, str]]:
        """The OTLP endpoint and headers."""
        return (f"http://{HOST}:{self.port}/v1/traces",
                {"x-mlflow-experiment-id": str(self.experiment)})

    def stop(self) -> None:
        """Stop the server."""
        stop_server(self.process)


def measure(server: Ours | MLflow, batches: list[list[ReadableSpan]]) -> tuple[float, float]:
    """Spans a second and server CPU milliseconds a span, for one server and workload."""
    spans = sum(len(batch) for batch in batches)
    group = server.process.pid
    endpoint, headers = server.target()
    before = idle_cpu(group)
    elapsed = send(endpoint, headers, batches)
    used = idle_cpu(group) - before
    return spans / elapsed, used / spans * 1000


def find_mlflow(given: str | None) -> str | None:
    """The ``mlflow`` executable to run, or None."""
    if given:
        return given
    found = shutil.which("mlflow")
    venv = os.environ.get("GOVERNANCE_BENCH_MLFLOW_VENV")
    if found is None and venv and (Path(venv) / "bin" / "mlflow").exists():
        found = str(Path(venv) / "bin" / "mlflow")
    return found


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=int, default=200, help="10-span traces a round")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--mlflow", help="the mlflow executable (default: found on PATH)")
    args = parser.parse_args()
    mlflow = find_mlflow(args.mlflow)
    if mlflow is None:
        print("MLflow is not installed (pip install mlflow, or --mlflow PATH): "
              "its side is skipped")
    workloads = {
        f"{args.traces} traces of 10 spans": exports(make_traces(args.traces, 10)),
        "one trace of 2,000 spans": exports(make_traces(1, 2000)),
    }
    figures: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for round_number in range(1, args.rounds + 1):
        for workload, batches in workloads.items():
            kinds: list[Any] = [Ours] if mlflow is None else [Ours, MLflow]
            if round_number % 2 == 0:
                kinds.reverse()
            for kind in kinds:
                with tempfile.TemporaryDirectory() as folder:
                    server = kind(Path(folder)) if kind is Ours else kind(Path(folder), mlflow)
                    try:
                        rate, cpu = measure(server, batches)
                    finally:
                        server.stop()
                figures.setdefault((workload, server.name), []).append((rate, cpu))
                print(f"round {round_number}, {workload}, {server.name}: {rate:,.0f} spans/s, "
                      f"{cpu:.3f} CPU ms a span")
    for workload in workloads:
        ours = figures[(workload, Ours.name)]
        rate, cpu = statistics.median(f[0] for f in ours), statistics.median(f[1] for f in ours)
        print(f"\n{workload}: this project {rate:,.0f} spans/s, {cpu:.3f} CPU ms a span")
        if mlflow is None:
            continue
        theirs = figures[(workload, MLflow.name)]
        their_rate = statistics.median(f[0] for f in theirs)
        their_cpu = statistics.median(f[1] for f in theirs)
        print(f"{workload}: MLflow {their_rate:,.0f} spans/s, {their_cpu:.3f} CPU ms a span")
        print(f"  CPU a span, ours / MLflow's: {cpu / their_cpu:.2f} (goal <= {CPU_GOAL})")
        print(f"  throughput, ours / MLflow's: {rate / their_rate:.2f} (goal >= {RATE_GOAL})")


if __name__ == "__main__":
    main()
