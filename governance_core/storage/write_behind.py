"""A store that writes a hot record once per transaction, however often it is rewritten.

Every span write rewrites its run (the aggregates) and often its agent. In a bulk request of
a hundred spans of one run, that is a hundred reads and a hundred rewrites of one row, each a
JSON decode or encode and a statement. :class:`WriteBehindStore` wraps any store: inside a
transaction it keeps the records of the tables it is given as last read or written, answers
reads of them from memory, and writes each changed one once, just before the outermost
transaction commits. Outside a transaction it passes everything through.

What it keeps never changes what a caller sees:

- a query, count or iteration of a kept table first writes that table's changed records, so
  the store's own filtering and sorting see them;
- a nested transaction (a savepoint) that fails takes back what it kept, as the store takes
  back what it wrote;
- every transaction's memory is its thread's own, and is forgotten when the outermost one
  ends: nothing is kept between transactions, so other processes' writes are always seen.

Records it answers are the ones it was given or read: callers treat records as values (they
copy, never change one in place), as they do with every store.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from governance_core.storage.protocol import Filter, Record, SortKey, Store

__all__ = ["HOT_TABLES", "WriteBehindStore"]

HOT_TABLES = ("agent_instances", "agents")
"""The tables a span write rewrites: the run's aggregates and the agent's last activity."""

_Key = tuple[str, str]


class _Memory(threading.local):
    """One thread's open transaction: its depth and the records it keeps."""

    def __init__(self) -> None:
        self.depth = 0
        self.records: dict[_Key, Record] = {}
        self.changed: dict[_Key, None] = {}


class WriteBehindStore:
    """Wraps ``inner``, keeping the records of ``tables`` within each transaction."""

    def __init__(self, inner: Store, tables: Collection[str] = HOT_TABLES) -> None:
        self.inner = inner
        self._tables = frozenset(tables)
        self._memory = _Memory()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The inner store's transaction; the kept records are written before it commits."""
        memory = self._memory
        if memory.depth == 0:
            with self.inner.transaction():
                memory.depth = 1
                try:
                    yield
                    self._write_changed(memory, None)
                finally:
                    memory.depth = 0
                    memory.records = {}
                    memory.changed = {}
            return
        records, changed = dict(memory.records), dict(memory.changed)
        memory.depth += 1
        try:
            with self.inner.transaction():
                yield
        except BaseException:
            memory.records, memory.changed = records, changed
            raise
        finally:
            memory.depth -= 1

    def get(self, table: str, record_id: str) -> Record | None:
        """The kept record when there is one, else the inner store's (kept from then on)."""
        memory = self._memory
        if not memory.depth or table not in self._tables:
            return self.inner.get(table, record_id)
        key = (table, record_id)
        record = memory.records.get(key)
        if record is None:
            record = self.inner.get(table, record_id)
            if record is not None:
                memory.records[key] = record
        return record

    def put(self, table: str, record: Record) -> None:
        """Keep the record until the transaction commits (other tables: the inner store's put)."""
        memory = self._memory
        record_id = record.get("id") if isinstance(record, dict) else None
        if not memory.depth or table not in self._tables or not isinstance(record_id, str):
            self.inner.put(table, record)
            return
        key = (table, record_id)
        memory.records[key] = record
        memory.changed[key] = None

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record, kept or stored; whether it existed."""
        memory = self._memory
        key = (table, record_id)
        unwritten = key in memory.changed
        memory.records.pop(key, None)
        memory.changed.pop(key, None)
        return self.inner.delete(table, record_id) or unwritten

    def query(
        self,
        table: str,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """The inner store's query, after the table's kept changes are written."""
        self._write_changed(self._memory, table)
        return self.inner.query(table, filters, sort, offset, limit)

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """The inner store's count, after the table's kept changes are written."""
        self._write_changed(self._memory, table)
        return self.inner.count(table, filters)

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """The inner store's iteration, after the table's kept changes are written."""
        self._write_changed(self._memory, table)
        return self.inner.iterate(table, filters)

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # What is not the port (a file's path, a pool's size) is the inner store's.
        return getattr(self.inner, name)

    def _write_changed(self, memory: _Memory, table: str | None) -> None:
        """Write the kept changes (of ``table``, or all), in the order they were first made."""
        if not memory.changed:
            return
        for key in [key for key in memory.changed if table is None or key[0] == table]:
            del memory.changed[key]
            self.inner.put(key[0], memory.records[key])
