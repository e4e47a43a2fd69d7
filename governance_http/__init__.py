"""The HTTP interface of the governance core: a thin Falcon app and the ``governance`` command."""

from governance_http.app import create_app
from governance_http.body import BodyLimits
from governance_http.errors import STATUS_BY_CODE
from governance_http.openapi import build_document
from governance_http.routes import PREFIX, ROUTES, Route

__all__ = [
    "BodyLimits",
    "PREFIX",
    "ROUTES",
    "Route",
    "STATUS_BY_CODE",
    "build_document",
    "create_app",
]
