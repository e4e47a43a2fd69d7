"""The SQLite adapter (through sqlite-utils): WAL, ``BEGIN IMMEDIATE`` writers, own migrations.

Each table holds each declared field in its own indexed column and the rest of the record as
JSON in ``data``. A declared field whose value the column gives back as it is (text in a text
column, an integer in an integer one, a float in a real one) is written to ``data`` as ``null``,
which keeps its place among the members: a read puts the column's value there. A record is
stored once, not twice (a span takes about 250 bytes less). Driver errors are translated: a
busy or locked database becomes :class:`~governance_core.errors.TemporarilyUnavailable` with
``retry_after_ms``.
"""

from __future__ import annotations

import contextlib
import functools
import random
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager
from math import copysign
from pathlib import Path
from typing import Any, TypeVar

import sqlite_utils

from governance_core.errors import TemporarilyUnavailable
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
    pages_by_id,
    sorted_groups,
)
from governance_core.storage._writer_queue import WriterQueue
from governance_core.storage.protocol import AggregateRow, Filter, GroupBy, Record, SortKey
from governance_core.storage.schema import (
    DAY_COSTS,
    IDS,
    SCHEMA_VERSION,
    STORE_KEPT,
    TABLES,
    TOOL_CALL_NUMBERS,
    TOOL_CALLS_NUMBERED_IN,
    ColumnType,
    Table,
    kinded_tables,
)

__all__ = ["BUSY_TIMEOUT_MS", "CHECKPOINT_INTERVAL_S", "RETRY_AFTER_MS", "SQLiteStore"]

BUSY_TIMEOUT_MS = 5000
"""How long a statement waits for another connection's lock before the database counts as busy."""
RETRY_AFTER_MS = 250
"""The ``retry_after_ms`` a busy database answers with."""
CHECKPOINT_INTERVAL_S = 0.2
"""How often a file store's checkpointer moves committed pages from the WAL into the file."""
_FALLBACK_CHECKPOINT_PAGES = 20_000
_T = TypeVar("_T")
_FIRST_PAUSE_S = 0.0005
_LAST_PAUSE_S = 0.004

_SQL_TYPES: dict[ColumnType, type] = {"text": str, "integer": int, "real": float}
# The JSON types a column's backfill copies; values of any other type stay null, as on a put.
_JSON_TYPES: dict[ColumnType, tuple[str, ...]] = {
    "text": ("text",),
    "integer": ("integer", "true", "false"),
    "real": ("integer", "real"),
}
_OPS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_BUSY_CODES = frozenset({sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED})
# How many reads one UNION ALL of get_many holds: SQLite refuses a compound select of more
# than 500 by default.
_GETS_A_STATEMENT = 200
# How many rows of one query a write transaction keeps the column values of (see _Link).
_REMEMBERED_ROWS = 512


def _lean_row(table: str) -> str:
    """The data of a row of a table the store keeps, whose members its columns hold (_Layout)."""
    return encode(dict.fromkeys(["id", *(column.name for column in TABLES[table].columns)]))


_LEAN_ID = _lean_row(IDS)
_LEAN_DAY_COST = _lean_row(DAY_COSTS)


class _Link:
    """One connection, how deeply its user is nested in transactions, and the rows it holds.

    ``stored`` has the column values (``id`` first) of the rows the write transaction under
    way has read or written, by table and id: a rewrite of one of them sets only the columns
    that changed (see :meth:`SQLiteStore.write_prepared`). ``ahead`` has the records read
    ahead for the transaction's next gets (:meth:`SQLiteStore.read_ahead_records`; None
    where missing), each until it is got or written. Both are emptied as a transaction
    begins and ends, and when a savepoint is rolled back.
    """

    __slots__ = ("ahead", "conn", "depth", "stored")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn
        self.depth = 0
        self.stored: dict[tuple[str, str], Sequence[Any]] = {}
        self.ahead: dict[tuple[str, str], Record | None] = {}


class _Lending:
    """``with store._use() as link``: the caller's link, busy errors translated.

    A class rather than a generator-based context manager: it is entered on every statement.
    """

    __slots__ = ("_store",)

    def __init__(self, store: SQLiteStore) -> None:
        self._store = store

    def __enter__(self) -> _Link:
        store = self._store
        if store._shared is None:
            return store._thread_link()
        store._shared_lock.acquire()
        return store._shared

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: object
    ) -> None:
        if self._store._shared is not None:
            self._store._shared_lock.release()
        if isinstance(error, sqlite3.OperationalError) and _is_busy(error):
            raise TemporarilyUnavailable(
                "the database is busy, retry shortly", retry_after_ms=RETRY_AFTER_MS
            ) from error


