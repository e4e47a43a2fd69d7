"""Traces the OTel tests record: a GenAI agent trace and a LangChain run, and reading runs back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from typing import Any

from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, Status, StatusCode

from governance_core.service import Governance, Session

MODEL = "gpt-4o-mini"
RESOURCE = {"service.name": "order-agent", "service.version": "2.1.0",
            "deployment.environment.name": "staging"}
CHAT_USAGE = ({"input": 1200, "output": 300, "cached": 200}, {"input": 900, "output": 120})


class Batches(SpanExporter):
    """Keeps every exported batch (to re-send it) and passes it on to ``forward``."""

    def __init__(self, forward: SpanExporter | None = None) -> None:
        self.forward = forward
        self.batches: list[list[ReadableSpan]] = []

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        self.batches.append(list(spans))
        return SpanExportResult.SUCCESS if self.forward is None else self.forward.export(spans)


def provider_for(exporter: SpanExporter, resource: dict[str, Any] | None = None) -> TracerProvider:
    provider = TracerProvider(resource=Resource.create(resource or RESOURCE))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider


def record_agent_trace(provider: TracerProvider, *, failed: bool = False) -> None:
    """An agent invocation with two chat calls and a failed tool call between them.

    Each span is exported when it ends (children before their parent), so the trace arrives
    over four exports and the root, which ends the run, comes last.
    """
    tracer = provider.get_tracer("tests.otel", "1.0")
    agent_attributes = {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orders"}
    with tracer.start_as_current_span("invoke_agent orders", attributes=agent_attributes) as agent:
        first, second = CHAT_USAGE
        with tracer.start_as_current_span("chat " + MODEL, kind=SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": first["input"],
            "gen_ai.usage.output_tokens": first["output"],
            "gen_ai.usage.cache_read.input_tokens": first["cached"],
            "gen_ai.input.messages": '[{"role": "user", "content": "Where is order 42?"}]',
        }) as chat:
            chat.add_event("gen_ai.evaluation.result", {
                "gen_ai.evaluation.name": "relevance", "gen_ai.evaluation.score.value": 0.75,
                "gen_ai.evaluation.score.label": "relevant",
            })
        with tracer.start_as_current_span("execute_tool lookup_order", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup_order",
            "gen_ai.tool.call.arguments": '{"order": 42}',
        }) as tool:
            tool.set_status(Status(StatusCode.ERROR, "order service timed out"))
        with tracer.start_as_current_span("chat " + MODEL, kind=SpanKind.CLIENT, attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": MODEL,
            "gen_ai.provider.name": "openai",
            "gen_ai.usage.input_tokens": second["input"],
            "gen_ai.usage.output_tokens": second["output"],
        }):
            pass
        if failed:
            agent.set_status(Status(StatusCode.ERROR, "gave up"))


def expected_cost(gov: Governance) -> dict[str, Any]:
    """Tokens and cost of :func:`record_agent_trace`, priced from the packaged catalogue."""
    price = gov.config.pricing.lookup(MODEL, "openai")
    assert price is not None and price.input_cost_per_token is not None
    first, second = CHAT_USAGE
    uncached = first["input"] - first["cached"] + second["input"]
    output = first["output"] + second["output"]
    cache_read = first["cached"]
    assert price.output_cost_per_token is not None
    assert price.cache_read_input_token_cost is not None
    total = (
        uncached * price.input_cost_per_token + output * price.output_cost_per_token
        + cache_read * price.cache_read_input_token_cost
    )
    return {"input": uncached, "output": output, "cache_read": cache_read, "total_cost": total}


def runs(session: Session) -> list[dict[str, Any]]:
    summaries: list[dict[str, Any]] = session.call("agent_instances/list")["summaries"]
    return summaries


def spans(session: Session, run_id: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = session.call(
        "agent_spans/list", agent_instance_id=run_id, pagination={"page_size": 100},
    )["summaries"]
    return listed


def tree(session: Session, run_id: str) -> list[tuple[Any, ...]]:
    """The run's spans as comparable rows: name, type, status, parent's name, times, payloads.

    Ids are left out (each store makes its own run id); the parent is named by its OTel name.
    """
    listed = spans(session, run_id)
    by_id = {span["id"]: span for span in listed}

    def otel_name(span: dict[str, Any] | None) -> str | None:
        if span is None:
            return None
        if span["purpose"] != "activity":
            return span["schema_name"]
        return str(span["payload"]["otel.span"]["name"])

    def without_ids(payload: Any) -> Any:
        if isinstance(payload, dict):
            return {k: without_ids(v) for k, v in payload.items() if k != "agent_span_id"}
        return payload

    rows = [
        (otel_name(span), span["schema_name"], span["status"], span["purpose"],
         otel_name(by_id.get(span["parent_span_id"] or "")),
         span["started_at"] if span["purpose"] == "activity" else None,
         span["finished_at"] if span["purpose"] == "activity" else None,
         repr(without_ids(span["payload"])), repr(span["result_payload"]),
         span["sensitive_encoding"])
        for span in listed
    ]
    return sorted(rows, key=repr)


def comparable_run(run: dict[str, Any]) -> dict[str, Any]:
    """What two stores recording the same trace must agree on."""
    keep = ("external_identifier", "status", "started_at", "finished_at", "span_counts",
            "span_schema_counts", "cost_breakdown", "risk_score", "purpose")
    quality = {
        name: {k: v for k, v in payload.items() if k != "agent_span_id"}
        for name, payload in run["quality_payloads"].items()
    }
    return {**{name: run[name] for name in keep}, "quality_payloads": quality}


def as_decimal(value: Any) -> Decimal:
    return Decimal(str(value))


def record_with(exporter: SpanExporter, record: Callable[[TracerProvider], None]) -> list[
    list[ReadableSpan]
]:
    """Record with ``record`` into ``exporter``; the batches as exported."""
    batches = Batches(exporter)
    provider = provider_for(batches)
    record(provider)
    provider.shutdown()
    return batches.batches


def memory_batches(record: Callable[[TracerProvider], None]) -> list[list[ReadableSpan]]:
    """The batches ``record`` exports, kept in memory only."""
    return record_with(InMemorySpanExporter(), record)
