"""The in-memory reference adapter: the executable meaning of the storage contract."""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from governance_core.storage._common import (
    DAY_LENGTH,
    check_aggregate,
    check_key,
    check_marked,
    check_page,
    check_query,
    column_values,
    decode,
    encode,
    fold_groups,
    matches,
)
from governance_core.storage.protocol import AggregateRow, Filter, GroupBy, Record, SortKey
from governance_core.storage.schema import DAY_COSTS, IDS, TABLES, day_cost_id, kinded_tables

__all__ = ["MemoryStore"]


class MemoryStore:
    """Keeps records as JSON text in dictionaries; transactions keep an undo log.

    Inserting a record of a resource table records its id in ``ids``, and a write of a run
    moves its cost between its agent's day costs (as SQL adapters' triggers do; see
    :data:`~governance_core.storage.schema.IDS` and
    :data:`~governance_core.storage.schema.DAY_COSTS`).

    One lock serialises every access, and a transaction holds it throughout, so other threads
    see only committed data. Null ordering under ``auto`` follows SQLite's (nulls sort lowest)
    so the two reference adapters agree everywhere; the contract suite does not assume it of
    other adapters.
    """

    def __init__(self) -> None:
        self._tables: dict[str, dict[str, str]] = {name: {} for name in TABLES}
        self._ids = self._tables[IDS]
        self._kinds = {table.name: table.kind for table in kinded_tables() if table.kind}
        self._lock = threading.RLock()
        # One undo log per open block, innermost last: a block that fails undoes its own.
        self._undo: list[dict[tuple[str, str], str | None]] = []
        # Each table's latest write, for change_mark.
        self._writes = itertools.count(1)
        self._written: dict[str, int] = {}

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Serialise writers; a block that fails undoes its own changes (nested: a savepoint)."""
        with self._lock:
            undo: dict[tuple[str, str], str | None] = {}
            self._undo.append(undo)
            try:
                yield
            except BaseException:
                self._rollback(undo)
                raise
            finally:
                self._undo.pop()
            if self._undo:
                # The enclosing block now answers for these changes, oldest value first.
                outer = self._undo[-1]
                for key, previous in undo.items():
                    outer.setdefault(key, previous)

    def _rollback(self, undo: dict[tuple[str, str], str | None]) -> None:
        for (table, record_id), previous in undo.items():
            if previous is None:
                self._tables[table].pop(record_id, None)
            else:
                self._tables[table][record_id] = previous

    def _remember(self, table: str, record_id: str) -> None:
        self._written[table] = next(self._writes)
        undo = self._undo[-1]
        if (table, record_id) not in undo:
            undo[(table, record_id)] = self._tables[table].get(record_id)

    def get(self, table: str, record_id: str) -> Record | None:
        """Return the record with ``record_id``, or None."""
        check_key(table, record_id)
        with self._lock:
            text = self._tables[table].get(record_id)
        return None if text is None else decode(text)

    def put(self, table: str, record: Record) -> None:
        """Insert or replace the record."""
        self.write_prepared(table, [self.prepare(table, record)])

    def prepare(self, table: str, record: Record) -> tuple[str, str]:
        """Check and encode a record for :meth:`write_prepared`: its id and its JSON."""
        column_values(table, record)
        return record["id"], encode(record)

    def write_prepared(self, table: str, prepared: Sequence[tuple[str, str]]) -> None:
        """Write prepared records in order (a new resource's id is recorded in ``ids``)."""
        kind = self._kinds.get(table)
        rows = self._tables[table]
        with self.transaction():
            for record_id, text in prepared:
                if kind is not None and record_id not in rows and record_id not in self._ids:
                    self._remember(IDS, record_id)
                    self._ids[record_id] = encode({
                        "id": record_id, "kind": kind,
                        "account_id": decode(text).get("account_id"),
                    })
                self._remember(table, record_id)
                if table == _RUNS:
                    self._move_day_cost(rows.get(record_id), text)
                rows[record_id] = text

    def _move_day_cost(self, old: str | None, new: str | None) -> None:
        """Move a run's cost from the day cost it counted in (``old``) to its ``new`` one's."""
        before, after = (None if text is None else _day_cost(decode(text)) for text in (old, new))
        if before == after:
            return
        costs = self._tables[DAY_COSTS]
        for counted, sign in ((before, -1), (after, 1)):
            if counted is None:
                continue
            record_id, agent_id, day, cost = counted
            held = costs.get(record_id)
            if held is None and sign < 0:
                continue
            self._remember(DAY_COSTS, record_id)
            total = 0.0 if held is None else decode(held)["total_cost"]
            costs[record_id] = encode({
                "id": record_id, "agent_id": agent_id, "day": day,
                "total_cost": total + sign * cost,
            })

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record; return whether it existed."""
        check_key(table, record_id)
        with self.transaction():
            if record_id not in self._tables[table]:
                return False
            self._remember(table, record_id)
            if table == _RUNS:
                self._move_day_cost(self._tables[table][record_id], None)
            del self._tables[table][record_id]
            kind = self._kinds.get(table)
            held = self._ids.get(record_id)
            if kind is not None and held is not None and decode(held)["kind"] == kind:
                self._remember(IDS, record_id)
                del self._ids[record_id]
            return True

    def _matching(self, table: str, filters: Sequence[Filter]) -> list[Record]:
        with self._lock:
            texts = list(self._tables[table].values())
        records = [decode(text) for text in texts]
        return [r for r in records if matches(r, filters)]

    def query(
        self,
        table: str,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """Return the matching records, sorted, one page of them."""
        check_query(table, filters, sort)
        check_page(offset, limit)
        records = self._matching(table, filters)
        records.sort(key=lambda r: r["id"])
        for key in reversed(sort):
            records.sort(key=_sort_value(key), reverse=key.descending)
        end = None if limit is None else offset + limit
        return records[offset:end]

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """Count the matching records."""
        check_query(table, filters)
        return len(self._matching(table, filters))

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """Yield the matching records in id order (arguments are checked at once)."""
        check_query(table, filters)
        return self._iterate(table, filters)

    def _iterate(self, table: str, filters: Sequence[Filter]) -> Iterator[Record]:
        yield from self.query(table, filters)

    def aggregate(
        self,
        table: str,
        group_by: Sequence[GroupBy] = (),
        sums: Sequence[str] = (),
        filters: Sequence[Filter] = (),
    ) -> list[AggregateRow]:
        """Count and sum the matching records per group (see :meth:`Store.aggregate`)."""
        summed = check_aggregate(table, group_by, sums, filters)
        types = {column.name: column.type for column in TABLES[table].columns}
        keys = [(g.field, g.day, types.get(g.field, "text")) for g in group_by]
        return fold_groups(
            (
                [
                    *(_group_value(record.get(name), day, kind) for name, day, kind in keys),
                    *(record.get(column.name) for column in summed),
                ]
                for record in self._matching(table, filters)
            ),
            len(keys), summed,
        )

    def change_mark(self, tables: Collection[str]) -> Hashable:
        """A mark of ``tables`` (see :class:`~governance_core.storage.protocol.ChangeMarks`).

        Every write of this store is counted per table (no other writer can reach it).
        """
        marked = check_marked(tables)
        with self._lock:
            if self._undo:
                return object()
            return tuple(self._written.get(table, 0) for table in marked)

    def close(self) -> None:
        """Release nothing: the records live as long as the object."""


def _group_value(value: Any, day: bool, kind: str) -> Any:
    # As a database column holds it: a boolean is an integer, a real is a float.
    if value is None:
        return None
    if day:
        return value.partition("\x00")[0][:DAY_LENGTH]
    if kind == "real":
        return float(value)
    return int(value) if type(value) is bool else value


def _sort_value(key: SortKey) -> Callable[[Record], tuple[int, Any]]:
    # Python sorts are stable and ``reverse`` keeps ties in place, so nulls get a rank that
    # lands them where asked after the reversal.
    nulls = key.nulls
    if nulls == "auto":
        nulls = "last" if key.descending else "first"
    null_rank = 0 if (nulls == "first") != key.descending else 2

    def value(record: Record) -> tuple[int, Any]:
        field = record.get(key.field)
        return (null_rank, 0) if field is None else (1, field)

    return value


_RUNS = "agent_instances"


def _day_cost(run: Record) -> tuple[str, str, str, float] | None:
    """Where a stored run's cost counts: its day cost's id, agent, day and cost; or None.

    A run without a cost, a start or an agent counts nowhere.
    """
    cost, started, agent_id = run.get("total_cost"), run.get("started_at"), run.get("agent_id")
    if cost is None or started is None or agent_id is None:
        return None
    day = str(started)[:10]
    return day_cost_id(agent_id, day), agent_id, day, float(cost)
