"""Shared fixtures: deterministic facades over each reference store."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore, SQLiteStore


@pytest.fixture(params=["memory", "sqlite"])
def gov(request: pytest.FixtureRequest) -> Iterator[Governance]:
    """A facade with a fixed clock and seeded ids, over each reference store in turn."""
    store = MemoryStore() if request.param == "memory" else SQLiteStore(":memory:")
    governance = Governance(store, clock=FixedClock(), ids=SeededIds(7))
    yield governance
    governance.close()


@pytest.fixture
def boot(gov: Governance) -> Bootstrap:
    """A bootstrapped account on ``gov``."""
    return gov.bootstrap(account_name="Acme", admin_email="admin@acme.test", admin_name="Ada")


@pytest.fixture
def other(gov: Governance) -> Bootstrap:
    """A second account on the same store, for tenant-isolation tests."""
    return gov.bootstrap(account_name="Globex", admin_email="admin@globex.test")
