"""The app's own routes: the token check ``/ping`` and the ``/openapi.json`` reference."""

from __future__ import annotations

from typing import Any

import falcon

from governance_core.service import Governance
from governance_http.auth import bearer_token

__all__ = ["OpenApiResource", "PingResource"]


class PingResource:
    """``GET /ping``: a liveness answer, and a token check when a token is sent.

    Without an ``Authorization`` header it answers success (a health check for load
    balancers and start-up probes); with one, the token must be valid (401 otherwise), which is
    how the clients check their token before sending anything.
    """

    def __init__(self, governance: Governance) -> None:
        self._governance = governance

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer ``{"status": "success"}`` once the token, if any, checks out."""
        token = bearer_token(req)
        if token is not None:
            self._governance.authenticate(token)
        resp.media = {"status": "success"}


class OpenApiResource:
    """``GET /openapi.json``: the OpenAPI document of the routes this app serves."""

    def __init__(self, document: dict[str, Any]) -> None:
        self._document = document

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Answer the document."""
        resp.media = self._document
