"""A store that passes a transaction's writes on once, as the transaction commits.

Every span write inserts the span and its idempotency record and rewrites its run (the
aggregates) and often its agent. A bulk request of a hundred spans is a hundred such writes,
each in a savepoint of its own so that a failing item leaves those before it stored.
:class:`WriteBehindStore` wraps any store: inside a transaction it keeps the records written
to the tables it is given, checked and encoded as they are put, answers reads of them from
memory, and passes them on once, table by table, just before the outermost transaction
commits. A run rewritten by a hundred spans is written once; a savepoint that writes only
kept records costs the inner store nothing, since the inner store's own savepoint is opened
only when something is passed on to it inside one. Outside a transaction it passes
everything through.

Built with ``every_transaction=False``, it keeps records only inside
:meth:`~WriteBehindStore.batch`, and a plain transaction is the inner store's own: a
transaction that writes each record once gains nothing from being kept when the inner store
is in-process (SQLite, memory), where one reached over the network (PostgreSQL) gains one
round trip for all its writes. Such a transaction's reads ahead go to an inner store that
reads ahead itself (SQLite).

What it keeps never changes what a caller sees:

- a record is checked and encoded when it is put, so a record the inner store would refuse
  fails the put that gave it (and a change made to it afterwards is not written); a rewrite
  of a record the transaction has written before has its declared fields checked when it is
  put and its JSON encoded (once) when it is passed on;
- a query, count, aggregate or iteration of a kept table first passes that table's kept
  records on, so the store's own filtering and sorting see them;
- a query asked again within a transaction is answered as it was the first time, unless the
  transaction has written to that table since (or taken a savepoint back): until it commits
  nothing but it writes to the inner store, so the answer stands (``ids``, which the inner
  store's triggers write, is always asked);
- a nested transaction (a savepoint) that fails takes back what it kept, and the inner
  store takes back whatever was passed on inside it;
- a read of ``ids`` answers the id of a resource it keeps unwritten as the inner store will
  record it once the resource is passed on;
- every transaction's memory is its thread's own, and is forgotten when the outermost one
  ends: nothing is kept between transactions, so other processes' writes are always seen.

Records it answers are the ones it was given or read: callers treat records as values (they
copy, never change one in place), as they do with every store.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Hashable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from governance_core.storage._common import column_values, decode, encode, matches
from governance_core.storage.protocol import (
    AggregateRow,
    BatchedWrites,
    Filter,
    GetsMany,
    GroupBy,
    PreparedWrites,
    Query,
    ReadsAhead,
    ReadsTogether,
    Record,
    SortKey,
    Store,
)
from governance_core.storage.schema import DAY_COSTS, IDS, TABLES, kinded_tables

__all__ = ["WriteBehindStore"]

_Key = tuple[str, str]
_RUNS = "agent_instances"
"""The table whose writes move the day costs (the inner store's triggers keep them)."""
_ABSENT: Any = object()
# The filters a query of kept records can match in memory exactly as the stores do.
_MEMORY_OPS = frozenset({"eq", "ne", "in"})


def _query_key(
    filters: Sequence[Filter], sort: Sequence[SortKey], offset: int, limit: int | None
) -> Hashable | None:
    """A query's conditions as a key of the transaction's answers; None when not hashable."""
    key = (
        tuple(
            (f.field, f.op, tuple(f.value) if isinstance(f.value, list) else f.value)
            for f in filters
        ),
        tuple(sort), offset, limit,
    )
    try:
        hash(key)
    except TypeError:
        return None
    return key


class _Rewrite:
    """A rewrite of a record the transaction has written before: prepared when passed on."""

    __slots__ = ("record",)

    def __init__(self, record: Record) -> None:
        self.record = record


class _Memory(threading.local):
    """One thread's open transaction: what it keeps, and how to take back each savepoint's."""

    def __init__(self) -> None:
        self.depth = 0
        # Records as last read or written.
        self.records: dict[_Key, Record] = {}
        # Records written and not yet passed on, prepared for the inner store, in write order.
        self.pending: dict[_Key, Any] = {}
        # Per open savepoint, innermost last: each key's record and pending write before it.
        self.undo: list[dict[_Key, tuple[Any, Any]]] = []
        # The inner store's nested transactions opened so far, one per savepoint, outermost
        # first (the outermost transaction's own is not among them).
        self.opened: list[AbstractContextManager[None]] = []
        # Records read ahead and not found: the inner store had none when the transaction
        # read them, and nothing but this transaction writes to it until it commits.
        self.absent: set[_Key] = set()
        # Query results by table, then by the query: each stands until the transaction
        # writes to its table, or a savepoint is taken back.
        self.queries: dict[str, dict[Hashable, list[Record]]] = {}
        # Day costs read ahead (None: none stored): each stands until the transaction writes
        # a run, which the inner store's triggers count in them.
        self.day_costs: dict[_Key, Record | None] = {}


class WriteBehindStore:
    """Wraps ``inner``, keeping the records of ``tables`` (default: all) within a transaction.

    Every transaction keeps them, or with ``every_transaction=False`` only a :meth:`batch`.
    """

    def __init__(
        self,
        inner: Store,
        tables: Collection[str] = tuple(TABLES),
        *,
        every_transaction: bool = True,
    ) -> None:
        self.inner = inner
        # The day costs are never kept: the inner store writes them as it writes runs.
        self._tables = frozenset(tables) - {DAY_COSTS}
        self._every_transaction = every_transaction
        self._memory = _Memory()
        self._kinds = [
            (table.name, table.kind) for table in kinded_tables()
            if table.kind is not None and table.name in self._tables
        ]
        self._preparing: PreparedWrites | None = (
            inner if isinstance(inner, PreparedWrites) else None
        )
        self._batching: BatchedWrites | None = inner if isinstance(inner, BatchedWrites) else None
        self._getting: GetsMany | None = inner if isinstance(inner, GetsMany) else None
        self._reading_ahead: ReadsAhead | None = (
            inner if isinstance(inner, ReadsAhead) else None
        )
        self._together: ReadsTogether | None = (
            inner if isinstance(inner, ReadsTogether) else None
        )

    @property
    def reads_together(self) -> bool:
        """Whether :meth:`read_ahead_records` reads a transaction's first reads together.

        So when every transaction is kept and the inner store reads records and queries
        together (:class:`~governance_core.storage.protocol.ReadsTogether`): one round trip.
        """
        return self._every_transaction and self._together is not None

    def transaction(self) -> AbstractContextManager[None]:
        """The inner store's transaction; kept records are passed on before it commits.

        A nested block opens the inner store's savepoint only once something is passed on
        inside it. Without ``every_transaction``, a transaction outside a :meth:`batch` is the
        inner store's own.
        """
        if self._memory.depth == 0 and not self._every_transaction:
            return self.inner.transaction()
        return self.batch()

    @contextmanager
    def batch(self) -> Iterator[None]:
        """A transaction that keeps its records, whatever ``every_transaction`` says.

        Inside another transaction it is a nested block of it, kept as that one is.
        """
        memory = self._memory
        if memory.depth == 0:
            with self.inner.transaction():
                memory.depth = 1
                try:
                    yield
                    self._pass_on(memory, None)
                finally:
                    memory.depth = 0
                    memory.records = {}
                    memory.pending = {}
                    memory.undo = []
                    memory.opened = []
                    memory.absent = set()
                    memory.queries = {}
                    memory.day_costs = {}
            return
        memory.depth += 1
        memory.undo.append({})
        try:
            yield
        except BaseException as error:
            self._take_back(memory)
            self._close_savepoint(memory, error)
            raise
        else:
            taken = memory.undo.pop()
            if len(memory.undo) > 0:
                # The enclosing savepoint now answers for these keys, as they were before it.
                outer = memory.undo[-1]
                for key, before in taken.items():
                    outer.setdefault(key, before)
            self._close_savepoint(memory, None)
        finally:
            memory.depth -= 1

    def _take_back(self, memory: _Memory) -> None:
        memory.queries.clear()
        memory.day_costs.clear()
        for key, (record, pending) in memory.undo.pop().items():
            if record is _ABSENT:
                memory.records.pop(key, None)
            else:
                memory.records[key] = record
            if pending is _ABSENT:
                memory.pending.pop(key, None)
            else:
                memory.pending[key] = pending

    def _close_savepoint(self, memory: _Memory, error: BaseException | None) -> None:
        """End the inner savepoint of the block now ending, if one was opened for it."""
        if len(memory.opened) == memory.depth - 1:
            savepoint = memory.opened.pop()
            if error is None:
                savepoint.__exit__(None, None, None)
            else:
                savepoint.__exit__(type(error), error, error.__traceback__)

    def _open_savepoints(self, memory: _Memory) -> None:
        """Open the inner store's savepoints of every open block, before writing to it."""
        while len(memory.opened) < memory.depth - 1:
            savepoint = self.inner.transaction()
            savepoint.__enter__()
            memory.opened.append(savepoint)

    def _note(self, memory: _Memory, key: _Key) -> None:
        """Remember how ``key`` stood before the innermost savepoint first changed it."""
        if memory.undo:
            undo = memory.undo[-1]
            if key not in undo:
                undo[key] = (memory.records.get(key, _ABSENT), memory.pending.get(key, _ABSENT))

    def get(self, table: str, record_id: str) -> Record | None:
        """The kept record when there is one, else the inner store's (kept from then on)."""
        memory = self._memory
        if memory.depth and table == IDS:
            kept = self._kept_id(memory, record_id)
            if kept is not None:
                return kept
        if table == DAY_COSTS:
            if (table, record_id) in memory.day_costs:
                return memory.day_costs[(table, record_id)]
            self._pass_on(memory, table)
        if not memory.depth or table not in self._tables:
            return self.inner.get(table, record_id)
        key = (table, record_id)
        record = memory.records.get(key)
        if record is None and key not in memory.absent:
            record = self.inner.get(table, record_id)
            if record is not None:
                memory.records[key] = record
        return record

    def _kept_id(self, memory: _Memory, record_id: str) -> Record | None:
        """The ``ids`` record of a resource this transaction keeps unwritten, else None.

        The inner store records the id as the resource is passed on; until then it is
        answered from the kept record, as the inner store will have it.
        """
        for table, kind in self._kinds:
            key = (table, record_id)
            if key in memory.pending:
                return {
                    "id": record_id, "kind": kind,
                    "account_id": memory.records[key].get("account_id"),
                }
        return None

    def read_ahead(self, table: str, record_ids: Collection[str]) -> None:
        """Read the records of a kept table with ``record_ids`` in one query, for later gets.

        Within a transaction only: the gets of those ids are then answered from memory, found
        or not (until the transaction ends, nothing but it writes to the inner store).
        """
        memory = self._memory
        if not memory.depth or table not in self._tables or not record_ids:
            return
        self._pass_on(memory, table)
        wanted = [Filter("id", "in", list(record_ids))]
        found = {record["id"]: record for record in self.inner.query(table, wanted)}
        for record_id in record_ids:
            key = (table, record_id)
            if key in memory.records:
                continue
            if record_id in found:
                memory.records[key] = found[record_id]
            else:
                memory.absent.add(key)

    def get_many(self, keys: Sequence[_Key]) -> list[Record | None]:
        """The records under ``keys`` (table and id), each as :meth:`get` answers it.

        In a transaction, those of kept tables not yet known are read together first
        (:meth:`read_ahead_records`); the rest are read one by one.
        """
        self.read_ahead_records(keys)
        return [self.get(table, record_id) for table, record_id in keys]

    def read_ahead_records(self, keys: Sequence[_Key], queries: Sequence[Query] = ()) -> None:
        """Read the records under ``keys`` (table and id), and ``queries``, together, for later.

        Within a kept transaction, and only where the inner store reads several in one round
        trip (:class:`~governance_core.storage.protocol.GetsMany`; with ``queries``,
        :class:`~governance_core.storage.protocol.ReadsTogether`): the gets of those keys are
        then answered from memory, found or not, and each query asked again as given is
        answered as it was read, until the transaction writes to its table. A day cost read
        ahead stands until the transaction writes a run. Keys and queries already known are
        not read again. A transaction not kept here is the inner store's: one that reads
        ahead itself (:class:`~governance_core.storage.protocol.ReadsAhead`) is asked to, for
        the keys.
        """
        memory = self._memory
        if not memory.depth:
            if self._reading_ahead is not None:
                # A transaction not kept here: the inner store keeps what it reads for it.
                self._reading_ahead.read_ahead_records(keys)
            return
        runs_kept = any(key[0] == _RUNS for key in memory.pending)
        wanted = [
            key for key in dict.fromkeys(keys)
            if (key[0] == DAY_COSTS and not runs_kept and key not in memory.day_costs)
            or (key[0] in self._tables and key not in memory.records and key not in memory.absent)
        ]
        asked = [
            (query, asking) for query in queries
            if (asking := self._unanswered(memory, query)) is not None
        ]
        if self._together is not None and asked:
            found, answers = self._together.read_together(wanted, [query for query, _ in asked])
            for (query, asking), answer in zip(asked, answers, strict=True):
                memory.queries.setdefault(query.table, {})[asking] = answer
        elif self._getting is not None and wanted:
            found = self._getting.get_many(wanted)
        else:
            return
        for key, record in zip(wanted, found, strict=True):
            if key[0] == DAY_COSTS:
                memory.day_costs[key] = record
            elif record is None:
                memory.absent.add(key)
            else:
                memory.records[key] = record

    def read_together(
        self, keys: Sequence[_Key], queries: Sequence[Query]
    ) -> tuple[list[Record | None], list[list[Record]]]:
        """Each record as :meth:`get` answers it, and each query as :meth:`query` does.

        In a kept transaction, those not known yet are read together first
        (:meth:`read_ahead_records`).
        """
        self.read_ahead_records(keys, queries)
        return [self.get(table, record_id) for table, record_id in keys], [
            self.query(query.table, query.filters, query.sort, query.offset, query.limit)
            for query in queries
        ]

    def _unanswered(self, memory: _Memory, query: Query) -> Hashable | None:
        """The key ``query`` is kept under, when it can be read ahead and is not known yet."""
        table = query.table
        asking = _query_key(query.filters, query.sort, query.offset, query.limit)
        if (
            asking is None or table not in self._tables or table == IDS
            or asking in memory.queries.get(table, {})
            # Its kept records are passed on before it is asked: asked now, it would miss them.
            or any(key[0] == table for key in memory.pending)
        ):
            return None
        return asking

    def know_absent(self, table: str, record_ids: Collection[str]) -> None:
        """Take the records of a kept table with ``record_ids`` as missing, without reading.

        Within a transaction only, for ids no one outside it can know yet (derived from a
        record the transaction made): later gets of them read nothing.
        """
        memory = self._memory
        if not memory.depth or table not in self._tables:
            return
        for record_id in record_ids:
            key = (table, record_id)
            if key not in memory.records:
                memory.absent.add(key)

    def put(self, table: str, record: Record) -> None:
        """Check and keep the record until the transaction commits (others: the inner put)."""
        memory = self._memory
        memory.queries.pop(table, None)
        if table == _RUNS:
            memory.day_costs.clear()
        if not memory.depth or table not in self._tables:
            if memory.depth:
                self._open_savepoints(memory)
            self.inner.put(table, record)
            return
        record_id = record.get("id") if isinstance(record, dict) else None
        if not isinstance(record_id, str):
            column_values(table, record)  # raises the store's ValueError for such a record
        key = (table, str(record_id))
        if key in memory.pending:
            # A run is rewritten by every span of a bulk request: its declared fields are
            # checked now, its JSON once, when it is passed on.
            column_values(table, record)
            prepared: Any = _Rewrite(record)
        else:
            prepared = self._prepare(table, record)
        self._note(memory, key)
        memory.records[key] = record
        # A rewrite keeps its first place in the order writes are passed on.
        memory.pending[key] = prepared

    def _prepare(self, table: str, record: Record) -> Any:
        if self._preparing is not None:
            return self._preparing.prepare(table, record)
        # Checked as every store checks, and copied: a later change to ``record`` is not kept.
        column_values(table, record)
        return decode(encode(record))

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record, kept or stored; whether it existed."""
        memory = self._memory
        memory.queries.pop(table, None)
        if table == _RUNS:
            memory.day_costs.clear()
        if memory.depth:
            self._open_savepoints(memory)
            key = (table, record_id)
            self._note(memory, key)
            memory.records.pop(key, None)
            # Whatever was read ahead of it: the inner store is asked from now on.
            memory.absent.discard(key)
            if (IDS, record_id) in memory.records:
                # Deleting a resource may delete its id's record: read it again if asked.
                self._note(memory, (IDS, record_id))
                del memory.records[(IDS, record_id)]
            unwritten = memory.pending.pop(key, None) is not None
            return self.inner.delete(table, record_id) or unwritten
        return self.inner.delete(table, record_id)

    def query(
        self,
        table: str,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """The inner store's query, after the table's kept records are passed on.

        An unsorted first page filtered by equality (a look-up, such as "does any span name
        this parent") leaves them kept: the records it keeps are matched in memory and the
        inner store answers for the rest. Within a transaction the answer is kept until the
        transaction writes to the table (or takes a savepoint back), and given again (a copy)
        when the same query is asked.
        """
        memory = self._memory
        asked = (
            _query_key(filters, sort, offset, limit)
            if memory.depth and table in self._tables and table != IDS else None
        )
        if asked is not None:
            found = memory.queries.get(table, {}).get(asked)
            if found is not None:
                return list(found)
        found = None
        if not (sort or offset) and all(f.op in _MEMORY_OPS for f in filters):
            kept = {key[1] for key in memory.pending if key[0] == table}
            if kept:
                found = self._query_kept(table, filters, limit, kept)
        if found is None:
            self._pass_on(memory, table)
            found = self.inner.query(table, filters, sort, offset, limit)
        if asked is not None:
            memory.queries.setdefault(table, {})[asked] = found
            return list(found)
        return found

    def _query_kept(
        self, table: str, filters: Sequence[Filter], limit: int | None, kept: set[str]
    ) -> list[Record]:
        """A query's first page in id order, the kept records of ``table`` (by id) matched here."""
        records = self._memory.records
        found = [
            record for record in self.inner.query(
                table, filters, limit=None if limit is None else limit + len(kept)
            )
            if record["id"] not in kept
        ]
        found += [
            records[(table, record_id)] for record_id in kept
            if matches(records[(table, record_id)], filters)
        ]
        found.sort(key=lambda record: str(record["id"]))
        return found if limit is None else found[:limit]

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """The inner store's count, after the table's kept records are passed on."""
        self._pass_on(self._memory, table)
        return self.inner.count(table, filters)

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """The inner store's iteration, after the table's kept records are passed on."""
        self._pass_on(self._memory, table)
        return self.inner.iterate(table, filters)

    def aggregate(
        self,
        table: str,
        group_by: Sequence[GroupBy] = (),
        sums: Sequence[str] = (),
        filters: Sequence[Filter] = (),
    ) -> list[AggregateRow]:
        """The inner store's aggregate, after the table's kept records are passed on."""
        self._pass_on(self._memory, table)
        return self.inner.aggregate(table, group_by, sums, filters)

    def close(self) -> None:
        """Close the inner store."""
        self.inner.close()

    def __getattr__(self, name: str) -> Any:
        # What is not the port (a file's path, a pool's size) is the inner store's.
        return getattr(self.inner, name)

    def _pass_on(self, memory: _Memory, table: str | None) -> None:
        """Write the kept records (of ``table``, or all) to the inner store, table by table.

        The day costs are the inner store's to keep as runs are written: for them, the kept
        runs are passed on.
        """
        if not memory.pending:
            return
        if table == DAY_COSTS:
            table = "agent_instances"
        keys = [key for key in memory.pending if table is None or key[0] == table]
        if not keys:
            return
        self._open_savepoints(memory)
        by_table: dict[str, list[Any]] = {}
        for key in keys:
            self._note(memory, key)
            prepared = memory.pending.pop(key)
            if type(prepared) is _Rewrite:
                prepared = self._prepare(key[0], prepared.record)
            by_table.setdefault(key[0], []).append(prepared)
            # Its id is the inner store's to answer now (read ahead, it was found absent).
            memory.absent.discard((IDS, key[1]))
        ending = table is None and memory.depth == 1
        with self._batching.batched(ending=ending) if self._batching else nullcontext():
            for name, prepared in by_table.items():
                if self._preparing is not None:
                    self._preparing.write_prepared(name, prepared)
                else:
                    for record in prepared:
                        self.inner.put(name, record)
