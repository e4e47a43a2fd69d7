r"""The PostgreSQL adapter (psycopg 3 and psycopg-pool): SERIALIZABLE writers, own migrations.

Each table holds the whole record as ``json`` in ``data`` and a copy of each declared field in
its own typed, indexed column (``text COLLATE "C"``, ``bigint``, ``double precision``). Several
processes may write at once: every transaction runs at SERIALIZABLE isolation, so a write that
collides with a concurrent one is rolled back whole and raised as
:class:`~governance_core.errors.WriteConflict`, which the library re-runs a bounded number of
times; it is logged once, at debug, with the server's reason and no connection details
(psycopg's own warning on closing the failed pipeline, which names them, is dropped). A lock
timeout, a lost connection or an exhausted pool is
:class:`~governance_core.errors.TemporarilyUnavailable`. Nested transactions are savepoints.

``data`` is ``json``, not ``jsonb``: ``jsonb`` refuses the escape ``\u0000`` and turns a float
such as ``1e+20`` into an integer, and the contract requires both to come back as stored. Text
columns cannot hold NUL either, so declared text is stored with an order-keeping escape
(``\x01`` becomes ``\x01\x02`` and ``\x00`` becomes ``\x01\x01``); the record itself is
always read from ``data``.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
from collections.abc import Collection, Hashable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import psycopg.errors
from psycopg import IsolationLevel, sql
from psycopg.pq import TransactionStatus
from psycopg_pool import ConnectionPool, PoolTimeout

from governance_core.errors import TemporarilyUnavailable, WriteConflict
from governance_core.storage import is_postgres_location
from governance_core.storage._common import (
    DAY_LENGTH,
    _fits,
    check_aggregate,
    check_integer_sum,
    check_key,
    check_marked,
    check_page,
    check_query,
    column_values,
    encode,
    pages_by_id,
    sorted_groups,
)
from governance_core.storage.protocol import (
    AggregateRow,
    Filter,
    GroupBy,
    Query,
    Record,
    SortKey,
)
from governance_core.storage.schema import (
    DAY_COSTS,
    IDS,
    SCHEMA_VERSION,
    TABLES,
    TOOL_CALL_NUMBERS,
    TOOL_CALLS_NUMBERED_IN,
    Column,
    ColumnType,
    Table,
    kinded_tables,
)

__all__ = [
    "LOCK_TIMEOUT_MS",
    "POOL_MAX_SIZE",
    "RETRY_AFTER_MS",
    "PostgresStore",
]

LOCK_TIMEOUT_MS = 5000
"""How long a statement waits for a row or table lock before the database counts as busy."""
POOL_MAX_SIZE = 8
"""Connections a store keeps at most (``?pool_max_size=`` in the URL changes it)."""
RETRY_AFTER_MS = 250
"""The ``retry_after_ms`` a busy or unreachable database answers with."""

_SQL_TYPES: dict[ColumnType, str] = {
    "text": 'text COLLATE "C"',
    "integer": "bigint",
    "real": "double precision",
}
_ARRAY_TYPES: dict[ColumnType, str] = {
    "text": "text", "integer": "bigint", "real": "double precision",
}
"""The element type of each column type's array in :attr:`_Statements.put_many`."""
_OPS = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
_CONFLICTS = (
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
    psycopg.errors.UniqueViolation,
)
_BUSY = (
    psycopg.errors.LockNotAvailable,
    psycopg.errors.QueryCanceled,
    psycopg.errors.AdminShutdown,
    psycopg.errors.CannotConnectNow,
    psycopg.errors.TooManyConnections,
)
# Any 64-bit number: the key of the session lock that lets one process at a time migrate.
_MIGRATION_LOCK = 0x676F76_5F6D6967
_TURNS = 0x676F7674
"""The first key of every turn's advisory lock (the second is the hash of its name)."""
_POOL_PARAMETERS = {"pool_min_size", "pool_max_size", "pool_timeout"}
_ID = Column("id")
_BEGIN = "BEGIN ISOLATION LEVEL SERIALIZABLE"
_COMMIT = "COMMIT"
_SHARED = 'LOCK TABLE "_writers" IN ROW SHARE MODE'
"""A transaction's share of the store's writes (see :meth:`PostgresStore.alone`)."""
_ALONE = 'LOCK TABLE "_writers" IN EXCLUSIVE MODE'
"""What a transaction opened alone takes instead: every other transaction waits."""

_LOG = logging.getLogger(__name__)