class SQLiteStore:
    """A store in one SQLite file (or ``":memory:"``), safe to share between threads.

    A file gets one connection per thread (a thread's connection is closed once the thread has
    ended); ``":memory:"`` has one connection shared under a lock, since each connection to it
    would see a database of its own. ``busy_timeout_ms`` is how long a write waits for another
    writer before answering :class:`~governance_core.errors.TemporarilyUnavailable`.

    A file's writers, in every process that opens it through this adapter, queue on a lock file
    beside it (``<file>-lock``; see :mod:`governance_core.storage._writer_queue`).

    A file's WAL is checkpointed by a thread of the store's own, not by a commit: SQLite's
    automatic checkpoint runs inside the commit that crosses 1,000 pages, which made about
    one span write in a hundred take ten times as long as the others.
    """

    def __init__(
        self, path: str | Path = ":memory:", *, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> None:
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int):
            raise ValueError(f"busy_timeout_ms must be an integer, not {busy_timeout_ms!r}")
        if busy_timeout_ms < 0:
            raise ValueError(f"busy_timeout_ms must be 0 or more, not {busy_timeout_ms}")
        self.path = str(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._local = threading.local()
        self._links: list[tuple[threading.Thread, _Link]] = []
        self._links_lock = threading.Lock()
        self._shared_lock = threading.RLock()
        # The outermost write transactions of a file, one at a time across threads and processes.
        self._writer = WriterQueue(self.path)
        self._shared = _Link(self._connect()) if self.path == ":memory:" else None
        self._put_sql = {table.name: _put_sql(table) for table in TABLES.values()}
        self._layouts = {table.name: _Layout(table) for table in TABLES.values()}
        # The statement reading each set of marked tables' counts, once checked.
        self._mark_sql: dict[tuple[str, ...], str] = {}
        with self._use() as link:
            _migrate(link.conn, self.busy_timeout_ms / 1000)
        self._checkpointer = None if self._shared is not None else _Checkpointer(self._connect())
        if self._checkpointer is not None:
            weakref.finalize(self, self._checkpointer.stop_soon)

    # -- connections ---------------------------------------------------------------------
    def _connect(self) -> sqlite3.Connection:
        # A file's connections wait for a busy database through _patiently, not SQLite's
        # busy handler.
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            check_same_thread=False,
            timeout=self.busy_timeout_ms / 1000 if self.path == ":memory:" else 0,
        )
        if self.path != ":memory:":
            _patiently(
                lambda: conn.execute("PRAGMA journal_mode = WAL"), self.busy_timeout_ms / 1000
            )
            conn.execute("PRAGMA synchronous = NORMAL")
            # A statement keeps the pages it changes as they were, to be taken back alone; past
            # 64 KiB SQLite moves them to a temporary file, which then takes every later
            # statement's for the rest of the transaction: in a bulk request or an OTLP step,
            # four times the bytes the WAL takes. One statement of this adapter changes a few
            # records' pages (migrations, which change whole tables, use files: _migrate).
            conn.execute("PRAGMA temp_store = MEMORY")
            # The checkpointer keeps the WAL far below this; a commit checkpoints only where no
            # checkpointer runs (a process forked from the one that opened the store).
            conn.execute(f"PRAGMA wal_autocheckpoint = {_FALLBACK_CHECKPOINT_PAGES}")
        return conn

    def _thread_link(self) -> _Link:
        try:
            link: _Link = self._local.link
        except AttributeError:
            link = _Link(self._connect())
            with self._links_lock:
                # Threads that have ended keep no connection: servers that start a thread per
                # request would otherwise run out of file descriptors.
                for thread, old in [entry for entry in self._links if not entry[0].is_alive()]:
                    old.conn.close()
                    self._links.remove((thread, old))
                self._links.append((threading.current_thread(), link))
            self._local.link = link
        return link

    def _use(self) -> _Lending:
        """Lend the caller's connection (the shared one under its lock), translating errors."""
        return _Lending(self)

    # -- the port ------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` on the outermost call; a nested call is a savepoint."""
        with self._use() as link:
            outermost = link.depth == 0
            savepoint = f"nested_{link.depth}"
            if outermost:
                self._begin(link.conn)
                link.stored.clear()
                link.ahead.clear()
            else:
                link.conn.execute(f"SAVEPOINT {savepoint}")
            link.depth += 1
            try:
                yield
                link.conn.execute("COMMIT" if outermost else f"RELEASE {savepoint}")
            except BaseException:
                # A failed COMMIT leaves the transaction open; some errors end it by themselves.
                if link.conn.in_transaction:
                    if outermost:
                        link.conn.execute("ROLLBACK")
                    else:
                        link.conn.execute(f"ROLLBACK TO {savepoint}")
                        link.conn.execute(f"RELEASE {savepoint}")
                # What the savepoint wrote is gone: rows are read again before a rewrite.
                link.stored.clear()
                link.ahead.clear()
                raise
            finally:
                link.depth -= 1
                if outermost:
                    link.stored.clear()
                    link.ahead.clear()
                    if self._shared is None:
                        self._writer.release()

    def _begin(self, conn: sqlite3.Connection) -> None:
        """``BEGIN IMMEDIATE``, once first in the file's :class:`WriterQueue`.

        The queue holds this process's writers and those of other processes using this adapter;
        any other writer of the file is waited for by :func:`_patiently`'s short pauses, not
        SQLite's busy handler. Either wait gives up after ``busy_timeout_ms``.
        """
        if self._shared is not None:
            conn.execute("BEGIN IMMEDIATE")
            return
        if not self._writer.acquire(self.busy_timeout_ms / 1000):
            raise TemporarilyUnavailable(
                "the database is busy, retry shortly", retry_after_ms=RETRY_AFTER_MS
            )
        try:
            self._execute(conn, 0, "BEGIN IMMEDIATE")
        except BaseException:
            self._writer.release()
            raise

    def _execute(
        self, conn: sqlite3.Connection, depth: int, sql: str, params: Sequence[Any] = ()
    ) -> sqlite3.Cursor:
        """Run a statement; outside a transaction, a busy database is waited for patiently."""
        try:
            return conn.execute(sql, params)
        except sqlite3.OperationalError as error:
            if depth or not _is_busy(error):
                raise
        return _patiently(lambda: conn.execute(sql, params), self.busy_timeout_ms / 1000)

    def get(self, table: str, record_id: str) -> Record | None:
        """Return the record with ``record_id``, or None."""
        check_key(table, record_id)
        layout = self._layouts[table]
        with self._use() as link:
            if link.ahead and (table, record_id) in link.ahead:
                return link.ahead.pop((table, record_id))
            cursor = self._execute(link.conn, link.depth, layout.get, (record_id,))
            row = cursor.fetchone()
            if row is not None and link.depth:
                link.stored[(table, record_id)] = row[1:]
        return None if row is None else layout.record(row)

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Record | None]:
        """The records under ``keys`` (table and id), None where missing: one statement.

        Each answered as :meth:`get` answers it, and kept for a rewrite as a get in the
        transaction keeps it.
        """
        for table, record_id in keys:
            check_key(table, record_id)
        if not keys:
            return []
        with self._use() as link:
            return self._get_many(link, keys)

    def _get_many(self, link: _Link, keys: Sequence[tuple[str, str]]) -> list[Record | None]:
        found: list[Record | None] = [None] * len(keys)
        for start in range(0, len(keys), _GETS_A_STATEMENT):
            tables, params = zip(*keys[start:start + _GETS_A_STATEMENT], strict=True)
            sql = _union_of_gets(tables)
            for row in self._execute(link.conn, link.depth, sql, params).fetchall():
                # The key's place is the row's last value; its table's values come first.
                place = start + row[-1]
                table, record_id = keys[place]
                layout = self._layouts[table]
                if link.depth:
                    link.stored[(table, record_id)] = row[1:layout.width]
                found[place] = layout.record(row)
        return found

    def read_ahead_records(self, keys: Sequence[tuple[str, str]]) -> None:
        """Read the records under ``keys`` (table and id) with one statement, for later gets.

        Inside a transaction only: each key's next get in it is answered from what was read,
        found or not, unless the transaction writes that record first. The tables the store's
        triggers write (``ids``, the agents' day costs) are not read ahead.
        """
        wanted = [key for key in keys if key[0] not in STORE_KEPT]
        for table, record_id in wanted:
            check_key(table, record_id)
        with self._use() as link:
            if link.depth and wanted:
                link.ahead.update(zip(wanted, self._get_many(link, wanted), strict=True))

    def put(self, table: str, record: Record) -> None:
        """Insert or replace the record and its declared columns.

        On the tables rewritten on every span, a replacement that leaves every indexed column
        as it was rewrites the row only, not its indexes (each is a page more a commit writes).
        """
        self.write_prepared(table, [self.prepare(table, record)])

    def prepare(self, table: str, record: Record) -> list[Any]:
        """Check and encode a record for :meth:`write_prepared`: its column values and JSON."""
        values = column_values(table, record)
        values.append(encode(self._layouts[table].lean(record, values)))
        return values

    def write_prepared(self, table: str, prepared: Sequence[list[Any]]) -> None:
        """Write prepared records in order, many to a statement (see :meth:`put`).

        Inside a transaction, a record whose row the transaction has read or written is
        rewritten by an ``UPDATE`` of its JSON and of the columns that changed only: SQLite
        rewrites an index whenever a statement sets one of its columns, even to the value it
        holds, and each index is a page more the commit writes (a span's run has 15).
        """
        upsert, otherwise = self._put_sql[table]
        with self._use() as link:
            conn, depth = link.conn, link.depth
            if link.ahead:
                for values in prepared:
                    link.ahead.pop((table, values[0]), None)
            if depth == 0 and len(prepared) > 1:
                # Several statements are one transaction, which waits for a busy database.
                with self.transaction():
                    self.write_prepared(table, prepared)
                return
            if depth:
                prepared = self._rewrite_known(link, table, prepared)
                if len(link.stored) > _REMEMBERED_ROWS * 8:
                    link.stored.clear()
                link.stored.update(((table, values[0]), values[:-1]) for values in prepared)
                if not prepared:
                    return
            if len(prepared) == 1:
                changed = self._execute(conn, depth, upsert, prepared[0]).rowcount
            else:
                changed = conn.executemany(upsert, prepared).rowcount
            if changed < len(prepared) and otherwise is not None:
                # Some replacement changed an indexed column: the full upsert, for every
                # record (the others are rewritten as they are).
                if len(prepared) == 1:
                    self._execute(conn, depth, otherwise, prepared[0])
                else:
                    conn.executemany(otherwise, prepared)

    def _rewrite_known(
        self, link: _Link, table: str, prepared: Sequence[list[Any]]
    ) -> Sequence[list[Any]]:
        """Rewrite the records whose rows ``link`` holds; the others, to write as new."""
        if not link.stored:
            return prepared
        layout = self._layouts[table]
        others: list[list[Any]] = []
        for values in prepared:
            old = link.stored.get((table, values[0]))
            changed = None if old is None else layout.changed(values, old)
            if changed is None or not link.conn.execute(
                layout.update_sql(changed), layout.update_params(values, changed)
            ).rowcount:
                others.append(values)
            else:
                link.stored[(table, values[0])] = values[:-1]
        return others

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record; return whether it existed."""
        check_key(table, record_id)
        with self._use() as link:
            link.stored.pop((table, record_id), None)
            link.ahead.pop((table, record_id), None)
            cursor = self._execute(
                link.conn, link.depth, f"DELETE FROM [{table}] WHERE id = ?", (record_id,)
            )
        return cursor.rowcount > 0

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
        where, params = _where(filters)
        order = ", ".join([_order(key) for key in sort] + ["id ASC"])
        layout = self._layouts[table]
        sql = f"SELECT {layout.selected} FROM [{table}]{where} ORDER BY {order}"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        with self._use() as link:
            rows = self._execute(link.conn, link.depth, sql, params).fetchall()
            if link.depth and len(rows) <= _REMEMBERED_ROWS:
                link.stored.update(((table, row[1]), row[1:]) for row in rows)
        return [layout.record(row) for row in rows]

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """Count the matching records."""
        check_query(table, filters)
        where, params = _where(filters)
        with self._use() as link:
            sql = f"SELECT count(*) FROM [{table}]{where}"
            row = self._execute(link.conn, link.depth, sql, params).fetchone()
        return int(row[0])

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """Yield the matching records in id order, read 500 at a time as iteration proceeds."""
        check_query(table, filters)
        return pages_by_id(self._page, table, list(filters))

    def _page(self, table: str, filters: list[Filter], limit: int) -> list[Record]:
        return self.query(table, filters, limit=limit)

    def aggregate(
        self,
        table: str,
        group_by: Sequence[GroupBy] = (),
        sums: Sequence[str] = (),
        filters: Sequence[Filter] = (),
    ) -> list[AggregateRow]:
        """Count and sum the matching records per group in one ``GROUP BY`` query."""
        summed = check_aggregate(table, group_by, sums, filters)
        keys = [
            f"substr([{key.field}], 1, {DAY_LENGTH})" if key.day else f"[{key.field}]"
            for key in group_by
        ]
        where, params = _where(filters)
        selected = ", ".join([*keys, "count(*)", *(f"sum([{c.name}])" for c in summed)])
        sql = f"SELECT {selected} FROM [{table}]{where}"
        if keys:
            sql += " GROUP BY " + ", ".join(str(index) for index in range(1, len(keys) + 1))
        else:
            # Without keys SQL answers one row even when nothing matches; the port answers none.
            sql += " HAVING count(*) > 0"
        with self._use() as link:
            try:
                rows = self._execute(link.conn, link.depth, sql, params).fetchall()
            except sqlite3.OperationalError as error:
                if "integer overflow" not in str(error):
                    raise
                # SQLite's sum fails once a partial sum overflows, though the total may fit
                # (a rare case: the core sums no integers): the values are added up here.
                raw = ", ".join([*keys, *(f"[{c.name}]" for c in summed)])
                cursor = self._execute(
                    link.conn, link.depth, f"SELECT {raw} FROM [{table}]{where}", params
                )
                return fold_groups(cursor.fetchall(), len(keys), summed)
        width = len(keys)
        return sorted_groups(
            AggregateRow(tuple(row[:width]), int(row[width]), tuple(row[width + 1:]))
            for row in rows
        )

    def change_mark(self, tables: Collection[str]) -> Hashable:
        """A mark of ``tables`` (see :class:`~governance_core.storage.protocol.ChangeMarks`).

        Triggers count every insert, update and delete of a marked table in ``_changes``,
        whoever makes it. Inside a transaction the mark is new each time: a count this transaction
        moved could come back to the same value if it rolled back.
        """
        keys = tuple(tables)
        sql = self._mark_sql.get(keys)
        if sql is None:
            check_marked(keys)
            sql = self._mark_sql[keys] = (
                f"SELECT name, count FROM [_changes] WHERE name IN ({', '.join('?' * len(keys))})"
            )
        with self._use() as link:
            if link.conn.in_transaction:
                return object()
            rows = link.conn.execute(sql, keys).fetchall()
        counts = dict(rows)
        return tuple([counts[key] for key in keys])

    def close(self) -> None:
        """Close every connection this store opened (checkpointing the WAL a last time)."""
        if self._checkpointer is not None:
            self._checkpointer.stop()
        with self._links_lock:
            for _, link in self._links:
                link.conn.close()
            self._links.clear()
        if self._shared is not None:
            self._shared.conn.close()
        self._writer.close()
        self._local = threading.local()


class _Checkpointer:
    """A daemon thread that checkpoints a file's WAL every :data:`CHECKPOINT_INTERVAL_S`.

    Checkpoints are ``PASSIVE``: they never wait for, or hold up, a reader or a writer (the
    driver lets other threads run meanwhile). A store that is dropped without being closed
    stops its thread when it is collected.
    """

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn
        self._stopping = threading.Event()
        self._thread = threading.Thread(
            target=self._run, name="governance-sqlite-checkpoint", daemon=True
        )
        self._thread.start()

    def _run(self) -> None:
        try:
            while not self._stopping.wait(CHECKPOINT_INTERVAL_S):
                self._checkpoint()
            self._checkpoint()
        finally:
            self._conn.close()

    def _checkpoint(self) -> None:
        # Busy, or the file went away: the next round, or the next opener, checkpoints.
        with contextlib.suppress(sqlite3.Error):
            self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()

    def stop_soon(self) -> None:
        """Ask the thread to checkpoint a last time and end."""
        self._stopping.set()

    def stop(self) -> None:
        """Checkpoint a last time and end the thread."""
        self.stop_soon()
        if self._thread is not threading.current_thread():
            self._thread.join()


def _is_busy(error: sqlite3.OperationalError) -> bool:
    return error.sqlite_errorcode & 0xFF in _BUSY_CODES


def _patiently(attempt: Callable[[], _T], timeout_s: float) -> _T:
    """Run ``attempt`` until the database is not busy, for at most ``timeout_s`` seconds.

    It tries again after short, jittered pauses (0.5 ms, doubling up to 4 ms). SQLite's own
    busy handler sleeps 1, 2, 5, 10, 15, 20, 25 ms and more between tries, so a writer that
    lost twice waited far longer than the transaction it waited for: with four clients on two
    server processes, the p99 of a span write fell from about 60 ms to 25 ms.
    """
    deadline = time.monotonic() + timeout_s
    pause = _FIRST_PAUSE_S
    while True:
        try:
            return attempt()
        except sqlite3.OperationalError as error:
            if not _is_busy(error) or time.monotonic() + pause / 2 > deadline:
                raise
        time.sleep(random.uniform(pause / 2, pause))
        pause = min(pause * 2, _LAST_PAUSE_S)


class _Layout:
    """How one table's records are split between its columns and ``data`` (module docstring).

    ``lean`` writes the JSON of a record, ``record`` reads one back from a row of
    ``selected`` (``data``, then ``id`` and the declared fields, as ``column_values`` orders
    them: ``width`` values).
    """

    __slots__ = ("_held", "_name", "_updates", "get", "selected", "width")

    def __init__(self, table: Table) -> None:
        columns = [("id", str), *((c.name, _SQL_TYPES[c.type]) for c in table.columns)]
        # Each column's position in column_values and in a row (after data), and the one
        # type of value it gives back as written (a bool in an integer column comes back 1).
        self._held = tuple((index, name, kind) for index, (name, kind) in enumerate(columns))
        self._name = table.name
        self._updates: dict[tuple[int, ...], str] = {}
        self.selected = ", ".join(["data", *(f"[{name}]" for name, _ in columns)])
        self.get = f"SELECT {self.selected} FROM [{table.name}] WHERE id = ?"
        self.width = 1 + len(columns)

    def changed(self, values: Sequence[Any], old: Sequence[Any]) -> tuple[int, ...]:
        """The positions of the declared columns whose value ``values`` changes from ``old``.

        A value of another type (``True`` for a stored 1) counts as changed.
        """
        return tuple(
            index for index in range(1, len(old))
            if not (values[index] is old[index] or (
                type(values[index]) is type(old[index]) and values[index] == old[index]
            ))
        )

    def update_sql(self, changed: tuple[int, ...]) -> str:
        """The ``UPDATE`` of a row's JSON and of the columns at ``changed``, by id."""
        sql = self._updates.get(changed)
        if sql is None:
            sets = "".join(f", [{self._held[index][1]}] = ?" for index in changed)
            sql = self._updates[changed] = (
                f"UPDATE [{self._name}] SET [data] = ?{sets} WHERE [id] = ?"
            )
        return sql

    @staticmethod
    def update_params(values: Sequence[Any], changed: tuple[int, ...]) -> list[Any]:
        """The parameters of :meth:`update_sql` for the prepared ``values``."""
        return [values[-1], *(values[index] for index in changed), values[0]]

    def lean(self, record: Record, values: Sequence[Any]) -> Record:
        """``record`` with the members its columns hold as they are set to ``None``."""
        lean = record
        for index, name, kind in self._held:
            value = values[index]
            # SQLite keeps a REAL that holds an integer as the integer: -0.0 comes back 0.0.
            if type(value) is not kind or (
                type(value) is float and not value and copysign(1.0, value) < 0
            ):
                continue
            if lean is record:
                lean = dict(record)
            lean[name] = None
        return lean

    def record(self, row: Sequence[Any]) -> Record:
        """The record a row holds: ``data`` with each member it keeps as ``null`` filled in."""
        record = decode(row[0])
        for index, name, _ in self._held:
            value = row[index + 1]
            # A member data lacks was never a column's to fill (nor was one it holds a value
            # of: rows written before this layout, or a value of another type).
            if value is not None and name in record and record[name] is None:
                record[name] = value
        return record


