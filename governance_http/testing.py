"""A server for tests: the app on a free local port, on a thread of the test process.

The ``governance_server`` fixture of :mod:`governance_http.pytest_plugin` starts one.
"""

from __future__ import annotations

import threading
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from governance_core.service import Governance
from governance_http.app import create_app

__all__ = ["GovernanceServer"]


class GovernanceServer:
    """A server on a free local port answering the ``/api/v1`` interface of ``governance``.

    ``url`` is the address to give an SDK as its API URL, ``api_url`` that address with
    ``/api/v1``; ``token`` is the bootstrapped account's token. Requests are served one at a
    time, on a thread of the test process, from the same store the ``governance`` fixture
    reads, so a test can assert through the library on what an SDK sent.
    """

    def __init__(self, governance: Governance, token: str) -> None:
        self.governance = governance
        self.token = token
        self._server: WSGIServer = make_server(
            "127.0.0.1", 0, create_app(governance), handler_class=_QuietHandler
        )
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        """The port it listens on."""
        return self._server.server_port

    @property
    def url(self) -> str:
        """``http://127.0.0.1:PORT``."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def api_url(self) -> str:
        """``http://127.0.0.1:PORT/api/v1``."""
        return f"{self.url}/api/v1"

    def start(self) -> None:
        """Start answering requests."""
        self._thread.start()

    def stop(self) -> None:
        """Stop answering and release the port."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


class _QuietHandler(WSGIRequestHandler):
    """Keeps the standard library's per-request lines out of test output."""

    def log_message(self, format: str, *args: Any) -> None:
        pass
