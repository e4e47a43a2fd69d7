"""The WSGI entry point for servers, which opens the store in the serving process.

SQLite connections must not cross a ``fork``: a server that forks workers imports this factory
in each worker (never in the parent), so every worker opens its own connections.
"""

from __future__ import annotations

import os
from pathlib import Path

import falcon
from granian import Granian
from granian.constants import Interfaces

from governance_core.service import Governance
from governance_http.app import create_app

__all__ = ["DB_ENVIRONMENT_VARIABLE", "DEFAULT_DB", "DEFAULT_THREADS", "serve", "wsgi_app"]

DB_ENVIRONMENT_VARIABLE = "GOVERNANCE_DB"
DEFAULT_DB = "governance.db"


def wsgi_app() -> falcon.App[falcon.Request, falcon.Response]:
    """Build the app over the SQLite store named by ``$GOVERNANCE_DB`` (``governance.db``).

    Servers call this factory once per process: ``gunicorn
    'governance_http.serving:wsgi_app()'`` or ``waitress-serve --call
    governance_http.serving:wsgi_app``.
    """
    return create_app(Governance.open(os.environ.get(DB_ENVIRONMENT_VARIABLE, DEFAULT_DB)))


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
    """Serve the API from the SQLite store ``db`` until interrupted, with granian.

    Granian was measured fastest of the WSGI servers tried (``benchmarks/serve_bench.py``).
    Each of its ``workers`` processes (default: one per CPU) builds the app through
    :func:`wsgi_app`, so each opens its own connections to the store, and answers requests
    from ``threads`` threads.
    """
    os.environ[DB_ENVIRONMENT_VARIABLE] = str(Path(db).resolve())
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