@functools.lru_cache(maxsize=256)
def _union_of_gets(tables: tuple[str, ...]) -> str:
    """One statement reading the row of each table under an id, each row its position last.

    A compound select has one width: each row is padded with nulls to the widest table's,
    before its position.
    """
    layouts = [_Layout(TABLES[table]) for table in tables]
    widest = max(layout.width for layout in layouts)
    return " UNION ALL ".join(
        f"SELECT {layout.selected}{', NULL' * (widest - layout.width)}, {index}"
        f" FROM [{table}] WHERE id = ?"
        for index, (table, layout) in enumerate(zip(tables, layouts, strict=True))
    )


def _put_sql(table: Table) -> tuple[str, str | None]:
    """The statements of a put: an upsert, and the one to run when it changed nothing.

    A table with few indexes (``index_each`` off: runs and spans, rewritten on every span)
    first tries an upsert that inserts a new row, or updates an existing one whose indexed
    columns hold the values given (only the JSON and unindexed columns change, so no index is
    touched); when an indexed column changes it changes nothing, and a full upsert follows.
    Other tables, and those whose rewrites change an indexed field (``rewrites_indexed``),
    take the full upsert at once.
    """
    # Columns in the order of ``column_values`` (id, declared fields), then the JSON.
    names = ["id", *(column.name for column in table.columns), "data"]
    columns = ", ".join(f"[{name}]" for name in names)
    insert = f"INSERT INTO [{table.name}] ({columns}) VALUES ({', '.join('?' for _ in names)})"
    full = insert + " ON CONFLICT([id]) DO UPDATE SET " + ", ".join(
        f"[{name}] = excluded.[{name}]" for name in names[1:]
    )
    indexed = table.indexed_fields()
    if table.index_each or not indexed or table.rewrites_indexed:
        return full, None
    kept = [name for name in names[1:] if name not in indexed]
    same = " AND ".join(
        f"[{table.name}].[{name}] IS excluded.[{name}]" for name in names[1:] if name in indexed
    )
    update = ", ".join(f"[{name}] = excluded.[{name}]" for name in kept)
    return insert + f" ON CONFLICT([id]) DO UPDATE SET {update} WHERE {same}", full


