"""OTLP/HTTP trace ingest: ``POST /v1/traces`` and ``POST /api/v1/otlp/v1/traces``.

The body is an ``ExportTraceServiceRequest`` in binary protobuf (``application/x-protobuf``)
or OTLP's JSON encoding (``application/json``), optionally ``Content-Encoding: gzip``. This
module only moves bytes: it reads the body within the size limit and inflates it, names the
caller, and passes the bytes to the core's codec (:mod:`governance_core.otel.otlp_codec`),
which decodes them into plain spans that :func:`governance_core.otel.ingest` records and
encodes the answer: an ``ExportTraceServiceResponse`` in the request's encoding, whose
``partial_success`` names the spans not stored and why.

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

import math
import os
from collections.abc import Mapping
from typing import Any, Final

import attrs
import falcon

from governance_core.errors import GovernanceError, TemporarilyUnavailable
from governance_core.otel import (
    ROOT_WAIT_VARIABLE,
    IngestResult,
    MappingSettings,
    ingest,
    parse_root_wait,
)
from governance_core.otel.ingest import ExportSteps
from governance_core.otel.otlp_codec import (
    JSON,
    PROTOBUF,
    decode_request,
    encode_response,
    encode_status,
    media_type,
)
from governance_core.service import Governance
from governance_http.auth import bearer_token
from governance_http.body import BodyLimits, GzipTooLarge, UnreadableGzip, gunzip
from governance_http.errors import http_status_for
from governance_http.gateway import WAITED_KEY, Shedding, StartResponse
from governance_http.requestlog import request_id

__all__ = [
    "EXPORT_DEADLINE_S",
    "OTLP_PATHS",
    "SENSITIVE_ATTRIBUTES_VARIABLE",
    "OtlpTracesResource",
    "add_otlp_routes",
    "export_shedding",
    "shed_export",
]

OTLP_PATHS: Final = ("/v1/traces", "/api/v1/otlp/v1/traces")
SENSITIVE_ATTRIBUTES_VARIABLE: Final = "GOVERNANCE_OTEL_SENSITIVE_ATTRIBUTES"
_GRPC_CODE_BY_STATUS: Final = {
    400: 3, 401: 16, 403: 7, 404: 5, 409: 10, 413: 8, 415: 3, 422: 3, 429: 8, 503: 14,
}
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


# -- answering -------------------------------------------------------------------------------
def _failure(resp: falcon.Response, status: int, message: str, media: str) -> None:
    code = _GRPC_CODE_BY_STATUS.get(status, 13 if status >= 500 else 3)
    resp.status = status
    resp.content_type = media
    resp.data = encode_status(code, message, media)


def shed_export(environ: dict[str, Any], start_response: StartResponse) -> list[bytes]:
    """Answer an export no thread took in time: ``503`` with ``Retry-After: 1``, unrun.

    A WSGI app that reads nothing but the request's environ (it runs on the server's event
    loop); the ``google.rpc.Status`` (``UNAVAILABLE``) is in the request's encoding.
    """
    media = media_type(environ.get("CONTENT_TYPE")) or JSON
    waited = float(environ.get(WAITED_KEY) or 0)
    message = (
        f"the server is overloaded: the export waited {waited:.1f} s for a thread and was not"
        " run (nothing of it is stored); send it again"
    )
    body = encode_status(_GRPC_CODE_BY_STATUS[503], message, media)
    start_response("503 Service Unavailable", [
        ("Content-Type", media), ("Content-Length", str(len(body))), ("Retry-After", "1"),
        ("X-Request-Id", request_id(environ.get("HTTP_X_REQUEST_ID"))),
    ])
    return [body]


def export_shedding() -> Shedding:
    """What the server sheds: an export not taken by a thread within its deadline."""
    return Shedding(frozenset(OTLP_PATHS), EXPORT_DEADLINE_S, shed_export)


class OtlpTracesResource:
    """``POST`` an OTLP trace export; the caller is the request's bearer token.

    The export is written in ``steps``; once ``deadline_s`` seconds have passed since the
    request arrived (the time it waited for a thread, :data:`WAITED_KEY`, counts), it stops
    at the end of the step under way (provided this request stored something new) and
    answers ``503`` (see :func:`governance_core.otel.ingest.ingest`).
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
        media = media_type(req.content_type) or JSON
        waited = float(req.env.get(WAITED_KEY) or 0)
        deadline = self.steps.timer() + self.deadline_s - waited
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
            resp.data = encode_response(result.rejected, media)

    def _export(self, req: falcon.Request, deadline: float) -> IngestResult:
        principal = self.governance.authenticate(bearer_token(req))
        media = media_type(req.content_type)
        if not media:
            raise _Refused(415, f"the body must be {PROTOBUF} or {JSON}, not {req.content_type}")
        raw = _read(req, self.limits.max_bytes)
        spans = decode_request(raw, media, self.limits.max_depth)
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
