"""OTLP/HTTP trace ingest: ``POST /v1/traces`` and ``POST /api/v1/otlp/v1/traces``.

The body is an ``ExportTraceServiceRequest`` in binary protobuf (``application/x-protobuf``)
or OTLP's JSON encoding (``application/json``), optionally ``Content-Encoding: gzip``. It is
decoded here (protobuf with the ``opentelemetry-proto`` package of the ``otel`` extra) into
the core's plain spans and recorded by :func:`governance_core.otel.ingest`. The answer is an
``ExportTraceServiceResponse`` in the request's encoding, whose ``partial_success`` names the
spans not stored and why.

OTLP answers failures in its own form, a ``google.rpc.Status`` in the request's encoding
(JSON when the encoding is unknown), so this responder turns errors into that form itself
instead of leaving them to the app's JSON error handlers. A busy store is ``503`` with
``Retry-After``, which exporters retry.

An export is written in steps (:class:`~governance_core.otel.ingest.ExportSteps`), so that
other writers take turns with a large one. It stops at the end of the step under way once
:data:`EXPORT_DEADLINE_S` have passed since the request reached the app (not counting steps
that only found spans stored by an earlier attempt), or when the store turns busy after a
step was stored: it then answers ``503`` with ``Retry-After`` and a message naming how many
of its spans are stored, so that the exporter sends it again (the spans stored are found
and kept, not stored twice), rather than ``partial_success``, whose spans exporters never
send again.
"""

from __future__ import annotations

import base64
import json
import math
import os
from collections.abc import Callable, Mapping
from typing import Any, Final

import attrs
import falcon
from google.protobuf.message import DecodeError
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from governance_core.errors import BadRequest, GovernanceError, TemporarilyUnavailable
from governance_core.otel import (
    ROOT_WAIT_VARIABLE,
    IngestResult,
    MappingSettings,
    ingest,
    parse_root_wait,
)
from governance_core.otel.ingest import ExportSteps
from governance_core.otel.model import SPAN_KINDS, STATUS_CODES, Event, Resource, Span
from governance_core.service import Governance
from governance_http.auth import bearer_token
from governance_http.body import (
    MAX_JSON_DEPTH,
    BodyLimits,
    GzipTooLarge,
    UnreadableGzip,
    gunzip,
    json_path,
    lone_surrogates,
    nesting_exceeds,
)
from governance_http.errors import http_status_for

__all__ = [
    "EXPORT_DEADLINE_S",
    "OTLP_PATHS",
    "SENSITIVE_ATTRIBUTES_VARIABLE",
    "OtlpTracesResource",
    "add_otlp_routes",
    "decode_json",
    "decode_protobuf",
]

OTLP_PATHS: Final = ("/v1/traces", "/api/v1/otlp/v1/traces")
SENSITIVE_ATTRIBUTES_VARIABLE: Final = "GOVERNANCE_OTEL_SENSITIVE_ATTRIBUTES"
PROTOBUF: Final = "application/x-protobuf"
JSON: Final = "application/json"
_MEDIA_TYPES: Final = {PROTOBUF: PROTOBUF, "application/protobuf": PROTOBUF, JSON: JSON}
_REMOTE_MASKS: Final = (
    trace_pb2.SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK | trace_pb2.SPAN_FLAGS_CONTEXT_IS_REMOTE_MASK
)
_GRPC_CODE_BY_STATUS: Final = {
    400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 413: 8, 415: 3, 422: 3, 429: 8, 503: 14,
}
_LISTED_REJECTIONS: Final = 50
EXPORT_DEADLINE_S: Final = 5.0
"""Seconds after which an export stops at the end of its step and answers ``503``.

Half the OpenTelemetry exporters' default timeout (10 s, which the SDK's retries share): the
answer reaches the exporter before it gives up, with time left for it to send again.
"""
_DISCARD_MAX: Final = 64 * 1024 * 1024


class _Refused(Exception):
    """An OTLP request refused before the core saw it: HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# -- reading the body ----------------------------------------------------------------------
def _media_type(req: falcon.Request) -> str:
    """The request's encoding: protobuf or JSON; an empty string for any other."""
    return _MEDIA_TYPES.get((req.content_type or "").split(";", 1)[0].strip().lower(), "")


def _discard(req: falcon.Request, length: int) -> None:
    """Read and drop a refused body of up to :data:`_DISCARD_MAX` bytes.

    An exporter still sending when the answer comes sees a broken connection, which it
    retries, instead of the ``413`` that tells it not to; a body larger still is not worth
    reading, and its connection is simply closed.
    """
    if length > _DISCARD_MAX:
        return
    while req.bounded_stream.read(1 << 20):
        pass


