"""Fixtures: a run world over each reference store."""

from __future__ import annotations

import pytest

from governance_core.service import Bootstrap, Governance
from tests.policies.support import RunWorld, run_world


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> RunWorld:
    """An agent in the bootstrapped account, with prices set (tests.policies.support)."""
    return run_world(gov, boot)
