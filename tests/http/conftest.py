"""Fixtures of the HTTP tests: an app over an in-memory core and authenticated clients."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import falcon
import falcon.testing
import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.http.support import Api


@pytest.fixture
def gov() -> Iterator[Governance]:
    """One store is enough here: the HTTP layer does not depend on the adapter."""
    governance = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(11),
                            config=Config(cipher=PlaintextForTests()))
    yield governance
    governance.close()


@pytest.fixture
def app(gov: Governance) -> falcon.App[falcon.Request, falcon.Response]:
    return create_app(gov)


@pytest.fixture
def client(app: falcon.App[falcon.Request, falcon.Response]) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(app)


@pytest.fixture
def api(client: falcon.testing.TestClient, boot: Bootstrap) -> Api:
    """The bootstrapped admin's account token."""
    return Api(client, boot.token)


@pytest.fixture
def anonymous(client: falcon.testing.TestClient) -> Api:
    """A client that sends no token."""
    return Api(client, None)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """After a schemathesis run in this process, list the operations and cases it ran."""
    fuzz = sys.modules.get("tests.http.test_schemathesis")
    ran = getattr(fuzz, "RAN", None)
    if not ran:
        return
    terminalreporter.section("schemathesis: operations and cases run")
    for label, cases in sorted(ran.items()):
        terminalreporter.write_line(f"{cases:6d}  {label}")
    terminalreporter.write_line(f"{sum(ran.values()):6d}  cases over {len(ran)} operations")
