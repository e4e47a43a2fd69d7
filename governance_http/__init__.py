"""The HTTP interface of the governance core: a thin Falcon app and the ``governance`` command.

The app's names are imported on first use, so the command (``governance_http.cli``) runs
without falcon installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_HOMES = {
    "BodyLimits": "governance_http.body",
    "PREFIX": "governance_http.routes",
    "ROUTES": "governance_http.routes",
    "Route": "governance_http.routes",
    "STATUS_BY_CODE": "governance_http.errors",
    "build_document": "governance_http.openapi",
    "create_app": "governance_http.app",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
