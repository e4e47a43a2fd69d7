"""Fixtures of the core's tests."""

from __future__ import annotations

import pytest

from governance_core.service import Governance
from tests.core.accounts_world import World, build_world


@pytest.fixture
def world(gov: Governance) -> World:
    """Two populated accounts on ``gov`` (see :mod:`tests.core.accounts_world`)."""
    return build_world(gov)
