"""The web console, served by the API's app at ``/``: pages rendered on the server.

It holds no business rule: every page reads and acts through the core operations as the
signed-in caller (see :mod:`governance_http.console.web`). Static files (one stylesheet, one
script, no library) are served from ``/static/console``.
"""

from __future__ import annotations

import re
from pathlib import Path

import falcon

from governance_core.service import Governance
from governance_http.console.approvals import approval_routes
from governance_http.console.notifications import notification_routes
from governance_http.console.pages import NotFoundPage, routes
from governance_http.console.policies import policy_routes
from governance_http.console.sessions import session_routes
from governance_http.console.web import Console

__all__ = ["CONSOLE_PATHS", "STATIC_PREFIX", "mount_console"]

STATIC_PREFIX = "/static/console"
"""Where the console's stylesheet and script are served."""

CONSOLE_PATHS = re.compile(r"^/(?!api(?:/|$)|v1/|static/)")
"""The addresses the console answers when no route matches: all but the API's and files'."""


def mount_console(app: falcon.App[falcon.Request, falcon.Response], governance: Governance) -> None:
    """Add the console's pages and static files to ``app``."""
    console = Console(governance)
    for path, resource in [
        *routes(console), *notification_routes(console), *approval_routes(console),
        *policy_routes(console), *session_routes(console),
    ]:
        app.add_route(path, resource)
    app.add_static_route(STATIC_PREFIX, str(Path(__file__).parent / "static"))
    # Falcon tries routes first: the sink answers only addresses no page or operation has.
    app.add_sink(NotFoundPage(console), CONSOLE_PATHS)
