"""A real ``governance serve`` shared by the module's tests, and accounts to record into."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from governance_core.service import Bootstrap, Governance
from governance_http.settings import open_governance
from tests.http.server import Served


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("otel") / "otel.db"


@pytest.fixture(scope="module")
def accounts(store_path: Path) -> dict[str, Bootstrap]:
    """Accounts made before the server starts, one per way of sending."""
    with Governance.open(store_path) as gov:
        return {
            name: gov.bootstrap(account_name=name, admin_email=f"{name}@example.test")
            for name in ("protobuf", "json", "reversed", "langchain", "errors")
        }


@pytest.fixture(scope="module")
def server(store_path: Path, accounts: dict[str, Bootstrap]) -> Iterator[Served]:
    served = Served(store_path, workers=1)
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


@pytest.fixture
def reader(store_path: Path) -> Iterator[Governance]:
    """The server's store opened in the test process (with its key), to read what it wrote."""
    with open_governance(store_path) as gov:
        yield gov
