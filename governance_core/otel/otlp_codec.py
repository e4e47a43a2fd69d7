"""OTLP trace exports as bytes: requests decoded to the core's spans, answers encoded.

An ``ExportTraceServiceRequest`` arrives in binary protobuf (``application/x-protobuf``,
read with the ``opentelemetry-proto`` package of the ``otel`` extra) or in OTLP's JSON
encoding (``application/json``); either becomes the plain :class:`~governance_core.otel.Span`
values :func:`governance_core.otel.ingest` records. The answer is an
``ExportTraceServiceResponse`` in the request's encoding, whose ``partial_success`` names the
spans not stored and why; a failure is a ``google.rpc.Status`` in the request's encoding.

Nothing here reads a connection or knows a transport: a server passes the body's bytes (size
limits and ``Content-Encoding`` already applied) and sends the bytes returned. This module
needs the ``otel`` extra; :mod:`governance_core.otel` imports without it.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Callable, Sequence
from typing import Any, Final

from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from governance_core.errors import BadRequest
from governance_core.jsontext import MAX_JSON_DEPTH, json_path, lone_surrogates, nesting_exceeds
from governance_core.otel.model import SPAN_KINDS, STATUS_CODES, Event, Rejection, Resource, Span

__all__ = [
    "JSON",
    "LISTED_REJECTIONS",
    "PROTOBUF",
    "decode_json",
    "decode_protobuf",
    "decode_request",
    "encode_response",
    "encode_status",
    "media_type",
]

PROTOBUF: Final = "application/x-protobuf"
"""The binary protobuf encoding's media type, as answers name it."""
JSON: Final = "application/json"
"""OTLP's JSON encoding's media type."""
LISTED_REJECTIONS: Final = 50
"""Rejections a partial success describes one by one; the rest are counted."""

_MEDIA_TYPES: Final = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
_REMOTE_MASKS: Final = (
    trace_pb2.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | trace_pb2.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
)


def media_type(content_type: str | None) -> str:
    """The encoding a ``Content-Type`` names: :data:`PROTOBUF`, :data:`JSON`, or ``""``.

    Parameters (``; charset=utf-8``) and case are ignored; ``application/protobuf`` is
    protobuf too.
    """
    return _MEDIA_TYPES.get((content_type or "").split(";", 1)[0].strip().lower(), "")


def decode_request(raw: bytes, media: str, max_depth: int = MAX_JSON_DEPTH) -> list[Span]:
    """The spans of an export in encoding ``media`` (:func:`media_type`).

    JSON nesting deeper than ``max_depth`` is ``bad_request`` before it is decoded.
    """
    if media == PROTOBUF:
        return decode_protobuf(raw)
    if media == JSON:
        return decode_json(raw, max_depth)
    raise ValueError(f"media must be {PROTOBUF} or {JSON}, not {media!r}")


# -- protobuf --------------------------------------------------------------------------------
def _any_value(value: common_pb2.AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_any_value(item) for item in value.array_value.values]
    if kind == "kvlist_value":
        return {item.key: _any_value(item.value) for item in value.kvlist_value.values}
    if kind == "bytes_value":
        return base64.b64encode(value.bytes_value).decode("ascii")
    return None if kind is None else getattr(value, kind)


def _pb_attributes(items: Any) -> dict[str, Any]:
    return {item.key: _any_value(item.value) for item in items}


def decode_protobuf(raw: bytes) -> list[Span]:
    """The spans of a binary ``ExportTraceServiceRequest``; ``bad_request`` if malformed."""
    try:
        request = trace_service_pb2.ExportTraceServiceRequest.FromString(raw)
    except (DecodeError, RecursionError) as error:
        raise BadRequest(f"the body is not an ExportTraceServiceRequest: {error}") from None
    spans = []
    for resource_spans in request.resource_spans:
        resource = Resource(_pb_attributes(resource_spans.resource.attributes))
        for scope_spans in resource_spans.scope_spans:
            scope = scope_spans.scope
            for span in scope_spans.spans:
                spans.append(Span(
                    trace_id=span.trace_id.hex(), span_id=span.span_id.hex(),
                    parent_span_id=span.parent_span_id.hex(),
                    parent_is_remote=span.flags & _REMOTE_MASKS == _REMOTE_MASKS,
                    name=span.name,
                    kind=SPAN_KINDS[span.kind] if span.kind < len(SPAN_KINDS) else "unspecified",
                    start_time_unix_nano=span.start_time_unix_nano,
                    end_time_unix_nano=span.end_time_unix_nano,
                    attributes=_pb_attributes(span.attributes),
                    events=tuple(
                        Event(event.name, event.time_unix_nano, _pb_attributes(event.attributes))
                        for event in span.events
                    ),
                    status_code=(
                        STATUS_CODES[span.status.code]
                        if span.status.code < len(STATUS_CODES) else "unset"
                    ),
                    status_message=span.status.message,
                    resource=resource, scope_name=scope.name, scope_version=scope.version,
                ))
    return spans


