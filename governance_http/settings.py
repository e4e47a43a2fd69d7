"""The operator's settings: which store to open and how, read from the environment.

This module imports no HTTP library, so the ``governance`` command works without the
``http`` extra.
"""

from __future__ import annotations

import ipaddress
import os
from datetime import timedelta
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import attrs

from governance_core.context import Config
from governance_core.encryption import cipher_from_key, read_key_file
from governance_core.errors import InvalidValue, UnexpectedError
from governance_core.rate_limits import (
    DEFAULT_MAX_FAILURES,
    DEFAULT_WINDOW,
    FailureLimit,
    IPNetwork,
)
from governance_core.service import Governance
from governance_core.storage import is_postgres_location

__all__ = [
    "BASE_URL_VARIABLE",
    "BODY_TIMEOUT_VARIABLE",
    "DB_ENVIRONMENT_VARIABLE",
    "DEFAULT_DB",
    "ENCRYPTION_KEY_FILE_VARIABLE",
    "ENCRYPTION_KEY_VARIABLE",
    "FAILED_ATTEMPTS_VARIABLE",
    "FAILED_ATTEMPTS_WINDOW_VARIABLE",
    "KEY_FILE_SUFFIX",
    "LOG_LEVELS",
    "MAX_FAILED_ATTEMPTS_WINDOW_S",
    "POSTGRES_THREADS",
    "PRICE_OVERRIDES_VARIABLE",
    "SQLITE_THREADS",
    "THREADS_VARIABLE",
    "TRUSTED_PROXIES_VARIABLE",
    "body_timeout",
    "default_db",
    "default_threads",
    "encryption_key",
    "file_path",
    "key_file",
    "open_governance",
    "shown_location",
]

DB_ENVIRONMENT_VARIABLE = "GOVERNANCE_DB"
DEFAULT_DB = "governance.db"
ENCRYPTION_KEY_VARIABLE = "GOVERNANCE_ENCRYPTION_KEY"
ENCRYPTION_KEY_FILE_VARIABLE = "GOVERNANCE_ENCRYPTION_KEY_FILE"
KEY_FILE_SUFFIX = ".key"
"""A SQLite store's key file is the store's path with this added: ``governance.db.key``."""
PRICE_OVERRIDES_VARIABLE = "GOVERNANCE_PRICE_OVERRIDES"
BASE_URL_VARIABLE = "GOVERNANCE_BASE_URL"
BODY_TIMEOUT_VARIABLE = "GOVERNANCE_BODY_TIMEOUT"
THREADS_VARIABLE = "GOVERNANCE_THREADS"
FAILED_ATTEMPTS_VARIABLE = "GOVERNANCE_FAILED_ATTEMPTS"
FAILED_ATTEMPTS_WINDOW_VARIABLE = "GOVERNANCE_FAILED_ATTEMPTS_WINDOW"
TRUSTED_PROXIES_VARIABLE = "GOVERNANCE_TRUSTED_PROXIES"
MAX_FAILED_ATTEMPTS_WINDOW_S = 86400.0
"""The longest window failed attempts may be counted in: a day."""

BODY_TIMEOUT_S = 30.0
"""Seconds a request body may take to arrive in full before ``408`` (``docs/serving.md``)."""

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


def body_timeout() -> float:
    """``$GOVERNANCE_BODY_TIMEOUT`` (seconds, above 0), else :data:`BODY_TIMEOUT_S`.

    Raises ``ValueError`` naming the variable when it is set to anything else.
    """
    text = os.environ.get(BODY_TIMEOUT_VARIABLE, "").strip()
    if not text:
        return BODY_TIMEOUT_S
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise ValueError(
            f"{BODY_TIMEOUT_VARIABLE} must be a number of seconds above 0, not {text!r}"
        )
    return seconds


