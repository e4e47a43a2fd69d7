"""The storage contract, run against every adapter the library ships."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest

from governance_core.storage import MemoryStore, SQLiteStore, Store
from governance_core.storage.schema import TABLES
from governance_core.storage.write_behind import WriteBehindStore
from governance_core.testing import StoreContract
from tests.stores import shared_slots


class TestMemoryStore(StoreContract):
    def make_store(self) -> Store:
        return MemoryStore()


class TestSQLiteMemory(StoreContract):
    def make_store(self) -> Store:
        return SQLiteStore(":memory:")


class TestSQLiteFile(StoreContract):
    def make_store(self) -> Store:
        self.directory = Path(tempfile.mkdtemp(prefix="store-contract-"))
        return SQLiteStore(self.directory / "governance.db")

    def teardown_method(self, method: object = None) -> None:
        super().teardown_method(method)
        shutil.rmtree(self.directory)


class TestPostgresStore(StoreContract):
    """Needs $GOVERNANCE_TEST_POSTGRES_URL; each test gets an emptied schema of one database."""

    def make_store(self) -> Store:
        return shared_slots().store()

    def teardown_method(self, method: object = None) -> None:
        # The slot closes its store when it is handed out again.
        pass


class TestWriteBehindOverPostgres(StoreContract):
    """The store operations work through on PostgreSQL: every transaction kept, then sent."""

    def make_store(self) -> Store:
        return WriteBehindStore(shared_slots().store(), every_transaction=True)

    def teardown_method(self, method: object = None) -> None:
        pass

    def test_a_transaction_opened_alone_runs_beside_no_other(self) -> None:
        pytest.skip("a put is kept until the commit, where a transaction beside one opened "
                    "alone waits: the contract's check of when it began does not apply")


class TestWriteBehindOverSQLite(StoreContract):
    """The store operations work through: every table the contract uses kept in memory."""

    def make_store(self) -> Store:
        return WriteBehindStore(SQLiteStore(":memory:"), tables=TABLES)


class TestWriteBehindOverMemory(StoreContract):
    def make_store(self) -> Store:
        return WriteBehindStore(MemoryStore(), tables=TABLES)


class TestWriteBehindBatchesOnlyOverSQLite(StoreContract):
    """As operations work through it on SQLite: only a batch keeps, a transaction is SQLite's."""

    def make_store(self) -> Store:
        return WriteBehindStore(SQLiteStore(":memory:"), tables=TABLES, every_transaction=False)