def _migrate(conn: sqlite3.Connection, timeout_s: float) -> None:
    """Create missing tables, columns (backfilled from the JSON) and indexes, in one transaction.

    A file written by a newer schema is refused: this code would leave the newer columns stale.
    """
    db = sqlite_utils.Database(conn)
    (kept,) = conn.execute("PRAGMA temp_store").fetchone()
    # Its statements may change every row of a table: their undo pages go to files.
    conn.execute("PRAGMA temp_store = DEFAULT")
    try:
        _migrate_in_transaction(conn, db, timeout_s)
    finally:
        conn.execute(f"PRAGMA temp_store = {kept}")


def _migrate_in_transaction(
    conn: sqlite3.Connection, db: sqlite_utils.Database, timeout_s: float
) -> None:
    _patiently(lambda: conn.execute("BEGIN IMMEDIATE"), timeout_s)
    try:
        meta = db.table("_meta")
        if not meta.exists():
            meta.create({"key": str, "value": str}, pk="key")
        row = conn.execute("SELECT value FROM _meta WHERE key = 'schema_version'").fetchone()
        if row is not None and int(row[0]) > SCHEMA_VERSION:
            raise RuntimeError(
                f"the database has schema version {row[0]}, newer than this library's"
                f" {SCHEMA_VERSION}: upgrade the library to open it"
            )
        had_ids = db.table(IDS).exists()
        had_day_costs = db.table(DAY_COSTS).exists()
        upgrading = row is not None and int(row[0]) < SCHEMA_VERSION
        for table in TABLES.values():
            _migrate_table(db, table, upgrading=upgrading)
        if row is not None and int(row[0]) < TOOL_CALLS_NUMBERED_IN:
            _number_tool_calls(conn)
        _count_changes(conn, [table.name for table in TABLES.values() if table.marked])
        _record_ids(conn, fill=not had_ids, renew=upgrading)
        _keep_day_costs(conn, fill=not had_day_costs)
        conn.execute(
            "INSERT OR REPLACE INTO _meta (key, value) VALUES ('schema_version', ?)",
            (str(SCHEMA_VERSION),),
        )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _number_tool_calls(conn: sqlite3.Connection) -> None:
    """Number the stored allowed tool calls of each run (schema version 9).

    Through a table of the numbers rather than ``UPDATE ... FROM``, which SQLite before 3.33
    does not have.
    """
    conn.execute("CREATE TEMP TABLE numbered_tool_calls (id TEXT PRIMARY KEY, number INTEGER)")
    conn.execute(f"INSERT INTO numbered_tool_calls {TOOL_CALL_NUMBERS}")
    conn.execute(
        "UPDATE [decisions] SET [tool_call_number] = (SELECT number FROM numbered_tool_calls"
        " WHERE numbered_tool_calls.id = [decisions].id)"
        " WHERE id IN (SELECT id FROM numbered_tool_calls)"
    )
    conn.execute("DROP TABLE numbered_tool_calls")


