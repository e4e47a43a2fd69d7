"""The HTTP interface of the governance core: a thin Falcon app and the ``governance`` command."""

from governance_http.app import create_app
from governance_http.routes import PREFIX, ROUTES, Route

__all__ = ["PREFIX", "ROUTES", "Route", "create_app"]
