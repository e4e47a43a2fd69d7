"""The storage port: a small, record-level contract every adapter implements.

A record is a JSON-compatible ``dict`` with a string ``id``. Tables and the fields that may be
filtered or sorted on are declared once, in :mod:`governance_core.storage.schema`; an adapter
creates and migrates its own physical schema from those declarations. Typed mapping happens in
the core, never here.

Every adapter means the same by a query: ``eq``/``ne`` with ``None`` test for null, other
comparisons never match a null, ``in`` with no values matches nothing, ties in any order are
broken by ``id`` ascending, text orders by code point, and where ``auto`` nulls sort is the
adapter's own choice. Every adapter raises ``ValueError`` for an unknown table, an undeclared
field, an unknown operator or nulls order, a negative offset or limit, a record without a
string ``id`` or holding what JSON cannot, and a declared field (or a filter on it) holding a
value of another type than declared (``text``: a string; ``integer``: a signed 64-bit integer
or a boolean; ``real``: a finite float or an integer up to 2**53). A busy database is
:class:`~governance_core.errors.TemporarilyUnavailable`. The executable form of this contract
is :class:`governance_core.testing.StoreContract`.

An aggregate (:meth:`Store.aggregate`) means the same on every adapter too: rows are grouped by
the values of their ``group_by`` keys (a null key is a group of its own; a ``day`` key is the
first ten characters, ``YYYY-MM-DD``, of a text timestamp in the library's fixed-width UTC
form, and of any other text, cut at a NUL as SQLite cuts it), only groups holding a row are
answered, ordered by key with nulls first and text by
code point; a sum skips nulls, is None when every value is null, and is an ``int`` over an
integer field and a ``float`` over a real one. ``ValueError`` for a ``day`` key on a field
that is not text, a sum over a text field or a field named twice, and an integer sum outside
a signed 64-bit integer.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from governance_core.models.records import Record

__all__ = [
    "AggregateRow",
    "BatchedWrites",
    "ChangeMarks",
    "Filter",
    "FilterOp",
    "GetsMany",
    "GroupBy",
    "NullsOrder",
    "PreparedWrites",
    "Query",
    "ReadAhead",
    "ReadsAhead",
    "ReadsTogether",
    "Record",
    "SortKey",
    "Store",
    "TakesTurns",
]

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


@attrs.frozen
class Query:
    """A query as :meth:`Store.query` takes it, for reading ahead (:class:`ReadsTogether`)."""

    table: str
    filters: tuple[Filter, ...] = ()
    sort: tuple[SortKey, ...] = ()
    offset: int = 0
    limit: int | None = None


@attrs.frozen
class GroupBy:
    """One grouping key of an aggregate: a declared field's value, or (``day``) its date.

    ``day`` groups a text timestamp by its first ten characters (``YYYY-MM-DD``, the UTC date
    of the library's stored form; any text is cut at a NUL first), so a plot per day is one
    query whatever the number of rows.
    """

    field: str
    day: bool = False


@attrs.frozen
class AggregateRow:
    """One group of an aggregate: its key (one value per ``group_by``), rows and sums.

    ``sums`` holds one value per summed field, in the order asked: an ``int`` for an integer
    field, a ``float`` for a real one, None when every value of the group is null.
    """

    key: tuple[Any, ...]
    count: int
    sums: tuple[int | float | None, ...] = ()


@runtime_checkable
class Store(Protocol):
    """What the core needs from storage. Every method is safe to call inside a transaction."""

    def transaction(self) -> AbstractContextManager[None]:
        """Open a write transaction; an exception leaving the block rolls back its writes.

        A nested block is a savepoint: an exception leaving it rolls back only that block's
        writes, and the enclosing transaction may go on; the outermost block commits.
        """
        ...

    def get(self, table: str, record_id: str) -> Record | None:
        """Return the record with ``record_id``, or None."""
        ...

    def put(self, table: str, record: Record) -> None:
        """Insert the record, or replace the stored record with the same id."""
        ...

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record; return whether it existed."""
        ...

    def query(
        self,
        table: str,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """Return the records matching every filter, in the given order, one page of them."""
        ...

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """Count the records matching every filter."""
        ...

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """Yield every matching record in id order, streamed (for exports and recounts)."""
        ...

    def aggregate(
        self,
        table: str,
        group_by: Sequence[GroupBy] = (),
        sums: Sequence[str] = (),
        filters: Sequence[Filter] = (),
    ) -> list[AggregateRow]:
        """Count the records matching every filter, and sum ``sums``, per group of ``group_by``.

        The database does the work (one grouped query), so plots and totals over any number
        of records cost what their groups cost to read from an index, not a scan in Python.
        Without ``group_by`` there is one row (key ``()``) when any record matches, else none.
        """
        ...

    def close(self) -> None:
        """Release connections and files."""
        ...


@runtime_checkable
class ChangeMarks(Protocol):
    """An optional capability: telling cheaply that no record of some tables can have changed.

    The core keeps what it reads of such tables (the tokens and accounts a caller
    authenticates with) for as long as their mark stays the same, and reads them again
    otherwise. A store without it has every such read made again.
    """

    def change_mark(self, tables: Collection[str]) -> Hashable:
        """Return a mark of ``tables`` (each a marked table of the schema) as they stand now.

        Two equal marks promise that no record of ``tables`` changed in between, by any
        writer: this store, another connection or process, plain SQL. A new mark promises
        nothing, and a mark taken inside an open transaction equals no other.
        """
        ...


@runtime_checkable
class PreparedWrites(Protocol):
    """An optional capability: checking and encoding a record apart from writing it.

    The core's write-behind wrapper prepares each record as it is put (so a record the store
    would refuse fails that put) and writes a transaction's records table by table as it
    commits, many at a time. A store without it has each record checked by the shared
    checks, copied, and written with :meth:`Store.put`.
    """

    def prepare(self, table: str, record: Record) -> Any:
        """Check and encode ``record`` for ``table`` as :meth:`Store.put` would; ValueError alike.

        What is returned is the store's own and immutable: a later change to ``record`` does
        not change what :meth:`write_prepared` writes.
        """
        ...

    def write_prepared(self, table: str, prepared: Sequence[Any]) -> None:
        """Write records prepared for ``table``, in order, as as many puts would."""
        ...


@runtime_checkable
class ReadsAhead(Protocol):
    """An optional capability: reading a transaction's first records together, for its gets.

    SQLite reads them with one statement and answers each key's next get in the transaction
    from what it read. The write-behind wrapper asks it to for a transaction it does not keep
    (a single write): ``Governance`` reads a write's idempotency record together with what
    its preparation names (a span write's run and the run's agent).
    """

    def read_ahead_records(self, keys: Sequence[tuple[str, str]]) -> None:
        """Read the records under ``keys`` (table and id); each one's next get reads nothing.

        Inside a transaction only, and until the transaction writes the record.
        """
        ...


@runtime_checkable
class ReadAhead(ReadsAhead, Protocol):
    """An optional capability: reading many records by id at once, for later gets.

    The core's write-behind wrapper offers it within a transaction: a bulk request reads the
    idempotency records of all its items in one query, and each item's look-up is answered
    from what was read (found or not). Records whose ids no one outside the transaction can
    know yet (derived from a record it made) are known missing without a read. Its
    ``read_ahead_records`` reads only where the store beneath reads several records
    together (:class:`GetsMany`, or :class:`ReadsAhead` for a transaction it does not keep).
    """

    def read_ahead(self, table: str, record_ids: Collection[str]) -> None:
        """Read the records of ``table`` with ``record_ids``; later gets of them read nothing."""
        ...

    def know_absent(self, table: str, record_ids: Collection[str]) -> None:
        """Take the records of ``table`` with ``record_ids`` as missing: gets read nothing."""
        ...


@runtime_checkable
class GetsMany(Protocol):
    """An optional capability: reading records of several tables in one round trip.

    PostgreSQL sends the reads in one pipeline; inside a transaction whose first statements
    they are, with its BEGIN too. SQLite reads them with one ``UNION ALL``. The write-behind
    wrapper reads a kept write's idempotency record, run and agent with it as the write's
    transaction opens.
    """

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Record | None]:
        """The records under ``keys`` (table and id), in order, None for each one missing."""
        ...


@runtime_checkable
class ReadsTogether(Protocol):
    """An optional capability: reading records by id and answering queries in one round trip.

    PostgreSQL sends them in one pipeline, with the transaction's ``BEGIN`` when they are its
    first statements. The write-behind wrapper reads what a kept write will read first with
    it: a decision's run, its agent's cost of the day and the run's last allowed tool call.
    """

    def read_together(
        self, keys: Sequence[tuple[str, str]], queries: Sequence[Query]
    ) -> tuple[list[Record | None], list[list[Record]]]:
        """The records under ``keys``, and the answer of each of ``queries``, in order.

        Each record as :meth:`GetsMany.get_many` answers it, each answer as
        :meth:`Store.query` does.
        """
        ...


@runtime_checkable
class BatchedWrites(Protocol):
    """An optional capability: sending several writes of a transaction together.

    The core's write-behind wrapper passes a transaction's records on, table by table, inside
    ``batched()``; PostgreSQL sends them in one pipeline (one round trip, not one a table).
    """

    def batched(self, *, ending: bool = False) -> AbstractContextManager[None]:
        """A block whose writes may be sent together; errors are raised by its end at the latest.

        ``ending`` says the block is the last work of the outermost transaction: the store may
        commit it with the block's writes (then nothing may run in the transaction after it).
        """
        ...


@runtime_checkable
class TakesTurns(Protocol):
    """An optional capability: making transactions of one name run one at a time.

    PostgreSQL runs transactions side by side at SERIALIZABLE isolation and cancels one of
    two that read what the other writes. It tracks reads by index page, so two large batches
    that look up and insert ids in the same indexes (two OTLP export steps) cancel each other
    almost every time, however often they are run again. Batches that take turns never
    collide. A store whose writers take turns already (SQLite) lacks the capability.
    """

    def turn(self, name: str) -> AbstractContextManager[None]:
        """Hold the turn ``name`` around the outermost transaction this block opens.

        Blocks of the same name run one at a time, in every process on the store; the turn
        is taken before the transaction's snapshot, so a block sees every write its
        predecessor committed. A busy wait raises ``temporarily_unavailable``.
        """
        ...

    def alone(self) -> AbstractContextManager[None]:
        """Run the outermost transactions this block opens while no other transaction runs.

        Every transaction holds a share of the store's writes from before its snapshot; one
        opened alone waits for those under way to end and holds new ones back until it
        ends, in every process on the store. It overlaps no other writer, so none can
        cancel it: a write cancelled by a collision is run again alone. A busy wait raises
        ``temporarily_unavailable``; inside a transaction the block runs as it is.
        """
        ...
