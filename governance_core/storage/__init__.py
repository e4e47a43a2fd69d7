"""The storage port and its adapters; :func:`open_store` opens one from a location.

The adapters are imported when first named, so using one never loads another (the PostgreSQL
adapter needs the ``postgres`` extra).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from governance_core.storage.protocol import (
    AggregateRow,
    Filter,
    GroupBy,
    Record,
    SortKey,
    Store,
)

if TYPE_CHECKING:
    from governance_core.storage.memory import MemoryStore
    from governance_core.storage.sqlite import SQLiteStore

__all__ = [
    "AggregateRow", "Filter", "GroupBy", "MemoryStore", "Record", "SQLiteStore", "SortKey",
    "Store", "is_postgres_location", "open_store",
]

_SQLITE_URL = "sqlite:///"
_POSTGRES_URLS = ("postgresql://", "postgres://")


def is_postgres_location(location: object) -> bool:
    """Whether ``location`` is a PostgreSQL URL (``postgresql://`` or ``postgres://``)."""
    return isinstance(location, str) and location.startswith(_POSTGRES_URLS)


def open_store(location: str | Path) -> Store:
    """Open the store at ``location``.

    ``":memory:"``, a file path or ``sqlite:///path`` (``sqlite:////absolute/path``) is SQLite,
    which creates the file when missing; ``postgresql://...`` or ``postgres://...`` is
    PostgreSQL (:class:`~governance_core.storage.postgres.PostgresStore`). Another
    ``scheme://`` is ``ValueError``.
    """
    text = str(location)
    if is_postgres_location(text):
        from governance_core.storage.postgres import PostgresStore

        return PostgresStore(text)
    if text.startswith(_SQLITE_URL):
        text = text[len(_SQLITE_URL):]
    elif "://" in text:
        scheme = text.split("://", 1)[0]
        raise ValueError(f"no store adapter for {scheme}:// locations")
    from governance_core.storage.sqlite import SQLiteStore

    return SQLiteStore(text)


def __getattr__(name: str) -> Any:
    if name == "MemoryStore":
        from governance_core.storage.memory import MemoryStore

        return MemoryStore
    if name == "SQLiteStore":
        from governance_core.storage.sqlite import SQLiteStore

        return SQLiteStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