def _count_changes(conn: sqlite3.Connection, tables: list[str]) -> None:
    """Make triggers count every change of the marked tables in ``_changes`` (change_mark)."""
    conn.execute(
        "CREATE TABLE IF NOT EXISTS _changes (name TEXT PRIMARY KEY, count INTEGER NOT NULL)"
    )
    for table in tables:
        conn.execute("INSERT OR IGNORE INTO _changes (name, count) VALUES (?, 0)", (table,))
        for event in ("INSERT", "UPDATE", "DELETE"):
            conn.execute(
                f"CREATE TRIGGER IF NOT EXISTS [{table}_{event.lower()}_counted]"
                f" AFTER {event} ON [{table}] BEGIN"
                f" UPDATE _changes SET count = count + 1 WHERE name = '{table}';"
                " END"
            )


def _record_ids(conn: sqlite3.Connection, *, fill: bool, renew: bool) -> None:
    """Make triggers keep :data:`~governance_core.storage.schema.IDS`; ``fill`` it first.

    A trigger runs inside the statement that fired it: an insert of a new resource records its
    id with no statement of its own, and a rewrite (the upsert's update) records nothing. Its
    entry's members are all in columns, so its ``data`` holds them as ``null`` (see
    :class:`_Layout`). ``renew`` replaces the triggers an older version made.
    """
    for table in kinded_tables():
        kind = table.kind
        assert kind is not None and "'" not in kind

        def entry(row: str, kind: str = kind) -> str:
            return f"'{kind}', {row}.account_id, '{_LEAN_ID}'"

        if renew:
            conn.execute(f"DROP TRIGGER IF EXISTS [{table.name}_records_id]")
        if fill:
            conn.execute(
                f"INSERT INTO [{IDS}] (id, kind, account_id, data)"
                f" SELECT id, {entry(f'[{table.name}]')} FROM [{table.name}]"
                " WHERE true ON CONFLICT (id) DO NOTHING"
            )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS [{table.name}_records_id] AFTER INSERT ON"
            f" [{table.name}] BEGIN INSERT INTO [{IDS}] (id, kind, account_id, data)"
            f" VALUES (NEW.id, {entry('NEW')}) ON CONFLICT (id) DO NOTHING; END"
        )
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS [{table.name}_frees_id] AFTER DELETE ON"
            f" [{table.name}] BEGIN DELETE FROM [{IDS}] WHERE id = OLD.id AND kind = '{kind}';"
            " END"
        )