def failure_limit() -> FailureLimit:
    """The limit on failed sign-ins, token checks and invite accepts, from the environment.

    ``$GOVERNANCE_FAILED_ATTEMPTS`` (failures a client address or a credential may make in
    the window, default 10; 0 turns the limit off), ``$GOVERNANCE_FAILED_ATTEMPTS_WINDOW``
    (seconds, above 0 and at most a day; default 60) and ``$GOVERNANCE_TRUSTED_PROXIES``
    (addresses or networks of reverse proxies whose ``X-Forwarded-For`` names the client,
    comma-separated; default none). Raises ``invalid_value`` naming the variable that is set
    to anything else.
    """
    failures = os.environ.get(FAILED_ATTEMPTS_VARIABLE, "").strip()
    window = os.environ.get(FAILED_ATTEMPTS_WINDOW_VARIABLE, "").strip()
    max_failures = DEFAULT_MAX_FAILURES
    if failures:
        if not failures.isdecimal():
            raise InvalidValue(
                f"{FAILED_ATTEMPTS_VARIABLE} must be a whole number of at least 0, "
                f"not {failures!r}"
            )
        max_failures = int(failures)
    seconds = DEFAULT_WINDOW.total_seconds()
    if window:
        try:
            seconds = float(window)
        except ValueError:
            seconds = 0.0
        if not 0 < seconds <= MAX_FAILED_ATTEMPTS_WINDOW_S:
            raise InvalidValue(
                f"{FAILED_ATTEMPTS_WINDOW_VARIABLE} must be a number of seconds above 0 and at "
                f"most {MAX_FAILED_ATTEMPTS_WINDOW_S:.0f} (a day), not {window!r}"
            )
    return FailureLimit(max_failures=max_failures, window=timedelta(seconds=seconds),
                        trusted_proxies=_networks(TRUSTED_PROXIES_VARIABLE))


def _networks(variable: str) -> tuple[IPNetwork, ...]:
    networks = []
    for entry in os.environ.get(variable, "").split(","):
        if not entry.strip():
            continue
        try:
            networks.append(ipaddress.ip_network(entry.strip(), strict=False))
        except ValueError:
            raise InvalidValue(
                f"{variable} must list addresses or networks (10.0.0.0/8), comma-separated; "
                f"{entry.strip()!r} is neither"
            ) from None
    return tuple(networks)


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


def key_file(db: str | Path) -> Path | None:
    """The key file of the store ``db``: ``$GOVERNANCE_ENCRYPTION_KEY_FILE``, else ``<db>.key``.

    A store without a file (a URL, ``:memory:``) has a key file only when the variable names
    one; None otherwise.
    """
    named = os.environ.get(ENCRYPTION_KEY_FILE_VARIABLE, "").strip()
    if named:
        return Path(named)
    path = file_path(db)
    return None if path is None else path.with_name(path.name + KEY_FILE_SUFFIX)


def encryption_key(db: str | Path) -> str | None:
    """The keys (comma-separated, the first encrypting) the store ``db`` is opened with.

    ``$GOVERNANCE_ENCRYPTION_KEY`` when set, else the keys of :func:`key_file` when it
    exists, else None (storing a sensitive value is then refused). A key file named by
    ``$GOVERNANCE_ENCRYPTION_KEY_FILE`` that does not exist is an error naming the variable.
    """
    key = os.environ.get(ENCRYPTION_KEY_VARIABLE, "").strip()
    if key:
        return key
    path = key_file(db)
    if path is None:
        return None
    if not path.exists():
        if os.environ.get(ENCRYPTION_KEY_FILE_VARIABLE, "").strip():
            raise InvalidValue(f"{ENCRYPTION_KEY_FILE_VARIABLE} names {path}, which does not exist")
        return None
    return read_key_file(path)


def _key_source(db: str | Path) -> str:
    if os.environ.get(ENCRYPTION_KEY_VARIABLE, "").strip():
        return ENCRYPTION_KEY_VARIABLE
    return f"the key file {key_file(db)}"


def open_governance(db: str | Path) -> Governance:
    """Open the store ``db`` with the operator's settings from the environment.

    ``db`` goes to :meth:`Governance.open` as given. Sensitive values are encrypted at rest
    with the keys of :func:`encryption_key` (``$GOVERNANCE_ENCRYPTION_KEY``, or a key file:
    ``$GOVERNANCE_ENCRYPTION_KEY_FILE``, else ``<db>.key`` beside a SQLite store);
    ``$GOVERNANCE_PRICE_OVERRIDES`` names a JSON file of model prices laid over the packaged
    snapshot; ``$GOVERNANCE_BASE_URL`` is the address invite links point at; the limit on
    failed attempts is :func:`failure_limit`'s.
    """
    limit = failure_limit()
    key = encryption_key(db)
    try:
        cipher = cipher_from_key(key)
    except InvalidValue as error:
        raise InvalidValue(f"{_key_source(db)}: {error.message}") from error
    except ImportError as error:  # a key is configured where cryptography is not installed
        raise UnexpectedError(f"{_key_source(db)}: {error}") from error
    governance = Governance.open(
        db,
        config=Config(cipher=cipher),
        price_overrides=os.environ.get(PRICE_OVERRIDES_VARIABLE) or None,
    )
    governance.caches.failed_attempts.limit = limit
    base_url = os.environ.get(BASE_URL_VARIABLE)
    if base_url:
        governance.config = attrs.evolve(governance.config, base_url=base_url.rstrip("/"))
    return governance
