"""Fixtures of the storage tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.stores import RunSQL, older_store


@pytest.fixture(params=["sqlite", "postgres"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, RunSQL]]:
    """A new store's location, and a way to change its database as older code left it."""
    with older_store(request.param, tmp_path, "older") as made:
        yield made