def _keep_day_costs(conn: sqlite3.Connection, *, fill: bool) -> None:
    """Make triggers keep :data:`~governance_core.storage.schema.DAY_COSTS`; ``fill`` it first.

    Each trigger runs inside the statement that wrote the run: a run's cost leaves the day it
    stood under and joins the one it stands under now. An update that leaves the cost, the
    agent and the start's day as they were (most of a run's rewrites), or of a run that
    counts on no day before or after it, fires none.
    """
    def day(row: str) -> str:
        return f"substr({row}.started_at, 1, 10)"

    def counted(row: str) -> str:
        return (
            f"{row}.total_cost IS NOT NULL AND {row}.started_at IS NOT NULL"
            f" AND {row}.agent_id IS NOT NULL"
        )

    def add(row: str) -> str:
        return (
            f"INSERT INTO [{DAY_COSTS}] (id, agent_id, day, total_cost, data)"
            f" SELECT {row}.agent_id || '/' || {day(row)}, {row}.agent_id, {day(row)},"
            f" {row}.total_cost, '{_LEAN_DAY_COST}' WHERE {counted(row)}"
            " ON CONFLICT (id) DO UPDATE SET total_cost = total_cost + excluded.total_cost;"
        )

    def take(row: str) -> str:
        return (
            f"UPDATE [{DAY_COSTS}] SET total_cost = total_cost - {row}.total_cost"
            f" WHERE id = {row}.agent_id || '/' || {day(row)} AND {counted(row)};"
        )

    if fill:
        conn.execute(
            f"INSERT INTO [{DAY_COSTS}] (id, agent_id, day, total_cost, data)"
            " SELECT agent_id || '/' || substr(started_at, 1, 10), agent_id,"
            f" substr(started_at, 1, 10), sum(total_cost), '{_LEAN_DAY_COST}'"
            " FROM [agent_instances] WHERE total_cost IS NOT NULL AND started_at IS NOT NULL"
            " AND agent_id IS NOT NULL GROUP BY 1, 2, 3"
        )
    # A cost moved within the run's day (most writes that move one): one update by key.
    same_day = (
        f"{counted('OLD')} AND {counted('NEW')} AND OLD.agent_id = NEW.agent_id"
        f" AND {day('OLD')} = {day('NEW')}"
    )
    for name, event, when, body in (
        ("added", "INSERT", counted("NEW"), add("NEW")),
        (
            "priced", "UPDATE OF total_cost", f"{same_day} AND OLD.total_cost <> NEW.total_cost",
            f"UPDATE [{DAY_COSTS}] SET total_cost = total_cost - OLD.total_cost"
            f" + NEW.total_cost WHERE id = NEW.agent_id || '/' || {day('NEW')};",
        ),
        (
            "moved", "UPDATE OF total_cost, started_at, agent_id",
            f"({counted('OLD')} OR {counted('NEW')}) AND NOT ({same_day})",
            take("OLD") + add("NEW"),
        ),
        ("removed", "DELETE", counted("OLD"), take("OLD")),
    ):
        conn.execute(
            f"CREATE TRIGGER IF NOT EXISTS [agent_instances_cost_{name}] AFTER {event}"
            f" ON [agent_instances] WHEN {when} BEGIN {body} END"
        )


