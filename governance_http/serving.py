"""The WSGI entry point for servers, which opens the store in the serving process.

SQLite connections must not cross a ``fork``: a server that forks workers imports this factory
in each worker (never in the parent), so every worker opens its own connections.
"""

from __future__ import annotations

import os
from pathlib import Path

import attrs
import falcon
from granian import Granian
from granian.constants import Interfaces

from governance_core.service import Governance
from governance_http.app import create_app

__all__ = [
    "DB_ENVIRONMENT_VARIABLE",
    "DEFAULT_DB",
    "DEFAULT_THREADS",
    "ENCRYPTION_KEY_VARIABLE",
    "PRICE_OVERRIDES_VARIABLE",
    "BASE_URL_VARIABLE",
    "open_governance",
    "serve",
    "wsgi_app",
]

DB_ENVIRONMENT_VARIABLE = "GOVERNANCE_DB"
DEFAULT_DB = "governance.db"
ENCRYPTION_KEY_VARIABLE = "GOVERNANCE_ENCRYPTION_KEY"
PRICE_OVERRIDES_VARIABLE = "GOVERNANCE_PRICE_OVERRIDES"
BASE_URL_VARIABLE = "GOVERNANCE_BASE_URL"


def open_governance(db: str | Path) -> Governance:
    """Open the store ``db`` with the operator's settings from the environment.

    ``$GOVERNANCE_ENCRYPTION_KEY`` (Fernet keys, comma-separated, the first encrypting)
    encrypts sensitive values at rest; ``$GOVERNANCE_PRICE_OVERRIDES`` names a JSON file of
    model prices laid over the packaged snapshot; ``$GOVERNANCE_BASE_URL`` is the address
    invite links point at.
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


def wsgi_app() -> falcon.App[falcon.Request, falcon.Response]:
    """Build the app over the store named by ``$GOVERNANCE_DB`` (``governance.db``): a path or URL.

    Servers call this factory once per process: ``gunicorn
    'governance_http.serving:wsgi_app()'`` or ``waitress-serve --call
    governance_http.serving:wsgi_app``.
    """
    return create_app(open_governance(os.environ.get(DB_ENVIRONMENT_VARIABLE, DEFAULT_DB)))


DEFAULT_THREADS = 4
"""Request threads per worker: enough to overlap reads, few enough that SQLite's one writer
is not queued behind hundreds of threads (granian's WSGI default is 256 a worker)."""


def serve(
    db: str | Path,
    *,
    host: str,
    port: int,
    workers: int | None = None,
    threads: int = DEFAULT_THREADS,
) -> None:
    """Serve the API from the store ``db`` (a SQLite path or a URL) until interrupted.

    Granian was measured fastest of the WSGI servers tried (``benchmarks/serve_bench.py``).
    Each of its ``workers`` processes (default: one per CPU) builds the app through
    :func:`wsgi_app`, so each opens its own connections to the store, and answers requests
    from ``threads`` threads.
    """
    location = str(db)
    # A URL passes through as given; a file path is made absolute for the workers.
    os.environ[DB_ENVIRONMENT_VARIABLE] = location if "://" in location else str(
        Path(location).resolve()
    )
    Granian(
        f"{__name__}:wsgi_app",
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers or os.cpu_count() or 1,
        blocking_threads=threads,
        websockets=False,
        factory=True,
    ).serve()
