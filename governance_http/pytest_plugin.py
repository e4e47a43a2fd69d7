"""The ``governance_server`` fixture: the library's pytest fixtures, served over HTTP.

Registered beside :mod:`governance_core.pytest_plugin` through its own ``pytest11`` entry
point, so the core's plugin never imports this package. It builds on the core plugin's
``governance`` and ``governance_bootstrap`` fixtures:

``governance_server``
    A real HTTP server on a free port serving ``governance`` as ``/api/v1``, for agents that
    record through an SDK (:class:`governance_http.testing.GovernanceServer`). It needs the
    ``http`` extra; without falcon the tests using it are skipped, saying so.

Nothing here imports falcon until the fixture is used.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from governance_core.service import Bootstrap, Governance
    from governance_http.testing import GovernanceServer

__all__ = ["governance_server"]


@pytest.fixture
def governance_server(
    governance: Governance, governance_bootstrap: Bootstrap
) -> Iterator[GovernanceServer]:
    """A real server on a free port serving ``governance`` (needs the ``http`` extra)."""
    pytest.importorskip(
        "falcon",
        reason="the governance_server fixture needs the http extra "
        "(agent-runs-governance[http]; from a checkout: pip install '.[http]')",
    )
    from governance_http.testing import GovernanceServer

    server = GovernanceServer(governance, governance_bootstrap.token)
    server.start()
    yield server
    server.stop()