def _migrate_table(db: sqlite_utils.Database, table: Table, *, upgrading: bool) -> None:
    handle = db.table(table.name)
    wanted = {c.name: _SQL_TYPES[c.type] for c in table.columns}
    if not handle.exists() and table.name in STORE_KEPT:
        # Small rows read only by id: kept in the primary key's B-tree alone, an insert writes
        # one page, not a row's and its id index's.
        db.execute(
            f"CREATE TABLE [{table.name}] ([id] TEXT PRIMARY KEY NOT NULL, [data] TEXT NOT NULL, "
            + ", ".join(f"[{c.name}] {c.type.upper()}" for c in table.columns)
            + ") WITHOUT ROWID"
        )
    elif not handle.exists():
        handle.create({"id": str, "data": str, **wanted}, pk="id", not_null={"data"})
    else:
        present = set(handle.columns_dict)
        if upgrading:
            _restore_undeclared(db, table, present)
        for column in table.columns:
            if column.name in present:
                continue
            handle.add_column(column.name, _SQL_TYPES[column.type])
            json_types = ", ".join(f"'{name}'" for name in _JSON_TYPES[column.type])
            db.execute(
                f"UPDATE [{table.name}] SET [{column.name}] = json_extract(data, :path)"
                f" WHERE json_type(data, :path) IN ({json_types})",
                {"path": f"$.{column.name}"},
            )
    declared = {_index_name(table, index): index for index in table.wanted_indexes()}
    for index in handle.indexes:
        # Only indexes this adapter made (named idx_<table>_...) are dropped.
        if index.name not in declared and index.name.startswith(f"idx_{table.name}_"):
            db.execute(f"DROP INDEX [{index.name}]")
    for name, fields in declared.items():
        where = table.where(fields)
        condition = "" if where is None else f" WHERE [{where.field}] {where.test}"
        columns = ", ".join(f"[{field}]" for field in fields)
        db.execute(f"CREATE INDEX IF NOT EXISTS [{name}] ON [{table.name}] ({columns}){condition}")


