"""The core's OTLP codec on its own: bytes in, spans out, answers as bytes; no server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from governance_core.otel.model import Rejection
from governance_core.otel.otlp_codec import (
    JSON,
    LISTED_REJECTIONS,
    PROTOBUF,
    decode_request,
    encode_response,
    encode_status,
    media_type,
)

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")

# The otel extra's packages made unimportable, as where the extra is not installed.
WITHOUT_THE_EXTRA = """
import sys
for name in ("opentelemetry", "google"):
    sys.modules[name] = None
import governance_core.otel
try:
    import governance_core.otel.otlp_codec
except ImportError as error:
    print("refused:", error.name)
"""


def test_the_otel_package_imports_without_the_extra_and_the_codec_only_with_it() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_THE_EXTRA], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[0] == "refused:"
    assert done.stdout.split()[1].partition(".")[0] in ("google", "opentelemetry")


@pytest.mark.parametrize(("content_type", "expected"), [
    ("application/x-protobuf", PROTOBUF),
    ("Application/Protobuf", PROTOBUF),
    ("application/json; charset=utf-8", JSON),
    (" APPLICATION/JSON ", JSON),
    ("text/plain", ""),
    ("", ""),
    (None, ""),
])
def test_media_types_name_one_of_two_encodings(content_type: str | None, expected: str) -> None:
    assert media_type(content_type) == expected


def test_both_encodings_decode_to_the_same_span() -> None:
    span = trace_pb2.Span(
        trace_id=TRACE, span_id=bytes.fromhex("00f067aa0ba902b7"), name="chat",
        kind=trace_pb2.Span.SPAN_KIND_CLIENT, start_time_unix_nano=5, end_time_unix_nano=9,
    )
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(scope_spans=[trace_pb2.ScopeSpans(spans=[span])]),
    ])
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": TRACE.hex(), "spanId": "00f067aa0ba902b7", "name": "chat",
        "kind": "SPAN_KIND_CLIENT", "startTimeUnixNano": "5", "endTimeUnixNano": 9,
    }]}]}]}
    [from_protobuf] = decode_request(request.SerializeToString(), PROTOBUF)
    [from_json] = decode_request(json.dumps(document).encode(), JSON)
    assert from_protobuf == from_json
    assert (from_json.name, from_json.kind, from_json.end_time_unix_nano) == ("chat", "client", 9)


def test_an_encoding_that_is_neither_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="not 'text/plain'"):
        decode_request(b"{}", "text/plain")


def test_a_partial_success_counts_every_rejection_and_lists_the_first_ones() -> None:
    rejected = [
        Rejection(TRACE.hex(), f"{index:016x}", "a reason")
        for index in range(LISTED_REJECTIONS + 2)
    ]
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(
        encode_response(rejected, PROTOBUF)
    )
    assert answer.partial_success.rejected_spans == LISTED_REJECTIONS + 2
    message = answer.partial_success.error_message
    assert message.count("a reason") == LISTED_REJECTIONS and message.endswith("and 2 more")
    assert json.loads(encode_response(rejected, JSON)) == {"partialSuccess": {
        "rejectedSpans": str(LISTED_REJECTIONS + 2), "errorMessage": message,
    }}
    assert encode_response([], JSON) == b"{}"
    assert trace_service_pb2.ExportTraceServiceResponse.FromString(
        encode_response([], PROTOBUF)
    ) == trace_service_pb2.ExportTraceServiceResponse()


def test_a_failure_is_a_status_in_protobuf_or_else_json() -> None:
    status = status_pb2.Status.FromString(encode_status(14, "busy", PROTOBUF))
    assert (status.code, status.message) == (14, "busy")
    assert json.loads(encode_status(3, "bad", JSON)) == {"code": 3, "message": "bad"}
    assert json.loads(encode_status(3, "bad", "")) == {"code": 3, "message": "bad"}