def _read(req: falcon.Request, limit: int) -> bytes:
    """The body, decompressed; longer than ``limit`` bytes before or after is ``413``."""
    too_large = _Refused(413, f"the request body is larger than {limit} bytes")
    if req.content_length is not None:
        if req.content_length > limit:
            _discard(req, req.content_length)
            raise too_large
        raw: bytes = req.bounded_stream.read()
    elif "chunked" in (req.get_header("Transfer-Encoding") or "").lower():
        raw = req.stream.read(limit + 1)
        if len(raw) > limit:
            raise too_large
    else:
        raw = b""
    encoding = (req.get_header("Content-Encoding") or "identity").strip().lower()
    if encoding == "identity":
        return raw
    if encoding != "gzip":
        raise _Refused(415, f"Content-Encoding {encoding} is not supported (gzip is)")
    try:
        return gunzip(raw, limit)
    except GzipTooLarge as error:
        raise _Refused(413, str(error)) from None
    except UnreadableGzip as error:
        raise _Refused(400, str(error)) from None


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


# -- answering -------------------------------------------------------------------------------
def _summary(result: IngestResult) -> str:
    lines = [rejection.describe() for rejection in result.rejected[:_LISTED_REJECTIONS]]
    more = len(result.rejected) - len(lines)
    if more > 0:
        lines.append(f"and {more} more")
    return "; ".join(lines)


def _success(result: IngestResult, media: str) -> bytes:
    if media == JSON:
        if not result.rejected:
            return b"{}"
        return json.dumps({"partialSuccess": {
            "rejectedSpans": str(len(result.rejected)), "errorMessage": _summary(result),
        }}).encode()
    response = trace_service_pb2.ExportTraceServiceResponse()
    if result.rejected:
        response.partial_success.rejected_spans = len(result.rejected)
        response.partial_success.error_message = _summary(result)
    encoded: bytes = response.SerializeToString()
    return encoded


def _failure(resp: falcon.Response, status: int, message: str, media: str) -> None:
    code = _GRPC_CODE_BY_STATUS.get(status, 13 if status >= 500 else 3)
    resp.status = status
    resp.content_type = media
    if media == PROTOBUF:
        resp.data = status_pb2.Status(code=code, message=message).SerializeToString()
    else:
        resp.data = json.dumps({"code": code, "message": message}).encode()


class OtlpTracesResource:
    """``POST`` an OTLP trace export; the caller is the request's bearer token.

    The export is written in ``steps``; once ``deadline_s`` seconds have passed since the
    request reached the app, it stops at the end of the step under way (provided this
    request stored something new) and answers ``503`` (see
    :func:`governance_core.otel.ingest.ingest`).
    """

    def __init__(
        self,
        governance: Governance,
        limits: BodyLimits,
        settings: MappingSettings,
        *,
        steps: ExportSteps | None = None,
        deadline_s: float = EXPORT_DEADLINE_S,
    ) -> None:
        self.governance = governance
        self.limits = limits
        self.settings = settings
        self.steps = steps or ExportSteps()
        self.deadline_s = deadline_s

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Record the export and answer in the request's encoding."""
        media = _media_type(req) or JSON
        deadline = self.steps.timer() + self.deadline_s
        try:
            result = self._export(req, deadline)
        except _Refused as refused:
            _failure(resp, refused.status, refused.message, media)
        except GovernanceError as error:
            _failure(resp, http_status_for(error), error.message, media)
            if isinstance(error, TemporarilyUnavailable):
                resp.set_header("Retry-After", str(max(1, math.ceil(error.retry_after_ms / 1000))))
        else:
            resp.content_type = media
            resp.data = _success(result, media)

    def _export(self, req: falcon.Request, deadline: float) -> IngestResult:
        principal = self.governance.authenticate(bearer_token(req))
        media = _media_type(req)
        if not media:
            raise _Refused(415, f"the body must be {PROTOBUF} or {JSON}, not {req.content_type}")
        raw = _read(req, self.limits.max_bytes)
        spans = decode_protobuf(raw) if media == PROTOBUF else decode_json(
            raw, self.limits.max_depth
        )
        return ingest(
            self.governance, principal, spans, self.settings, steps=self.steps, deadline=deadline
        )


def add_otlp_routes(
    app: falcon.App[falcon.Request, falcon.Response],
    governance: Governance,
    limits: BodyLimits,
    settings: MappingSettings | None = None,
    environ: Mapping[str, str] = os.environ,
    *,
    steps: ExportSteps | None = None,
    deadline_s: float = EXPORT_DEADLINE_S,
) -> None:
    """Serve OTLP trace ingest at :data:`OTLP_PATHS`.

    Exports are written in ``steps`` and stop after ``deadline_s`` seconds
    (:class:`OtlpTracesResource`).

    ``settings`` default to the sensitive attribute list in
    ``$GOVERNANCE_OTEL_SENSITIVE_ATTRIBUTES`` (comma-separated; a leading ``+`` adds to the
    default list instead of replacing it) and the root wait in ``$GOVERNANCE_OTEL_ROOT_WAIT``
    (seconds, or ``off``; :func:`governance_core.otel.parse_root_wait`).
    """
    if settings is None:
        settings = attrs.evolve(
            MappingSettings.from_text(environ.get(SENSITIVE_ATTRIBUTES_VARIABLE)),
            root_wait=parse_root_wait(environ.get(ROOT_WAIT_VARIABLE)),
        )
    resource = OtlpTracesResource(
        governance, limits, settings, steps=steps, deadline_s=deadline_s
    )
    for path in OTLP_PATHS:
        app.add_route(path, resource)
