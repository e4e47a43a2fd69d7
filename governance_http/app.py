"""``create_app``: the Falcon app serving one :class:`~governance_core.service.Governance`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from typing import Final

import falcon
import falcon.media

from governance_core.errors import NotImplementedOperation
from governance_core.service import Governance
from governance_http.auth import FailedAttemptsGuard
from governance_http.body import MAX_BODY_BYTES, MAX_JSON_DEPTH, BodyLimits
from governance_http.console import mount_console
from governance_http.errors import register_error_handlers
from governance_http.jsonlines import RunLinesResource
from governance_http.openapi import build_document
from governance_http.requestlog import RequestLog
from governance_http.resources import OpenApiResource, OperationResource, PingResource
from governance_http.routes import (
    JSON_LINES_EXPORT,
    PREFIX,
    ROUTES,
    RUN_EXPORT,
    Route,
    served_routes,
)

__all__ = ["create_app"]

_OTEL_EXTRA_MISSING: Final = (
    "OTLP trace ingest needs the otel extra, which is not installed: install "
    "agent-runs-governance[otel] (from a checkout: pip install '.[otel]')"
)

# The otel extra's import packages: opentelemetry-proto, protobuf and googleapis-common-protos.
_OTEL_EXTRA_PACKAGES: Final = frozenset({"opentelemetry", "google"})
# governance_http.otlp.OTLP_PATHS, which cannot be imported without the otel extra.
_OTLP_PATHS: Final = ("/v1/traces", "/api/v1/otlp/v1/traces")


def create_app(
    governance: Governance,
    *,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_json_depth: int = MAX_JSON_DEPTH,
    routes: Iterable[Route] = ROUTES,
) -> falcon.App[falcon.Request, falcon.Response]:
    """Build a WSGI app serving ``governance`` as the ``/api/v1`` interface.

    Only routes whose operation is in ``governance.registry`` are served. Request bodies larger
    than ``max_body_bytes`` answer 413; JSON nested deeper than ``max_json_depth`` answers 400.
    Failed credentials are limited per client address (:class:`FailedAttemptsGuard`).
    """
    app: falcon.App[falcon.Request, falcon.Response] = falcon.App(
        media_type=falcon.MEDIA_JSON, middleware=[RequestLog(), FailedAttemptsGuard(governance)]
    )
    app.req_options.strip_url_path_trailing_slash = True
    compact = partial(json.dumps, ensure_ascii=False, separators=(",", ":"))
    app.resp_options.media_handlers[falcon.MEDIA_JSON] = falcon.media.JSONHandler(dumps=compact)
    register_error_handlers(app)

    served = served_routes(governance.registry, routes)
    limits = BodyLimits(max_body_bytes, max_json_depth)
    by_path: dict[str, list[Route]] = {}
    for route in served:
        by_path.setdefault(route.path, []).append(route)
    for path, group in by_path.items():
        app.add_route(path, OperationResource(governance, group, limits))
    if any(route.operation == RUN_EXPORT for route in served):
        app.add_route(PREFIX + JSON_LINES_EXPORT, RunLinesResource(governance))
    app.add_route(f"{PREFIX}/ping", PingResource(governance))
    document = build_document(served, governance.registry)
    app.add_route(f"{PREFIX}/openapi.json", OpenApiResource(document))
    _add_otlp_routes(app, governance, limits)
    mount_console(app, governance)
    return app


def _add_otlp_routes(
    app: falcon.App[falcon.Request, falcon.Response], governance: Governance, limits: BodyLimits
) -> None:
    """Serve OTLP ingest with the ``otel`` extra; without it, answer 501 naming the extra."""
    try:
        from governance_http.otlp import add_otlp_routes
    except ModuleNotFoundError as error:
        if (error.name or "").partition(".")[0] not in _OTEL_EXTRA_PACKAGES:
            raise
        # An exporter pointed here learns why nothing is stored; 501 is not retried by OTLP
        # exporters, unlike 503.
        unavailable = _OtlpUnavailable(limits.max_bytes)
        for path in _OTLP_PATHS:
            app.add_route(path, unavailable)
        return
    add_otlp_routes(app, governance, limits)


class _OtlpUnavailable:
    """The OTLP paths without the ``otel`` extra: ``501 not_implemented`` naming the extra."""

    def __init__(self, max_body_bytes: int) -> None:
        self._max_body_bytes = max_body_bytes

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Refuse the export, after reading and dropping a body within the size limit."""
        # An exporter still sending when the answer comes sees a broken connection, which it
        # retries, instead of the answer; a body over the limit is not worth reading.
        if req.content_length is not None:
            if req.content_length <= self._max_body_bytes:
                req.bounded_stream.read()
        elif "chunked" in (req.get_header("Transfer-Encoding") or "").lower():
            left = self._max_body_bytes
            while left > 0 and (chunk := req.stream.read(min(left, 1 << 20))):
                left -= len(chunk)
        raise NotImplementedOperation(_OTEL_EXTRA_MISSING)