class PostgresStore:
    """A store in one PostgreSQL database, safe to share between threads.

    ``url`` is a libpq URL (``postgresql://user@host:5432/dbname``); three query parameters
    of the URL belong to the store and are not sent to the server: ``pool_min_size``,
    ``pool_max_size`` (connections kept, default 1 and :data:`POOL_MAX_SIZE`) and
    ``pool_timeout`` (seconds a caller waits for a free connection, default 5). A thread in a
    transaction holds one connection until the outermost block ends; reads outside a
    transaction borrow one for a single autocommitted statement.
    """

    def __init__(self, url: str, *, lock_timeout_ms: int = LOCK_TIMEOUT_MS) -> None:
        if isinstance(lock_timeout_ms, bool) or not isinstance(lock_timeout_ms, int):
            raise ValueError(f"lock_timeout_ms must be an integer, not {lock_timeout_ms!r}")
        if lock_timeout_ms < 0:
            raise ValueError(f"lock_timeout_ms must be 0 or more, not {lock_timeout_ms}")
        conninfo, pool = _split_url(url)
        self.lock_timeout_ms = lock_timeout_ms
        self._local = threading.local()
        self._statements = {table.name: _Statements(table) for table in TABLES.values()}
        # One connection of its own first: an unreachable server or a missing database is
        # reported with the driver's reason, and the schema is migrated before any pooling.
        try:
            with psycopg.connect(conninfo, autocommit=True) as conn:
                _migrate(conn)
        except psycopg.OperationalError as error:
            raise TemporarilyUnavailable(
                f"the database cannot be reached: {str(error).strip()}",
                retry_after_ms=RETRY_AFTER_MS,
            ) from error
        self._pool = ConnectionPool(
            conninfo,
            min_size=int(pool.get("pool_min_size", 1)),
            max_size=int(pool.get("pool_max_size", POOL_MAX_SIZE)),
            timeout=pool.get("pool_timeout", 5.0),
            kwargs={"autocommit": True},
            configure=self._configure,
            open=False,
            name="governance",
        )
        with _translated():
            self._pool.open(wait=True, timeout=pool.get("pool_timeout", 5.0))

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET lock_timeout = {int(self.lock_timeout_ms)}")
        conn.isolation_level = IsolationLevel.SERIALIZABLE

    # -- connections ---------------------------------------------------------------------
    @contextmanager
    def _borrow(self) -> Iterator[psycopg.Connection[Any]]:
        """The thread's transaction connection, else its turn's, else one from the pool.

        Errors translated. A read made while holding a turn, before the turn's transaction
        opens, runs on the turn's connection: another would take a second one from the pool
        for every turn (and, from a pool of one, wait for it until the pool's timeout).
        """
        held = self._held() or getattr(self._local, "turn", None)
        with _translated():
            if held is not None:
                yield held
            else:
                with self._pool.connection() as conn:
                    yield conn

    def _held(self) -> psycopg.Connection[Any] | None:
        """The connection of the thread's open transaction, if any; not once it committed."""
        held: psycopg.Connection[Any] | None = getattr(self._local, "conn", None)
        if held is not None and self._local.committed:
            raise RuntimeError("the transaction was committed with its last writes")
        return held

    def _execute(
        self, query: str, params: Sequence[Any] = (), *, fetch: bool = True
    ) -> list[tuple[Any, ...]]:
        with self._borrow() as conn:
            # The results are read once the pipeline has ended: read inside it, they would
            # cost a round trip of their own before the one that ends it.
            with self._opening_pipeline(conn):
                cursor = conn.execute(query, params)
            return cursor.fetchall() if fetch else []

    def _execute_many(self, query: str, rows: Sequence[Sequence[Any]]) -> None:
        # psycopg sends the rows in one pipeline (the open one, if any): one round trip, not
        # one a row.
        with self._borrow() as conn, self._opening_pipeline(conn), conn.cursor() as cursor:
            cursor.executemany(query, rows)

    @contextmanager
    def _opening_pipeline(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """A pipeline sending the held transaction's BEGIN first, when it is still to be sent.

        Otherwise none: a pipeline of its own costs a round trip to end, even inside another.
        """
        if not self._opening(conn):
            yield
            return
        with conn.pipeline():
            self._open(conn)
            yield

    def _opening(self, conn: psycopg.Connection[Any]) -> bool:
        """Whether ``conn`` holds a transaction whose BEGIN is still to be sent."""
        return conn is getattr(self._local, "conn", None) and bool(
            getattr(self._local, "opening", ())
        )

    def _open(self, conn: psycopg.Connection[Any]) -> None:
        """Send the held transaction's BEGIN and share of the writes, if not sent yet.

        In a pipeline they go with the statements that follow, in one round trip.
        """
        if self._opening(conn):
            statements, self._local.opening = self._local.opening, ()
            for statement in statements:
                conn.execute(statement, prepare=False)

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[Record | None]:
        """The records under ``keys`` (table and id), None where missing: one statement."""
        for table, record_id in keys:
            check_key(table, record_id)
        if not keys:
            return []
        return _found(keys, self._execute(*_gets_statement(keys)))

    def read_together(
        self, keys: Sequence[tuple[str, str]], queries: Sequence[Query]
    ) -> tuple[list[Record | None], list[list[Record]]]:
        """The records under ``keys`` and the answers of ``queries``, in one round trip.

        They go in one pipeline, with the held transaction's ``BEGIN`` when it is still to be
        sent; the answers are read once the pipeline has ended.
        """
        for table, record_id in keys:
            check_key(table, record_id)
        statements = [_gets_statement(keys)] if keys else []
        for query in queries:
            check_query(query.table, query.filters, query.sort)
            check_page(query.offset, query.limit)
            statements.append(_query_statement(query))
        if not statements:
            return [], []
        with self._borrow() as conn:
            with conn.pipeline():
                self._open(conn)
                cursors = [conn.execute(text, params) for text, params in statements]
            answers = [cursor.fetchall() for cursor in cursors]
        found = _found(keys, answers.pop(0)) if keys else []
        return found, [
            _query_records(query.table, rows) for query, rows in zip(queries, answers, strict=True)
        ]

    # -- the port ------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """A SERIALIZABLE transaction on the outermost call; a savepoint on nested calls.

        An exception leaving a nested block rolls back that block's writes only.
        """
        held = self._held()
        if held is not None:
            with _translated():
                if self._opening(held):
                    # A savepoint needs its transaction begun.
                    with held.pipeline():
                        self._open(held)
                self._local.nested = getattr(self._local, "nested", 0) + 1
                try:
                    with held.transaction():
                        yield
                finally:
                    self._local.nested -= 1
            return
        turned: psycopg.Connection[Any] | None = getattr(self._local, "turn", None)
        with _translated(), self._pool.connection() if turned is None else nullcontext(
            turned
        ) as conn:
            self._local.conn = conn
            # BEGIN and the share of the writes go with the transaction's first statement, in
            # one round trip. The share is taken before the snapshot (a LOCK TABLE takes
            # none), so a transaction that waited for one run alone sees what it wrote.
            self._local.opening = (
                _BEGIN, _ALONE if getattr(self._local, "alone", False) else _SHARED
            )
            self._local.committed = False
            try:
                try:
                    yield
                except BaseException:
                    _roll_back(conn)
                    raise
                if not (self._local.opening or self._local.committed):
                    conn.commit()
            finally:
                self._local.conn = None
                self._local.opening = ()
                self._local.committed = False

    @contextmanager
    def alone(self) -> Iterator[None]:
        """Open the block's outermost transactions alone (see ``TakesTurns.alone``).

        Every transaction takes ``_writers`` in ROW SHARE mode as its first statement, one
        opened alone in EXCLUSIVE mode, which waits for the others (and they for it); the
        wait is bounded by ``lock_timeout_ms``.
        """
        if getattr(self._local, "conn", None) is not None or getattr(self._local, "alone", False):
            yield
            return
        self._local.alone = True
        try:
            yield
        finally:
            self._local.alone = False

    @contextmanager
    def turn(self, name: str) -> Iterator[None]:
        """Hold the turn ``name`` (an advisory lock) around the transaction the block opens.

        The lock is taken on the connection the transaction will run on, before it begins
        (a transaction's snapshot is taken at its first statement, so a lock taken inside
        it would let it miss what the turn before it wrote), and let go once it has ended.
        Waiting for it is bounded by ``lock_timeout_ms`` (then ``temporarily_unavailable``).
        Inside a transaction, or another turn, the block runs as it is.
        """
        if getattr(self._local, "conn", None) is not None or getattr(self._local, "turn", None):
            yield
            return
        with _translated(), self._pool.connection() as conn:
            conn.execute("SELECT pg_advisory_lock(%s, hashtext(%s))", (_TURNS, name))
            self._local.turn = conn
            try:
                yield
            finally:
                self._local.turn = None
                try:
                    conn.execute("SELECT pg_advisory_unlock(%s, hashtext(%s))", (_TURNS, name))
                except psycopg.Error:
                    # A connection that cannot let go must not go back to the pool holding
                    # the lock: closed, its session (and the lock) ends.
                    conn.close()
                    raise

    @contextmanager
    def batched(self, *, ending: bool = False) -> Iterator[None]:
        """Inside a transaction, a pipeline: the block's statements go in one round trip.

        ``ending`` (the block is the outermost transaction's last work): its COMMIT goes in
        the same round trip, and a failure to commit is raised as the block ends.
        """
        held = self._held()
        if held is None:
            yield
            return
        ending = ending and not getattr(self._local, "nested", 0)
        try:
            with _translated(), held.pipeline():
                self._open(held)
                try:
                    yield
                    if ending:
                        held.execute(_COMMIT, prepare=False)
                except BaseException:
                    # Closing the pipeline after the block failed reports the same failure
                    # again (as "pipeline aborted", naming the connection): the block's own
                    # error is the one raised.
                    _pipeline_echoes.quiet = True
                    raise
            # Committed: the transaction sends no COMMIT of its own, and nothing more.
            self._local.committed = ending
        finally:
            _pipeline_echoes.quiet = False

    @contextmanager
    def _write(self) -> Iterator[None]:
        # A write outside a transaction is a transaction of its own, SERIALIZABLE like any.
        if getattr(self._local, "conn", None) is not None:
            yield
        else:
            with self.transaction():
                yield

    def get(self, table: str, record_id: str) -> Record | None:
        """Return the record with ``record_id``, or None."""
        check_key(table, record_id)
        rows = self._execute(self._statements[table].get, (_text(record_id),))
        if not rows:
            return None
        return _id_record(rows[0][0]) if table == IDS else rows[0][0]

    def put(self, table: str, record: Record) -> None:
        """Insert or replace the record and its declared columns."""
        self.write_prepared(table, [self.prepare(table, record)])

    def prepare(self, table: str, record: Record) -> list[Any]:
        """Check and encode a record for :meth:`write_prepared`: its column values and JSON."""
        checked = column_values(table, record)
        columns = self._statements[table].columns
        values = [_column(column, value) for column, value in zip(columns, checked, strict=True)]
        values.append(encode(record))
        return values

    def write_prepared(self, table: str, prepared: Sequence[list[Any]]) -> None:
        """Write prepared records in order, many to one statement.

        Many records of distinct ids go as one ``INSERT`` of their columns as arrays, sent
        binary: the server plans and runs one statement, not one a record, and nothing is
        quoted or escaped on either side. An upsert cannot touch a row twice in a statement,
        so records that repeat an id go one statement each, in one round trip.
        """
        statements = self._statements[table]
        with self._write():
            if len(prepared) == 1:
                self._execute(statements.put, prepared[0], fetch=False)
            elif len({values[0] for values in prepared}) == len(prepared):
                columns = [list(values) for values in zip(*prepared, strict=True)]
                self._execute(statements.put_many, columns, fetch=False)
            else:
                self._execute_many(statements.put, prepared)

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record; return whether it existed."""
        check_key(table, record_id)
        with self._write():
            rows = self._execute(self._statements[table].delete, (_text(record_id),))
        return bool(rows)

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
        query = Query(table, tuple(filters), tuple(sort), offset, limit)
        return _query_records(table, self._execute(*_query_statement(query)))

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """Count the matching records."""
        check_query(table, filters)
        where, params = _where(table, filters)
        rows = self._execute(f'SELECT count(*) FROM "{table}"{where}', params)
        return int(rows[0][0])

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
        columns = {column.name: column for column in (_ID, *TABLES[table].columns)}
        # A day is cut from the text before its first NUL (stored escaped), as SQLite cuts it.
        keys = [
            f'substr(replace(split_part("{key.field}", chr(1) || chr(1), 1),'
            f" chr(1) || chr(2), chr(1)), 1, {DAY_LENGTH})" if key.day else f'"{key.field}"'
            for key in group_by
        ]
        where, params = _where(table, filters)
        selected = ", ".join([*keys, "count(*)", *(f'sum("{c.name}")' for c in summed)])
        text = f'SELECT {selected} FROM "{table}"{where}'
        if keys:
            text += " GROUP BY " + ", ".join(str(index) for index in range(1, len(keys) + 1))
        else:
            # Without keys SQL answers one row even when nothing matches; the port answers none.
            text += " HAVING count(*) > 0"
        texts = [columns[key.field].type == "text" and not key.day for key in group_by]
        width = len(keys)
        return sorted_groups(
            AggregateRow(
                tuple(
                    _untext(value) if is_text and value is not None else value
                    for value, is_text in zip(row[:width], texts, strict=True)
                ),
                int(row[width]),
                tuple(
                    None if total is None
                    else check_integer_sum(int(total)) if column.type == "integer"
                    else float(total)
                    for total, column in zip(row[width + 1:], summed, strict=True)
                ),
            )
            for row in self._execute(text, params)
        )

    def change_mark(self, tables: Collection[str]) -> Hashable:
        """A mark of ``tables`` (see :class:`~governance_core.storage.protocol.ChangeMarks`).

        Triggers count every change of a marked table in ``_changes``, whoever makes it.
        Inside a transaction the mark is new each time: a count this transaction moved could
        come back to the same value if it rolled back.
        """
        marked = check_marked(tables)
        if getattr(self._local, "conn", None) is not None:
            return object()
        counts = dict(self._execute(
            "SELECT name, count FROM _changes WHERE name = ANY(%s)", (marked,)
        ))
        return tuple(counts[table] for table in marked)

    def close(self) -> None:
        """Close every connection of the pool."""
        self._pool.close()


@functools.lru_cache(maxsize=256)
def _union_of_gets(tables: tuple[str, ...]) -> str:
    """One statement reading the record of each table under an id, each row its position.

    Its text is the same for the same tables in the same order, so the driver prepares it
    as it does any statement run often.
    """
    return " UNION ALL ".join(
        f'SELECT {index}, data FROM "{table}" WHERE "id" = %s'
        for index, table in enumerate(tables)
    )


def _gets_statement(keys: Sequence[tuple[str, str]]) -> tuple[str, list[Any]]:
    """The statement reading the records under ``keys``, and its parameters."""
    tables = tuple(table for table, _ in keys)
    return _union_of_gets(tables), [_text(record_id) for _, record_id in keys]


def _found(keys: Sequence[tuple[str, str]], rows: list[tuple[Any, ...]]) -> list[Record | None]:
    """The record of each of ``keys`` among the rows of :func:`_gets_statement`'s statement."""
    found: list[Record | None] = [None] * len(keys)
    for index, data in rows:
        found[index] = _id_record(data) if keys[index][0] == IDS else data
    return found


def _query_statement(query: Query) -> tuple[str, list[Any]]:
    """The statement answering ``query`` (checked), and its parameters."""
    where, params = _where(query.table, query.filters)
    order = ", ".join([_order(key) for key in query.sort] + ['"id" ASC'])
    text = f'SELECT data FROM "{query.table}"{where} ORDER BY {order}'
    if query.limit is not None:
        text += " LIMIT %s"
        params.append(query.limit)
    if query.offset:
        text += " OFFSET %s"
        params.append(query.offset)
    return text, params


def _query_records(table: str, rows: list[tuple[Any, ...]]) -> list[Record]:
    """The records of a query's rows."""
    if table == IDS:
        return [_id_record(row[0]) for row in rows]
    return [row[0] for row in rows]


class _Statements:
    """The fixed statements of one table."""

    def __init__(self, table: Table) -> None:
        self.columns = (_ID, *table.columns)
        names = [column.name for column in self.columns]
        quoted = ", ".join(f'"{name}"' for name in [*names, "data"])
        marks = ", ".join(["%s"] * (len(names) + 1))
        updates = ", ".join(f'"{name}" = EXCLUDED."{name}"' for name in [*names[1:], "data"])
        self.put = (
            f'INSERT INTO "{table.name}" ({quoted}) VALUES ({marks})'
            f' ON CONFLICT ("id") DO UPDATE SET {updates}'
        )
        arrays = ", ".join(
            [f"%b::{_ARRAY_TYPES[column.type]}[]" for column in self.columns] + ["%b::text[]"]
        )
        unnested = [f'"c{number}"' for number in range(len(names) + 1)]
        self.put_many = (
            f'INSERT INTO "{table.name}" ({quoted})'
            f' SELECT {", ".join(unnested[:-1])}, {unnested[-1]}::json'
            f' FROM unnest({arrays}) AS given({", ".join(unnested)})'
            f' ON CONFLICT ("id") DO UPDATE SET {updates}'
        )
        """:attr:`put` of many records of distinct ids: a column's values an array."""
        self.get = f'SELECT data FROM "{table.name}" WHERE "id" = %s'
        self.delete = f'DELETE FROM "{table.name}" WHERE "id" = %s RETURNING 1'


class _PipelineEchoes(logging.Filter, threading.local):
    """Drops psycopg's warnings about closing a pipeline whose block already failed.

    Only while :meth:`PostgresStore.batched` is closing such a pipeline on this thread: the
    warning repeats the block's error and names the server, user and database.
    """

    quiet = False

    def filter(self, record: logging.LogRecord) -> bool:
        """Keep every record but those echoes."""
        return not (self.quiet and str(record.msg).startswith(_ECHO_PREFIX))


_ECHO_PREFIX = "error ignored "
_pipeline_echoes = _PipelineEchoes()
logging.getLogger("psycopg").addFilter(_pipeline_echoes)


def _roll_back(conn: psycopg.Connection[Any]) -> None:
    """End the connection's open transaction, if any, by rolling it back.

    Through the driver's own rollback, which forgets the statements it prepared: one whose
    preparation was queued in a pipeline behind a failed statement was never prepared. A
    connection that cannot roll back (it broke) is left as it is: the pool discards it.
    """
    if conn.closed or conn.info.transaction_status == TransactionStatus.IDLE:
        return
    try:
        conn.rollback()
    except psycopg.Error:
        _LOG.debug("a transaction could not be rolled back; its connection is discarded")


@contextmanager
def _translated() -> Iterator[None]:
    """Raise the driver's transient failures as the library's errors."""
    try:
        yield
    except _CONFLICTS as error:
        # Expected under concurrent writes, and re-run by the library: one debug record,
        # with the server's reason only (the driver's own text names the connection).
        _LOG.debug(
            "write conflict (%s %s), the transaction is rolled back: %s",
            type(error).__name__, error.sqlstate, error.diag.message_primary,
        )
        raise WriteConflict(retry_after_ms=RETRY_AFTER_MS) from error
    except _BUSY as error:
        raise TemporarilyUnavailable(
            "the database is busy, retry shortly", retry_after_ms=RETRY_AFTER_MS
        ) from error
    except PoolTimeout as error:
        raise TemporarilyUnavailable(
            "no database connection is free, retry shortly", retry_after_ms=RETRY_AFTER_MS
        ) from error
    except psycopg.OperationalError as error:
        raise TemporarilyUnavailable(
            "the database cannot be reached, retry shortly", retry_after_ms=RETRY_AFTER_MS
        ) from error


def _split_url(url: str) -> tuple[str, dict[str, float]]:
    """The URL without the store's own query parameters, and those parameters."""
    if not is_postgres_location(url):
        raise ValueError(f"a PostgreSQL store needs a postgresql:// URL, not {url!r}")
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    ours: dict[str, float] = {}
    for name, text in query:
        if name not in _POOL_PARAMETERS:
            continue
        try:
            value = float(text) if name == "pool_timeout" else int(text)
        except ValueError:
            value = 0
        if value <= 0:
            kind = "number of seconds" if name == "pool_timeout" else "whole number"
            raise ValueError(f"{name} in the database URL must be a positive {kind}, not {text!r}")
        ours[name] = value
    rest = [(name, value) for name, value in query if name not in _POOL_PARAMETERS]
    return urlunsplit(parts._replace(query=urlencode(rest))), ours


def _text(value: str) -> str:
    # PostgreSQL text holds no NUL; this escape keeps code point order and equality.
    if "\x00" in value or "\x01" in value:
        return value.replace("\x01", "\x01\x02").replace("\x00", "\x01\x01")
    return value


_ESCAPED = re.compile("\x01([\x01\x02])")


def _untext(value: str) -> str:
    """The text :func:`_text` stored (a group key read back from a column)."""
    if "\x01" in value:
        return _ESCAPED.sub(lambda found: "\x00" if found.group(1) == "\x01" else "\x01", value)
    return value


def _id_record(stored: Record) -> Record:
    """An ``ids`` record as the store answers it: its text as given, not as the columns hold it.

    The triggers build it from the resource's columns (reading the resource's JSON would fail
    on a NUL anywhere in it), where :func:`_text` escaped NUL and U+0001.
    """
    for name in ("id", "account_id"):
        value = stored.get(name)
        if isinstance(value, str) and "\x01" in value:
            stored[name] = _untext(value)
    return stored


def _column(column: Column, value: Any) -> Any:
    if value is None:
        return None
    if column.type == "text":
        return _text(value)
    if column.type == "integer":
        return int(value)
    return float(value)


def _where(table: str, filters: Sequence[Filter]) -> tuple[str, list[Any]]:
    columns = {column.name: column for column in (_ID, *TABLES[table].columns)}
    clauses: list[str] = []
    params: list[Any] = []
    for condition in filters:
        column = columns[condition.field]
        name = f'"{condition.field}"'
        if condition.op == "in":
            items = [_column(column, item) for item in condition.value if item is not None]
            if not items:
                clauses.append("FALSE")
                continue
            clauses.append(f"{name} IN ({', '.join(['%s'] * len(items))})")
            params.extend(items)
        elif condition.value is None and condition.op in ("eq", "ne"):
            clauses.append(f"{name} IS {'NOT ' if condition.op == 'ne' else ''}NULL")
        elif condition.value is None:
            clauses.append("FALSE")
        else:
            clauses.append(f"{name} {_OPS[condition.op]} %s")
            params.append(_column(column, condition.value))
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _order(key: SortKey) -> str:
    # Under ``auto`` nulls sort lowest, as in the other adapters (so a list answers alike on
    # every store) and as the indexes are built, so both directions can scan an index.
    nulls = key.nulls if key.nulls != "auto" else ("last" if key.descending else "first")
    return f'"{key.field}" {"DESC" if key.descending else "ASC"} NULLS {nulls.upper()}'


# -- the schema ------------------------------------------------------------------------------
_NAME_LENGTH = 63


def _migrate(conn: psycopg.Connection[Any]) -> None:
    """Create missing tables, columns (backfilled from ``data``) and indexes, once.

    A session advisory lock makes processes that open an empty database together take turns:
    the first creates the schema, the others find it made. A database written by a newer
    schema is refused: this code would leave the newer columns stale.
    """
    conn.execute("SELECT pg_advisory_lock(%s)", (_MIGRATION_LOCK,))
    # Read committed, so that each statement sees what a process before this one committed.
    conn.isolation_level = IsolationLevel.READ_COMMITTED
    try:
        with conn.transaction():
            _migrate_schema(conn)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", (_MIGRATION_LOCK,))


def _migrate_schema(conn: psycopg.Connection[Any]) -> None:
    conn.execute(
        'CREATE TABLE IF NOT EXISTS "_meta" (key text PRIMARY KEY, value text NOT NULL)'
    )
    # No rows: transactions lock it to write alone or side by side (PostgresStore.alone).
    conn.execute('CREATE TABLE IF NOT EXISTS "_writers" ()')
    row = conn.execute("SELECT value FROM _meta WHERE key = 'schema_version'").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise RuntimeError(
            f"the database has schema version {row[0]}, newer than this library's"
            f" {SCHEMA_VERSION}: upgrade the library to open it"
        )
    present: dict[str, set[str]] = {}
    for table_name, column_name in conn.execute(
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = current_schema()"
    ):
        present.setdefault(table_name, set()).add(column_name)
    indexes = {
        name for (name,) in conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema()"
        )
    }
    had_ids = IDS in present
    had_day_costs = DAY_COSTS in present
    changed = False
    for table in TABLES.values():
        changed |= _migrate_table(conn, table, present.get(table.name), indexes)
    if row is not None and int(row[0]) < TOOL_CALLS_NUMBERED_IN:
        # The record is read from ``data``: the number goes there too.
        conn.execute(
            'UPDATE "decisions" SET "tool_call_number" = numbered.number, data ='
            " (data::jsonb || jsonb_build_object('tool_call_number', numbered.number))::json"
            f' FROM ({TOOL_CALL_NUMBERS}) AS numbered WHERE "decisions".id = numbered.id'
        )
        changed = True
    current = row is not None and int(row[0]) == SCHEMA_VERSION
    if changed or not current:
        # Triggers are (re)made only when the schema moved: making them locks every table
        # they are on, and a process opening the store while others write would deadlock
        # with them (a writer holds one table and waits for the next).
        _count_changes(conn, [table.name for table in TABLES.values() if table.marked])
        _record_ids(conn, fill=not had_ids)
        _keep_day_costs(conn, fill=not had_day_costs)
    if not current:
        conn.execute(
            "INSERT INTO _meta (key, value) VALUES ('schema_version', %s)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            (str(SCHEMA_VERSION),),
        )


def _count_changes(conn: psycopg.Connection[Any], tables: list[str]) -> None:
    """Make triggers count every change of the marked tables in ``_changes`` (change_mark)."""
    conn.execute(
        'CREATE TABLE IF NOT EXISTS "_changes" (name text PRIMARY KEY, count bigint NOT NULL)'
    )
    conn.execute(
        # The counts of the schema the changed table is in, whatever the writer's search path.
        "CREATE OR REPLACE FUNCTION governance_count_change() RETURNS trigger"
        " LANGUAGE plpgsql AS $$ BEGIN EXECUTE format("
        "'UPDATE %I._changes SET count = count + 1 WHERE name = %L',"
        " TG_TABLE_SCHEMA, TG_TABLE_NAME); RETURN NULL; END $$"
    )
    for table in tables:
        conn.execute(
            "INSERT INTO _changes (name, count) VALUES (%s, 0) ON CONFLICT (name) DO NOTHING",
            (table,),
        )
        conn.execute(
            sql.SQL(
                "CREATE OR REPLACE TRIGGER {} AFTER INSERT OR UPDATE OR DELETE ON {}"
                " FOR EACH STATEMENT EXECUTE FUNCTION governance_count_change()"
            ).format(sql.Identifier(f"{table}_counted"), sql.Identifier(table))
        )


def _record_ids(conn: psycopg.Connection[Any], *, fill: bool) -> None:
    """Make triggers keep :data:`~governance_core.storage.schema.IDS`; ``fill`` it first.

    A row trigger runs inside the statement that fired it: an insert of a new resource records
    its id in the same round trip, and a rewrite (the upsert's update) records nothing. The
    functions name the table of their own schema, so that they need no search path and
    their statements are planned once per connection.
    """
    schema = conn.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    ids = sql.SQL("{}.{}").format(sql.Identifier(schema[0]), sql.Identifier(IDS))
    for table in kinded_tables():
        kind = sql.Literal(table.kind)
        entry = sql.SQL(
            "{kind}, {row}.account_id,"
            " json_build_object('id', {row}.id, 'kind', {kind}, 'account_id', {row}.account_id)"
        )
        if fill:
            conn.execute(sql.SQL(
                "INSERT INTO {ids} (id, kind, account_id, data) SELECT id, {entry} FROM {table}"
                " ON CONFLICT (id) DO NOTHING"
            ).format(
                ids=ids, table=sql.Identifier(table.name),
                entry=entry.format(kind=kind, row=sql.Identifier(table.name)),
            ))
        functions = {
            "record": sql.SQL(
                "INSERT INTO {ids} (id, kind, account_id, data) VALUES (NEW.id, {entry})"
                " ON CONFLICT (id) DO NOTHING; RETURN NULL;"
            ).format(ids=ids, entry=entry.format(kind=kind, row=sql.SQL("NEW"))),
            "free": sql.SQL(
                "DELETE FROM {ids} WHERE id = OLD.id AND kind = {kind}; RETURN NULL;"
            ).format(ids=ids, kind=kind),
        }
        for action, body in functions.items():
            function = sql.Identifier(f"governance_{action}_{table.kind}_id")
            event = "INSERT" if action == "record" else "DELETE"
            conn.execute(sql.SQL(
                "CREATE OR REPLACE FUNCTION {function}() RETURNS trigger LANGUAGE plpgsql"
                " AS $$ BEGIN {body} END $$"
            ).format(function=function, body=body))
            conn.execute(sql.SQL(
                "CREATE OR REPLACE TRIGGER {trigger} AFTER {event} ON {table}"
                " FOR EACH ROW EXECUTE FUNCTION {function}()"
            ).format(
                trigger=sql.Identifier(f"{table.name}_{action}s_id"), event=sql.SQL(event),
                table=sql.Identifier(table.name), function=function,
            ))


def _keep_day_costs(conn: psycopg.Connection[Any], *, fill: bool) -> None:
    """Make triggers keep :data:`~governance_core.storage.schema.DAY_COSTS`; ``fill`` it first.

    A row trigger runs inside the statement that wrote the run: its cost leaves the day it
    stood under and joins the one it stands under now, ``data`` following the columns. An
    update that leaves the cost, the agent and the start's day as they were fires none.
    """
    schema = conn.execute("SELECT current_schema()").fetchone()
    assert schema is not None
    costs = sql.SQL("{}.{}").format(sql.Identifier(schema[0]), sql.Identifier(DAY_COSTS))

    def record(total: str) -> sql.Composable:
        return sql.SQL(
            "json_build_object('id', id, 'agent_id', agent_id, 'day', day, 'total_cost', {})"
        ).format(sql.SQL(total))

    if fill:
        conn.execute(sql.SQL(
            "INSERT INTO {costs} (id, agent_id, day, total_cost, data)"
            " SELECT id, agent_id, day, total, {record} FROM ("
            "SELECT agent_id || '/' || substr(started_at, 1, 10) AS id, agent_id,"
            " substr(started_at, 1, 10) AS day, sum(total_cost) AS total FROM agent_instances"
            " WHERE total_cost IS NOT NULL AND started_at IS NOT NULL AND agent_id IS NOT NULL"
            " GROUP BY 1, 2, 3) AS days"
        ).format(costs=costs, record=record("total")))
    day = "substr({0}.started_at, 1, 10)"
    key = "{0}.agent_id || '/' || " + day
    counted = (
        "{0}.total_cost IS NOT NULL AND {0}.started_at IS NOT NULL AND {0}.agent_id IS NOT NULL"
    )
    same_day = (
        f"{counted.format('OLD')} AND {counted.format('NEW')} AND OLD.agent_id = NEW.agent_id"
        f" AND {day.format('OLD')} = {day.format('NEW')}"
    )
    conn.execute(sql.SQL(
        "CREATE OR REPLACE FUNCTION governance_keep_day_costs() RETURNS trigger"
        " LANGUAGE plpgsql AS $$ BEGIN"
        # A cost moved within the run's day (most writes that move one): one update by key.
        " IF TG_OP = 'UPDATE' AND {same_day} THEN UPDATE {costs} SET"
        " total_cost = total_cost - OLD.total_cost + NEW.total_cost,"
        " data = {priced} WHERE id = {new_key}; RETURN NULL; END IF;"
        " IF TG_OP <> 'INSERT' AND {old_counted}"
        " THEN UPDATE {costs} SET total_cost = total_cost - OLD.total_cost,"
        " data = {taken} WHERE id = {old_key}; END IF;"
        " IF TG_OP <> 'DELETE' AND {new_counted}"
        " THEN INSERT INTO {costs} AS held (id, agent_id, day, total_cost, data)"
        " VALUES ({new_key}, NEW.agent_id, {new_day}, NEW.total_cost, json_build_object("
        "'id', {new_key}, 'agent_id', NEW.agent_id, 'day', {new_day},"
        " 'total_cost', NEW.total_cost))"
        " ON CONFLICT (id) DO UPDATE SET total_cost = held.total_cost + EXCLUDED.total_cost,"
        " data = json_build_object('id', held.id, 'agent_id', held.agent_id, 'day', held.day,"
        " 'total_cost', held.total_cost + EXCLUDED.total_cost); END IF;"
        " RETURN NULL; END $$"
    ).format(
        costs=costs, same_day=sql.SQL(same_day),
        priced=record("total_cost - OLD.total_cost + NEW.total_cost"),
        taken=record("total_cost - OLD.total_cost"),
        old_counted=sql.SQL(counted.format("OLD")), new_counted=sql.SQL(counted.format("NEW")),
        old_key=sql.SQL(key.format("OLD")), new_key=sql.SQL(key.format("NEW")),
        new_day=sql.SQL(day.format("NEW")),
    ))
    fields = ("total_cost", "started_at", "agent_id")
    moved = (
        f"({counted.format('OLD')} OR {counted.format('NEW')})"
        f" AND NOT ({same_day} AND OLD.total_cost = NEW.total_cost)"
    )
    for name, event, when in (
        ("added", "INSERT", counted.format("NEW")),
        ("moved", f"UPDATE OF {', '.join(fields)}", moved),
        ("removed", "DELETE", counted.format("OLD")),
    ):
        conn.execute(sql.SQL(
            "CREATE OR REPLACE TRIGGER {trigger} AFTER {event} ON agent_instances"
            " FOR EACH ROW WHEN ({when}) EXECUTE FUNCTION governance_keep_day_costs()"
        ).format(
            trigger=sql.Identifier(f"agent_instances_cost_{name}"), event=sql.SQL(event),
            when=sql.SQL(when),
        ))


def _migrate_table(
    conn: psycopg.Connection[Any], table: Table, present: set[str] | None, indexes: set[str]
) -> bool:
    """Create the table, or add its missing columns and indexes; whether anything was made."""
    name = sql.Identifier(table.name)
    changed = present is None
    if present is None:
        columns: list[sql.Composable] = [sql.SQL('"id" text COLLATE "C" PRIMARY KEY')]
        columns += [
            sql.SQL("{} {}").format(sql.Identifier(c.name), sql.SQL(_SQL_TYPES[c.type]))
            for c in table.columns
        ]
        columns.append(sql.SQL('"data" json NOT NULL'))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(name, sql.SQL(", ").join(columns)))
    else:
        missing = [c for c in table.columns if c.name not in present]
        for column in missing:
            conn.execute(
                sql.SQL("ALTER TABLE {} ADD COLUMN {} {}").format(
                    name, sql.Identifier(column.name), sql.SQL(_SQL_TYPES[column.type])
                )
            )
        if missing:
            _backfill(conn, table, missing)
            changed = True
    wanted = {_index_name(table, index): index for index in table.wanted_indexes()}
    for index_name in sorted(indexes):
        # Only indexes this adapter made (named <table>__<fields>) are dropped.
        if index_name.startswith(f"{table.name}__") and index_name not in wanted:
            conn.execute(sql.SQL("DROP INDEX IF EXISTS {}").format(sql.Identifier(index_name)))
            changed = True
    for index_name, index in wanted.items():
        if index_name not in indexes:
            changed = True
            where = table.where(index)
            conn.execute(
                sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} ({}){}").format(
                    sql.Identifier(index_name),
                    name,
                    sql.SQL(", ").join(
                        sql.SQL("{} NULLS FIRST").format(sql.Identifier(c)) for c in index
                    ),
                    sql.SQL("") if where is None else sql.SQL(" WHERE {} {}").format(
                        sql.Identifier(where.field), sql.SQL(where.test)
                    ),
                )
            )
    return changed


def _index_name(table: Table, fields: tuple[str, ...]) -> str:
    """``<table>__<fields>``, then a partial index's rows, cut to 63 bytes."""
    # PostgreSQL keeps the first 63 bytes of a name (every name here is ASCII).
    return "__".join((table.name, *table.index_words(fields)))[:_NAME_LENGTH]


def _backfill(conn: psycopg.Connection[Any], table: Table, columns: list[Column]) -> None:
    """Copy new declared fields out of each stored record (a value of another type stays null)."""
    update = sql.SQL("UPDATE {} SET {} WHERE id = %s").format(
        sql.Identifier(table.name),
        sql.SQL(", ").join(sql.SQL("{} = %s").format(sql.Identifier(c.name)) for c in columns),
    )
    rows = conn.execute(sql.SQL("SELECT id, data FROM {}").format(sql.Identifier(table.name)))
    changes = []
    for record_id, record in rows.fetchall():
        values = [record.get(c.name) for c in columns]
        values = [_column(c, v) if v is not None and _fits(c.type, v) else None
                  for c, v in zip(columns, values, strict=True)]
        if any(value is not None for value in values):
            changes.append([*values, record_id])
    if changes:
        with conn.cursor() as cursor:
            cursor.executemany(update, changes)