# -- JSON ------------------------------------------------------------------------------------
class _Json:
    """Reads OTLP's JSON encoding (lowerCamelCase or the proto's names), naming bad members."""

    def __init__(self, value: Any, path: str) -> None:
        self.value = value
        self.path = path

    def _bad(self, name: str, what: str) -> BadRequest:
        return BadRequest(f"{self.path}{name} must be {what}")

    def member(self, camel: str, snake: str) -> Any:
        if not isinstance(self.value, dict):
            raise BadRequest(f"{self.path or 'the body'} must be an object")
        return self.value[camel] if camel in self.value else self.value.get(snake)

    def objects(self, camel: str, snake: str) -> list[_Json]:
        items = self.member(camel, snake)
        if items is None:
            return []
        if not isinstance(items, list):
            raise self._bad(camel, "a list")
        return [_Json(item, f"{self.path}{camel}[{index}].") for index, item in enumerate(items)]

    def object(self, camel: str, snake: str) -> _Json:
        return _Json(self.member(camel, snake) or {}, f"{self.path}{camel}.")

    def text(self, camel: str, snake: str) -> str:
        value = self.member(camel, snake)
        if value is None:
            return ""
        if not isinstance(value, str):
            raise self._bad(camel, "a string")
        return value

    def integer(self, camel: str, snake: str) -> int:
        value = self.member(camel, snake)
        if value is None or value == "":
            return 0
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise self._bad(camel, "an integer")
        try:
            number = int(value)
        except ValueError:
            raise self._bad(camel, "an integer") from None
        if not 0 <= number < 2**64:
            raise self._bad(camel, "an unsigned 64-bit integer")
        return number

    def enum(self, camel: str, snake: str, names: tuple[str, ...], prefix: str) -> str:
        value = self.member(camel, snake)
        if isinstance(value, str) and value.upper().startswith(prefix):
            name = value.upper().removeprefix(prefix).lower()
            return name if name in names else names[0]
        number = self.integer(camel, snake)
        return names[number] if number < len(names) else names[0]

    def span_id(self, camel: str, snake: str) -> str:
        # OTLP/JSON writes ids as hex; anything else is kept for the mapping to reject.
        return self.text(camel, snake).lower()

    def attributes(self, camel: str = "attributes", snake: str = "attributes") -> dict[str, Any]:
        return {
            item.text("key", "key"): item.object("value", "value").any_value()
            for item in self.objects(camel, snake)
        }

    def any_value(self) -> Any:
        readers: dict[str, Callable[[], Any]] = {
            "stringValue": lambda: self.text("stringValue", "string_value"),
            "boolValue": lambda: self.member("boolValue", "bool_value") is True,
            "intValue": lambda: self._signed("intValue", "int_value"),
            "doubleValue": lambda: self._double("doubleValue", "double_value"),
            "arrayValue": lambda: [
                item.any_value()
                for item in self.object("arrayValue", "array_value").objects("values", "values")
            ],
            "kvlistValue": lambda: self.object("kvlistValue", "kvlist_value").attributes(
                "values", "values"
            ),
            "bytesValue": lambda: self.text("bytesValue", "bytes_value"),
        }
        for camel, read in readers.items():
            snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in camel)
            if isinstance(self.value, dict) and (camel in self.value or snake in self.value):
                return read()
        return None

    def _signed(self, camel: str, snake: str) -> int:
        value = self.member(camel, snake)
        try:
            number = int(value)
        except (TypeError, ValueError):
            raise self._bad(camel, "an integer") from None
        if isinstance(value, bool) or not -(2**63) <= number < 2**63:
            raise self._bad(camel, "a signed 64-bit integer")
        return number

    def _double(self, camel: str, snake: str) -> float:
        value = self.member(camel, snake)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._bad(camel, "a number")
        if not math.isfinite(value):
            raise self._bad(camel, "a finite number")
        return float(value)


