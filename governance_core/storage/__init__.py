"""The storage port and its adapters."""

from governance_core.storage.memory import MemoryStore
from governance_core.storage.protocol import Filter, Record, SortKey, Store
from governance_core.storage.sqlite import SQLiteStore

__all__ = ["Filter", "MemoryStore", "Record", "SQLiteStore", "SortKey", "Store"]
