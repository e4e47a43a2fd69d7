"""OTLP protobuf exports built for tests: traces of an agent span over chat calls."""

from __future__ import annotations

from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.resource.v1 import resource_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

START = 1_790_000_000_000_000_000


def _attribute(key: str, value: str | int | float) -> common_pb2.KeyValue:
    if isinstance(value, str):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))
    if isinstance(value, float):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(double_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))


def export(traces: int, per_trace: int, first_trace: int = 1) -> bytes:
    """An ``ExportTraceServiceRequest`` of ``traces`` traces of ``per_trace`` spans each.

    The traces' ids are ``first_trace`` and those after it.

    Each trace is an agent span over chat calls with token usage; every fifth call carries an
    evaluation event (a quality record written with its span).
    """
    scope = trace_pb2.ScopeSpans()
    for trace in range(first_trace, first_trace + traces):
        trace_id = trace.to_bytes(16, "big")
        root = (trace << 16).to_bytes(8, "big")
        scope.spans.append(trace_pb2.Span(
            trace_id=trace_id, span_id=root, name="invoke_agent",
            start_time_unix_nano=START, end_time_unix_nano=START + per_trace * 1_000_000,
            attributes=[_attribute("gen_ai.operation.name", "invoke_agent")],
        ))
        for step in range(1, per_trace):
            events = [] if step % 5 else [trace_pb2.Span.Event(
                name="gen_ai.evaluation.result", time_unix_nano=START + step * 1_000_000,
                attributes=[_attribute("gen_ai.evaluation.name", "relevance"),
                            _attribute("gen_ai.evaluation.score.value", 0.5)],
            )]
            scope.spans.append(trace_pb2.Span(
                trace_id=trace_id, span_id=((trace << 16) + step).to_bytes(8, "big"),
                parent_span_id=root, name=f"chat {step}",
                start_time_unix_nano=START + step * 1_000_000,
                end_time_unix_nano=START + step * 1_000_000 + 500_000,
                attributes=[
                    _attribute("gen_ai.operation.name", "chat"),
                    _attribute("gen_ai.request.model", "gpt-4o-mini"),
                    _attribute("gen_ai.provider.name", "openai"),
                    _attribute("gen_ai.usage.input_tokens", 100 + step),
                    _attribute("gen_ai.usage.output_tokens", 10),
                ],
                events=events,
            ))
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(
            resource=resource_pb2.Resource(attributes=[_attribute("service.name", "big-agent")]),
            scope_spans=[scope],
        ),
    ])
    body: bytes = request.SerializeToString()
    return body
