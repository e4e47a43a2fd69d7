"""The SQLite adapter (through sqlite-utils): WAL, ``BEGIN IMMEDIATE`` writers, own migrations.

Each table holds the whole record as JSON in ``data`` and a copy of each declared field in its
own indexed column. Driver errors are translated: a busy or locked database becomes
:class:`~governance_core.errors.TemporarilyUnavailable` with ``retry_after_ms``.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import sqlite_utils

from governance_core.errors import TemporarilyUnavailable
from governance_core.storage._common import check_fields, decode, encode
from governance_core.storage.protocol import Filter, Record, SortKey
from governance_core.storage.schema import SCHEMA_VERSION, TABLES, Table

__all__ = ["SQLiteStore"]

_SQL_TYPES = {"text": str, "integer": int, "real": float}
_OPS = {"eq": "=", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}
BUSY_TIMEOUT_MS = 5000
RETRY_AFTER_MS = 250


class SQLiteStore:
    """A store in one SQLite file (or ``":memory:"``), safe to share between threads.

    A file gets one connection per thread; ``":memory:"`` has one connection shared under a
    lock, since each connection to it would see a database of its own.
    """

    def __init__(self, path: str | Path = ":memory:") -> None:
        self.path = str(path)
        self._memory = self.path == ":memory:"
        self._local = threading.local()
        self._shared_lock = threading.RLock()
        self._shared: sqlite3.Connection | None = None
        self._connections: list[sqlite3.Connection] = []
        self._connections_lock = threading.Lock()
        with _translated():
            self._migrate(self._connection())

    # -- connections ---------------------------------------------------------------------
    def _open(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, isolation_level=None, check_same_thread=False, timeout=BUSY_TIMEOUT_MS / 1000
        )
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        if not self._memory:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
        with self._connections_lock:
            self._connections.append(conn)
        return conn

    def _connection(self) -> sqlite3.Connection:
        if self._memory:
            if self._shared is None:
                self._shared = self._open()
            return self._shared
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._open()
            self._local.conn = conn
            self._local.depth = 0
        return conn

    @contextmanager
    def _guard(self) -> Iterator[sqlite3.Connection]:
        if self._memory:
            with self._shared_lock:
                yield self._connection()
        else:
            yield self._connection()

    # -- schema --------------------------------------------------------------------------
    def _migrate(self, conn: sqlite3.Connection) -> None:
        db = sqlite_utils.Database(conn)
        conn.execute("BEGIN IMMEDIATE")
        try:
            meta = db["_meta"]
            if not meta.exists():  # type: ignore[union-attr]
                db["_meta"].create({"key": str, "value": str}, pk="key")  # type: ignore[union-attr]
            for table in TABLES.values():
                self._migrate_table(db, table)
            conn.execute(
                "INSERT OR REPLACE INTO _meta (key, value) VALUES ('schema_version', ?)",
                (str(SCHEMA_VERSION),),
            )
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    @staticmethod
    def _migrate_table(db: sqlite_utils.Database, table: Table) -> None:
        handle = db.table(table.name)
        wanted = {c.name: _SQL_TYPES[c.type] for c in table.columns}
        if not handle.exists():
            handle.create({"id": str, "data": str, **wanted}, pk="id", not_null={"data"})
        else:
            present = set(handle.columns_dict)
            for name, kind in wanted.items():
                if name not in present:
                    handle.add_column(name, kind)
                    db.execute(
                        f"UPDATE [{table.name}] SET [{name}] = json_extract(data, ?)", (f"$.{name}",)
                    )
        existing = {tuple(index.columns) for index in handle.indexes}
        for index in [(c.name,) for c in table.columns] + list(table.indexes):
            if index not in existing:
                handle.create_index(list(index), if_not_exists=True)

    # -- the port ------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[None]:
        """``BEGIN IMMEDIATE`` on the outermost call; nested calls join it."""
        with self._guard() as conn, _translated():
            depth = getattr(self._local, "depth", 0) if not self._memory else self._memory_depth()
            self._set_depth(depth + 1)
            try:
                if depth == 0:
                    conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    if depth == 0:
                        conn.execute("ROLLBACK")
                    raise
                if depth == 0:
                    conn.execute("COMMIT")
            finally:
                self._set_depth(depth)

    def _memory_depth(self) -> int:
        return int(getattr(self, "_shared_depth", 0))

    def _set_depth(self, depth: int) -> None:
        if self._memory:
            self._shared_depth = depth
        else:
            self._local.depth = depth

    def get(self, table: str, record_id: str) -> Record | None:
        """The record with ``record_id``, or None."""
        check_fields(table, (), ())
        with self._guard() as conn, _translated():
            row = conn.execute(f"SELECT data FROM [{table}] WHERE id = ?", (record_id,)).fetchone()
        return None if row is None else decode(row[0])

    def put(self, table: str, record: Record) -> None:
        """Insert or replace the record and its declared columns."""
        check_fields(table, (), ())
        columns = [c.name for c in TABLES[table].columns]
        values = [_column_value(record.get(name)) for name in columns]
        names = ", ".join(f"[{n}]" for n in ["id", "data", *columns])
        marks = ", ".join("?" for _ in range(len(columns) + 2))
        with self._guard() as conn, _translated():
            conn.execute(
                f"INSERT OR REPLACE INTO [{table}] ({names}) VALUES ({marks})",
                [record["id"], encode(record), *values],
            )

    def delete(self, table: str, record_id: str) -> bool:
        """Delete the record; whether it existed."""
        check_fields(table, (), ())
        with self._guard() as conn, _translated():
            cursor = conn.execute(f"DELETE FROM [{table}] WHERE id = ?", (record_id,))
        return cursor.rowcount > 0

    def query(
        self,
        table: str,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """Matching records, sorted, one page of them."""
        check_fields(table, filters, sort)
        where, params = _where(filters)
        order = ", ".join([_order(key) for key in sort] + ["id ASC"])
        sql = f"SELECT data FROM [{table}]{where} ORDER BY {order}"
        if limit is not None or offset:
            sql += " LIMIT ? OFFSET ?"
            params += [-1 if limit is None else limit, offset]
        with self._guard() as conn, _translated():
            rows = conn.execute(sql, params).fetchall()
        return [decode(row[0]) for row in rows]

    def count(self, table: str, filters: Sequence[Filter] = ()) -> int:
        """How many records match."""
        check_fields(table, filters, ())
        where, params = _where(filters)
        with self._guard() as conn, _translated():
            row = conn.execute(f"SELECT count(*) FROM [{table}]{where}", params).fetchone()
        return int(row[0])

    def iterate(self, table: str, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """Matching records in id order, fetched in pages of 500."""
        last = ""
        while True:
            page = self.query(table, [*filters, Filter("id", "gt", last)], limit=500)
            yield from page
            if len(page) < 500:
                return
            last = page[-1]["id"]

    def close(self) -> None:
        """Close every connection this store opened."""
        with self._connections_lock:
            for conn in self._connections:
                conn.close()
            self._connections.clear()
        self._shared = None
        self._local = threading.local()


def _column_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (dict, list)):
        return None
    return value


def _where(filters: Sequence[Filter]) -> tuple[str, list[Any]]:
    clauses: list[str] = []
    params: list[Any] = []
    for condition in filters:
        column = f"[{condition.field}]"
        value = _column_value(condition.value)
        if condition.op == "in":
            items = [_column_value(v) for v in condition.value]
            if not items:
                clauses.append("0")
                continue
            clauses.append(f"{column} IN ({', '.join('?' for _ in items)})")
            params.extend(items)
        elif value is None and condition.op in ("eq", "ne"):
            clauses.append(f"{column} IS {'NOT ' if condition.op == 'ne' else ''}NULL")
        else:
            clauses.append(f"{column} {_OPS[condition.op]} ?")
            params.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), params


def _order(key: SortKey) -> str:
    text = f"[{key.field}] {'DESC' if key.descending else 'ASC'}"
    if key.nulls != "auto":
        text += f" NULLS {key.nulls.upper()}"
    return text


@contextmanager
def _translated() -> Iterator[None]:
    try:
        yield
    except sqlite3.OperationalError as error:
        message = str(error).lower()
        if "locked" in message or "busy" in message:
            raise TemporarilyUnavailable(
                "the database is busy, retry shortly", retry_after_ms=RETRY_AFTER_MS
            ) from error
        raise
