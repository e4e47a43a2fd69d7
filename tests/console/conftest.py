"""Fixtures of the console's page tests: two populated accounts on one in-memory store."""

from __future__ import annotations

from collections.abc import Iterator

import falcon
import falcon.testing
import pytest

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.console.support import Visitor
from tests.console.world import Account, make_account


@pytest.fixture
def gov() -> Iterator[Governance]:
    governance = Governance(MemoryStore(), config=Config(cipher=PlaintextForTests()))
    yield governance
    governance.close()


@pytest.fixture
def app(gov: Governance) -> falcon.App[falcon.Request, falcon.Response]:
    return create_app(gov)


@pytest.fixture
def client(app: falcon.App[falcon.Request, falcon.Response]) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(app)


@pytest.fixture
def alice(gov: Governance) -> Account:
    return make_account(gov, "alice")


@pytest.fixture
def bob(gov: Governance) -> Account:
    return make_account(gov, "bob")


@pytest.fixture
def visitor(client: falcon.testing.TestClient) -> Visitor:
    return Visitor(client)


@pytest.fixture
def signed_in(visitor: Visitor, alice: Account) -> Visitor:
    """Alice's browser, signed in."""
    assert visitor.sign_in(alice.token).status_code == 303
    return visitor
