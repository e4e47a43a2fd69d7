"""Shared fixtures: deterministic facades over each reference store.

``$GOVERNANCE_TEST_STORE=postgres`` runs them on PostgreSQL instead (see :mod:`tests.stores`).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from tests.stores import STORE_KINDS, drop_shared, make_store


@pytest.fixture(scope="session", autouse=True)
def _scratch_databases() -> Iterator[None]:
    """Drop the PostgreSQL database this process made for its stores, if it made one."""
    yield
    drop_shared()


@pytest.fixture(params=STORE_KINDS)
def gov(request: pytest.FixtureRequest) -> Iterator[Governance]:
    """A facade with a fixed clock and seeded ids, over each reference store in turn."""
    # Test data holds nothing secret: its sensitive values are kept without encryption, by
    # choice (tests/core/test_encryption_keys.py covers encryption).
    governance = Governance(make_store(request.param), clock=FixedClock(), ids=SeededIds(7),
                            config=Config(cipher=PlaintextForTests()))
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
