"""The stores tests run on, and scratch PostgreSQL databases.

``$GOVERNANCE_TEST_STORE=postgres`` makes the store fixtures (``gov`` and the stores of
Hypothesis tests) PostgreSQL instead of memory and SQLite: the whole core suite then runs on
PostgreSQL. PostgreSQL tests need ``$GOVERNANCE_TEST_POSTGRES_URL`` (a server's maintenance
database, e.g. ``postgresql://postgres@127.0.0.1:5432/postgres``); every run creates its own
uniquely named databases there and drops them. Without the variable they are skipped, with a
reason; with ``$GOVERNANCE_TEST_REQUIRE=1`` they fail instead.
"""

from __future__ import annotations

import os
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit, urlunsplit

import pytest

from governance_core.storage import MemoryStore, SQLiteStore, Store
from governance_core.storage.schema import TABLES

if TYPE_CHECKING:
    from governance_core.storage.postgres import PostgresStore

URL_VARIABLE = "GOVERNANCE_TEST_POSTGRES_URL"
REQUIRE_VARIABLE = "GOVERNANCE_TEST_REQUIRE"
STORE_VARIABLE = "GOVERNANCE_TEST_STORE"

STORE_KINDS: tuple[str, ...] = (
    ("postgres",) if os.environ.get(STORE_VARIABLE) == "postgres" else ("memory", "sqlite")
)
"""The stores the ``gov`` fixture and store-parametrised tests run on."""


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_VARIABLE) == "1":
        pytest.fail(f"{reason} (required: ${REQUIRE_VARIABLE}=1)", pytrace=False)
    pytest.skip(reason)


def server_url() -> str:
    """The PostgreSQL server's URL; skips (or fails, when required) without one."""
    url = os.environ.get(URL_VARIABLE)
    if not url:
        _unavailable(f"PostgreSQL tests need ${URL_VARIABLE}, e.g."
                     " postgresql://postgres@127.0.0.1:5432/postgres")
    try:
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError:
        _unavailable("PostgreSQL tests need the postgres extra (psycopg, psycopg-pool)")
    assert url is not None
    return url


def with_query(url: str, **query: str) -> str:
    """``url`` with further query parameters."""
    parts = urlsplit(url)
    extra = "&".join(f"{key}={quote(value)}" for key, value in query.items())
    return urlunsplit(parts._replace(query="&".join(p for p in (parts.query, extra) if p)))


@contextmanager
def scratch_database(prefix: str = "governance_test") -> Iterator[str]:
    """Create a database named uniquely for this run, yield its URL, drop it afterwards."""
    import psycopg

    base = server_url()
    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"'.encode())
    try:
        yield urlunsplit(urlsplit(base)._replace(path=f"/{name}"))
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'.encode())


class SchemaSlots:
    """Empty PostgreSQL stores, handed out in turn from a few schemas of one database.

    Each schema is migrated once; handing one out again closes the store that had it and
    empties its tables, which costs far less than a new database or schema per test. Tests
    hold at most two stores at once, so four slots are never handed out while still in use.
    """

    def __init__(self, url: str, count: int = 4) -> None:
        self.url = url
        self.count = count
        self.turn = 0
        self.stores: dict[int, PostgresStore] = {}

    def store(self) -> PostgresStore:
        """A new store on an empty schema."""
        import psycopg

        from governance_core.storage.postgres import PostgresStore

        slot = self.turn % self.count
        self.turn += 1
        previous = self.stores.pop(slot, None)
        if previous is not None:
            previous.close()
        schema = f"slot{slot}"
        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {schema}".encode())
            present = {
                name for (name,) in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
                )
            }
            # DELETE, not TRUNCATE: the tables are small, and TRUNCATE makes new files for
            # every table and index.
            wipe = "; ".join(f"DELETE FROM {schema}.{name}" for name in TABLES if name in present)
            if wipe:
                conn.execute(wipe.encode())
        store = PostgresStore(self._schema_url(schema))
        self.stores[slot] = store
        return store

    def _schema_url(self, schema: str) -> str:
        return with_query(self.url, options=f"-csearch_path={schema}", pool_max_size="4")

    def close(self) -> None:
        """Close every store handed out."""
        for store in self.stores.values():
            store.close()
        self.stores.clear()


_shared: dict[str, object] = {}


@contextmanager
def scratch_schema(prefix: str = "scratch") -> Iterator[str]:
    """An empty schema of this process's scratch database; a URL whose connections use it.

    Cheaper than a database of its own: dropping a database makes the server checkpoint.
    """
    import psycopg

    base = shared_slots().url
    name = f"{prefix}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}".encode())
    try:
        yield with_query(base, options=f"-csearch_path={name}")
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {name} CASCADE".encode())


RunSQL = Callable[[str], None]
"""Runs one SQL statement on a store's database, outside the store."""


@contextmanager
def older_store(kind: str, tmp_path: Path, prefix: str) -> Iterator[tuple[str, RunSQL]]:
    """A new store's location on ``kind``, and a way to change its database as older code left it.

    ``kind`` is ``sqlite`` (a file in ``tmp_path``) or ``postgres`` (a scratch schema).
    """
    if kind == "sqlite":
        path = tmp_path / "older.db"

        def run_sqlite(statement: str) -> None:
            with sqlite3.connect(path, isolation_level=None) as raw:
                raw.execute(statement)

        yield str(path), run_sqlite
        return
    import psycopg

    with scratch_schema(prefix) as url:

        def run_postgres(statement: str) -> None:
            with psycopg.connect(url, autocommit=True) as raw:
                raw.execute(statement.encode())

        yield url, run_postgres


def shared_slots() -> SchemaSlots:
    """This process's slots, in a scratch database made on first use (skips without a server)."""
    slots = _shared.get("slots")
    if slots is None:
        server_url()
        database = scratch_database()
        slots = SchemaSlots(database.__enter__())
        _shared.update(slots=slots, database=database)
    assert isinstance(slots, SchemaSlots)
    return slots


def drop_shared() -> None:
    """Close the shared slots' stores and drop their database, if they were made."""
    slots = _shared.pop("slots", None)
    database = _shared.pop("database", None)
    if isinstance(slots, SchemaSlots):
        slots.close()
    if database is not None:
        database.__exit__(None, None, None)  # type: ignore[attr-defined]


def make_store(kind: str) -> Store:
    """A new, empty store of ``kind``: ``"memory"``, ``"sqlite"`` or ``"postgres"``."""
    if kind == "memory":
        return MemoryStore()
    if kind == "sqlite":
        return SQLiteStore(":memory:")
    if kind == "postgres":
        return shared_slots().store()
    raise ValueError(f"unknown store kind {kind!r}")


def kind_of(store: Store) -> str:
    """The kind :func:`make_store` takes to make another store like ``store``."""
    return {"MemoryStore": "memory", "SQLiteStore": "sqlite"}.get(
        type(store).__name__, "postgres"
    )
