"""The storage port: a small, record-level contract every adapter implements.

A record is a JSON-compatible ``dict`` with a string ``id``. Tables and the fields that may be
filtered or sorted on are declared once, in :mod:`governance_core.storage.schema`; an adapter
creates and migrates its own physical schema from those declarations. Typed mapping happens in
the core, never here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

__all__ = ["Filter", "FilterOp", "NullsOrder", "Record", "SortKey", "Store"]

Record = dict[str, Any]
FilterOp = Literal["eq", "ne", "lt", "le", "gt", "ge", "in"]
NullsOrder = Literal["first", "last", "auto"]


@attrs.frozen
class Filter:
    """One condition on a declared field; ``eq``/``ne`` with ``None`` test for null."""

    field: str
    op: FilterOp
    value: Any


@attrs.frozen
class SortKey:
    """One sort key on a declared field; ``auto`` nulls leave placement to the database."""

    field: str
    descending: bool = False
    nulls: NullsOrder = "auto"


@runtime_checkable
class Store(Protocol):
    """What the core needs from storage. Every method is safe to call inside a transaction."""

    def transaction(self) -> AbstractContextManager[None]:
        """A write transaction; nested calls join the outer one. Rolled back on any exception."""
        ...

    def get(self, table: str, record_id: str) -> Record | None:
        """The record with ``record_id``, or None."""
        ...

    def put(self, table: str, record: Record) -> None:
        """Insert the record, or replace the stored record with the same id."""
        ...

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record; whether it existed."""
        ...

    def query(
        self,
        table: str,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """Records matching every filter, in the given order, one page of them."""
        ...

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """How many records match every filter."""
        ...

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """Every matching record in id order, streamed (for exports and recounts)."""
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...
