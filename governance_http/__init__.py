"""The HTTP interface of the governance core: a thin Falcon app and the ``governance`` command.

The app's names are imported on first use, so the command (``governance_http.cli``) runs
without falcon installed.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from governance_http.app import create_app
    from governance_http.routes import PREFIX, ROUTES, Route

__all__ = ["PREFIX", "ROUTES", "Route", "create_app"]

_HOMES = {
    "PREFIX": "governance_http.routes",
    "ROUTES": "governance_http.routes",
    "Route": "governance_http.routes",
    "create_app": "governance_http.app",
}


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
