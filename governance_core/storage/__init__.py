"""The storage port and its adapters, and :func:`open_store` to open one from a location."""

from __future__ import annotations

from pathlib import Path

from governance_core.storage.memory import MemoryStore
from governance_core.storage.protocol import Filter, Record, SortKey, Store
from governance_core.storage.sqlite import SQLiteStore

__all__ = ["Filter", "MemoryStore", "Record", "SQLiteStore", "SortKey", "Store", "open_store"]

_POSTGRES_SCHEMES = ("postgresql://", "postgres://")
_SQLITE_SCHEME = "sqlite://"


def open_store(location: str | Path) -> Store:
    """Open the store a location names.

    ``":memory:"``, a file path or ``sqlite:///path`` (``sqlite:////absolute/path``) is a
    :class:`SQLiteStore`; ``postgresql://...`` or ``postgres://...`` is a
    :class:`~governance_core.storage.postgres.PostgresStore` (the ``postgres`` extra). Any
    other ``scheme://`` is refused with ``ValueError``.
    """
    if isinstance(location, Path):
        return SQLiteStore(location)
    if not isinstance(location, str):
        raise ValueError(f"a store location is a path or a URL, not {location!r}")
    if location.startswith(_POSTGRES_SCHEMES):
        # Imported here only: psycopg is an optional dependency.
        from governance_core.storage.postgres import PostgresStore

        return PostgresStore(location)
    if location.startswith(_SQLITE_SCHEME):
        path = location.removeprefix(_SQLITE_SCHEME).removeprefix("/")
        return SQLiteStore(path or ":memory:")
    if "://" in location:
        scheme = location.partition("://")[0]
        raise ValueError(f"unknown store scheme {scheme!r}: use a file path, sqlite:// or"
                         " postgresql://")
    return SQLiteStore(location)
