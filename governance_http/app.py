"""``create_app``: the Falcon app serving one :class:`~governance_core.service.Governance`."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import partial
from importlib.util import find_spec

import falcon
import falcon.media

from governance_core.service import Governance
from governance_http.body import MAX_BODY_BYTES, MAX_JSON_DEPTH, BodyLimits
from governance_http.errors import register_error_handlers
from governance_http.openapi import build_document
from governance_http.resources import OpenApiResource, OperationResource, PingResource
from governance_http.routes import PREFIX, ROUTES, Route, served_routes

__all__ = ["create_app"]


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
    """
    app: falcon.App[falcon.Request, falcon.Response] = falcon.App(media_type=falcon.MEDIA_JSON)
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
    app.add_route(f"{PREFIX}/ping", PingResource(governance))
    document = build_document(served, governance.registry)
    app.add_route(f"{PREFIX}/openapi.json", OpenApiResource(document))
    if find_spec("opentelemetry.proto") is not None:  # the otel extra serves OTLP ingest
        from governance_http.otlp import add_otlp_routes

        add_otlp_routes(app, governance, limits)
    return app