def _restore_undeclared(db: sqlite_utils.Database, table: Table, present: set[str]) -> None:
    """Put back into ``data`` the values of columns the schema no longer declares.

    Rows keep a declared field's value in its column alone (:class:`_Layout`); once the field
    is no longer declared, nothing would read that column again.
    """
    declared = {"id", "data", *(column.name for column in table.columns)}
    for name in sorted(present - declared):
        db.execute(
            f"UPDATE [{table.name}] SET data = json_set(data, :path, [{name}])"
            f" WHERE [{name}] IS NOT NULL AND json_type(data, :path) = 'null'",
            {"path": f"$.{name}"},
        )


def _index_name(table: Table, fields: tuple[str, ...]) -> str:
    """``idx_<table>_<fields>`` (as sqlite-utils names them), then a partial index's rows."""
    return "_".join(("idx", table.name, *table.index_words(fields)))


def _where(filters: Sequence[Filter]) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for condition in filters:
        column = f"[{condition.field}]"
        if condition.op == "in":
            items = list(condition.value)
            if not items:
                clauses.append("0")
                continue
            clauses.append(f"{column} IN ({', '.join('?' for _ in items)})")
            params.extend(items)
        elif condition.value is None and condition.op in ("eq", "ne"):
            clauses.append(f"{column} IS {'NOT ' if condition.op == 'ne' else ''}NULL")
        else:
            clauses.append(f"{column} {_OPS[condition.op]} ?")
            params.append(condition.value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _order(key: SortKey) -> str:
    text = f"[{key.field}] {'DESC' if key.descending else 'ASC'}"
    if key.nulls != "auto":
        text += f" NULLS {key.nulls.upper()}"
    return text