def decode_json(raw: bytes, max_depth: int = MAX_JSON_DEPTH) -> list[Span]:
    """The spans of an ``ExportTraceServiceRequest`` in OTLP's JSON encoding.

    ``bad_request`` names the first malformed member (``resourceSpans[0].scopeSpans...``).
    """
    if nesting_exceeds(raw, max_depth):
        raise BadRequest(f"the request body nests more than {max_depth} levels deep")
    try:
        parsed = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as error:
        raise BadRequest(f"the request body is not valid JSON: {error}") from None
    for where in lone_surrogates(parsed):
        raise BadRequest(f"{json_path(where)} holds a lone UTF-16 surrogate, not Unicode text")
    body = _Json(parsed, "")
    spans = []
    for resource_spans in body.objects("resourceSpans", "resource_spans"):
        resource = Resource(resource_spans.object("resource", "resource").attributes())
        for scope_spans in resource_spans.objects("scopeSpans", "scope_spans"):
            scope = scope_spans.object("scope", "scope")
            for span in scope_spans.objects("spans", "spans"):
                flags = span.integer("flags", "flags")
                status = span.object("status", "status")
                spans.append(Span(
                    trace_id=span.span_id("traceId", "trace_id"),
                    span_id=span.span_id("spanId", "span_id"),
                    parent_span_id=span.span_id("parentSpanId", "parent_span_id"),
                    parent_is_remote=flags & _REMOTE_MASKS == _REMOTE_MASKS,
                    name=span.text("name", "name"),
                    kind=span.enum("kind", "kind", SPAN_KINDS, "SPAN_KIND_"),
                    start_time_unix_nano=span.integer("startTimeUnixNano", "start_time_unix_nano"),
                    end_time_unix_nano=span.integer("endTimeUnixNano", "end_time_unix_nano"),
                    attributes=span.attributes(),
                    events=tuple(
                        Event(
                            event.text("name", "name"),
                            event.integer("timeUnixNano", "time_unix_nano"),
                            event.attributes(),
                        )
                        for event in span.objects("events", "events")
                    ),
                    status_code=status.enum("code", "code", STATUS_CODES, "STATUS_CODE_"),
                    status_message=status.text("message", "message"),
                    resource=resource,
                    scope_name=scope.text("name", "name"),
                    scope_version=scope.text("version", "version"),
                ))
    return spans


# -- answers ---------------------------------------------------------------------------------
def _summary(rejected: Sequence[Rejection]) -> str:
    lines = [rejection.describe() for rejection in rejected[:LISTED_REJECTIONS]]
    more = len(rejected) - len(lines)
    if more > 0:
        lines.append(f"and {more} more")
    return "; ".join(lines)


def encode_response(rejected: Sequence[Rejection], media: str) -> bytes:
    """The ``ExportTraceServiceResponse`` of an export that stored all but ``rejected``.

    In JSON when ``media`` is :data:`JSON`, else in protobuf; a ``partial_success`` counts the
    rejected spans and describes the first :data:`LISTED_REJECTIONS`.
    """
    if media == JSON:
        if not rejected:
            return b"{}"
        return json.dumps({"partialSuccess": {
            "rejectedSpans": str(len(rejected)), "errorMessage": _summary(rejected),
        }}).encode()
    response = trace_service_pb2.ExportTraceServiceResponse()
    if rejected:
        response.partial_success.rejected_spans = len(rejected)
        response.partial_success.error_message = _summary(rejected)
    encoded: bytes = response.SerializeToString()
    return encoded


def encode_status(code: int, message: str, media: str) -> bytes:
    """A failed export's ``google.rpc.Status`` (gRPC ``code``, ``message``).

    In protobuf when ``media`` is :data:`PROTOBUF`, else in JSON (the answer to a body of an
    unknown encoding too).
    """
    if media == PROTOBUF:
        encoded: bytes = status_pb2.Status(code=code, message=message).SerializeToString()
        return encoded
    return json.dumps({"code": code, "message": message}).encode()
