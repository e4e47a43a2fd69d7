"""The operator's settings: which store to open and how, read from the environment.

This module imports no HTTP library, so the ``governance`` command works without the
``http`` extra.
"""

from __future__ import annotations

import os
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import attrs

from governance_core.service import Governance
from governance_core.storage import is_postgres_location

__all__ = [
    "BASE_URL_VARIABLE",
    "DB_ENVIRONMENT_VARIABLE",
    "DEFAULT_DB",
    "ENCRYPTION_KEY_VARIABLE",
    "LOG_LEVELS",
    "POSTGRES_THREADS",
    "PRICE_OVERRIDES_VARIABLE",
    "SQLITE_THREADS",
    "default_db",
    "default_threads",
    "file_path",
    "open_governance",
    "shown_location",
]

DB_ENVIRONMENT_VARIABLE = "GOVERNANCE_DB"
DEFAULT_DB = "governance.db"
ENCRYPTION_KEY_VARIABLE = "GOVERNANCE_ENCRYPTION_KEY"
PRICE_OVERRIDES_VARIABLE = "GOVERNANCE_PRICE_OVERRIDES"
BASE_URL_VARIABLE = "GOVERNANCE_BASE_URL"

SQLITE_THREADS = 1
"""Request threads per worker on SQLite. A request there holds the GIL but for short SQLite
calls, so a second thread overlaps little and its switches cost: on 2 cores, 2 workers of one
thread answered 1.3 to 1.7 times the span creates of 2 workers of 4 threads
(``docs/serving.md``)."""

POSTGRES_THREADS = 4
"""Request threads per worker on PostgreSQL: a request waiting on the database lets another
run meanwhile (granian's WSGI default, 256 a worker, would only queue on the pool)."""

LOG_LEVELS = ("critical", "error", "warning", "info", "debug")
"""The levels ``governance serve --log-level`` takes (granian's names)."""


def default_db() -> str:
    """The store named by ``$GOVERNANCE_DB``, else ``governance.db`` in the current directory."""
    return os.environ.get(DB_ENVIRONMENT_VARIABLE) or DEFAULT_DB


def default_threads(location: str | Path) -> int:
    """Request threads per worker for the store at ``location``: PostgreSQL's or SQLite's."""
    return POSTGRES_THREADS if is_postgres_location(str(location)) else SQLITE_THREADS


def file_path(location: str | Path) -> Path | None:
    """The file a store location names, or None for ``:memory:`` and URLs (``scheme://``)."""
    text = str(location)
    if text == ":memory:" or "://" in text:
        return None
    return Path(text)


def shown_location(location: str | Path) -> str:
    """The store location fit to print: a URL's password is replaced by ``***``."""
    text = str(location)
    if "://" not in text:
        return text
    parts = urlsplit(text)
    if parts.password is None:
        return text
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{host}{port}"))


def open_governance(db: str | Path) -> Governance:
    """Open the store ``db`` with the operator's settings from the environment.

    ``db`` goes to :meth:`Governance.open` as given. ``$GOVERNANCE_ENCRYPTION_KEY`` (Fernet
    keys, comma-separated, the first encrypting) encrypts sensitive values at rest;
    ``$GOVERNANCE_PRICE_OVERRIDES`` names a JSON file of model prices laid over the packaged
    snapshot; ``$GOVERNANCE_BASE_URL`` is the address invite links point at.
    """
    governance = Governance.open(
        db,
        encryption_key=os.environ.get(ENCRYPTION_KEY_VARIABLE) or None,
        price_overrides=os.environ.get(PRICE_OVERRIDES_VARIABLE) or None,
    )
    base_url = os.environ.get(BASE_URL_VARIABLE)
    if base_url:
        governance.config = attrs.evolve(governance.config, base_url=base_url.rstrip("/"))
    return governance
