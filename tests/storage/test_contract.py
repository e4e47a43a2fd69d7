"""The storage contract, run against every adapter the library ships."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from governance_core.storage import MemoryStore, SQLiteStore, Store
from governance_core.testing import StoreContract


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
