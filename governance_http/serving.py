"""Serving the app with granian: the WSGI factory each worker calls, and :func:`serve`.

SQLite connections must not cross a ``fork``: a server that forks workers imports this factory
in each worker (never in the parent), so every worker opens its own connections.
"""

from __future__ import annotations

import copy
import errno
import logging
import os
import socket
from pathlib import Path
from typing import Any

import falcon
from granian import Granian
from granian.constants import Interfaces
from granian.log import LOGGING_CONFIG, LogLevels

from governance_http.app import create_app
from governance_http.requestlog import ACCESS_LOGGER
from governance_http.settings import (
    BASE_URL_VARIABLE,
    DB_ENVIRONMENT_VARIABLE,
    DEFAULT_DB,
    ENCRYPTION_KEY_VARIABLE,
    LOG_LEVELS,
    PRICE_OVERRIDES_VARIABLE,
    default_db,
    default_threads,
    file_path,
    open_governance,
)

__all__ = [
    "BASE_URL_VARIABLE",
    "DB_ENVIRONMENT_VARIABLE",
    "DEFAULT_DB",
    "ENCRYPTION_KEY_VARIABLE",
    "LOG_LEVELS",
    "PRICE_OVERRIDES_VARIABLE",
    "PortInUse",
    "check_port_free",
    "logging_config",
    "open_governance",
    "serve",
    "wsgi_app",
]

class PortInUse(Exception):
    """Another process listens on the address ``serve`` was asked to take."""


def wsgi_app() -> falcon.App[falcon.Request, falcon.Response]:
    """Build the app over the store named by ``$GOVERNANCE_DB`` (``governance.db``): a path or URL.

    Servers call this factory once per process: ``gunicorn
    'governance_http.serving:wsgi_app()'`` or ``waitress-serve --call
    governance_http.serving:wsgi_app``.
    """
    return create_app(open_governance(default_db()))


def check_port_free(host: str, port: int) -> None:
    """Raise :class:`PortInUse` when ``host:port`` cannot be bound by a socket of our own.

    Granian's workers bind with ``SO_REUSEPORT``, which lets a second server share a port
    another holds, and the kernel then splits connections between the two. A plain bind
    (``SO_REUSEADDR`` only, so a closed predecessor's ``TIME_WAIT`` does not count) fails
    while anyone listens there.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            if error.errno == errno.EADDRINUSE:
                raise PortInUse(
                    f"port {port} on {host} is in use (is another server running?); "
                    "choose another with --port"
                ) from error
            raise


def logging_config(level: str = "info", *, access_log: bool = True) -> dict[str, Any]:
    """The ``logging.dictConfig`` each worker applies: granian's, plus the access log.

    The access log (logger ``governance_http.access``, one line a request) goes to standard
    output when ``access_log`` is true and nowhere otherwise; ``level`` applies to the
    server's own messages.
    """
    config: dict[str, Any] = copy.deepcopy(LOGGING_CONFIG)
    config["formatters"]["governance_access"] = {
        "()": "logging.Formatter",
        "fmt": "%(asctime)s %(message)s",
    }
    config["handlers"]["governance_access"] = {
        "formatter": "governance_access",
        "class": "logging.StreamHandler",
        "stream": "ext://sys.stdout",
    }
    config["loggers"][ACCESS_LOGGER] = {
        "handlers": ["governance_access"],
        "level": "INFO" if access_log else logging.CRITICAL + 1,
        "propagate": False,
    }
    config["loggers"]["governance_http"] = {
        "handlers": ["console"], "level": level.upper(), "propagate": False,
    }
    return config


def serve(
    db: str | Path,
    *,
    host: str,
    port: int,
    workers: int | None = None,
    threads: int | None = None,
    log_level: str = "info",
    access_log: bool = True,
) -> None:
    """Serve the API from the store ``db`` (a SQLite path or a URL) until interrupted.

    Granian was measured fastest of the WSGI servers tried (``benchmarks/serve_bench.py``).
    Each of its ``workers`` processes (default: one per CPU) builds the app through
    :func:`wsgi_app`, so each opens its own connections to the store, and answers requests
    from ``threads`` threads (default: :func:`~governance_http.settings.default_threads`,
    1 on SQLite and 4 on PostgreSQL). Raises :class:`PortInUse` before starting when the port is
    taken.
    """
    check_port_free(host, port)
    path = file_path(db)
    os.environ[DB_ENVIRONMENT_VARIABLE] = str(path.resolve()) if path else str(db)
    Granian(
        f"{__name__}:wsgi_app",
        address=host,
        port=port,
        interface=Interfaces.WSGI,
        workers=workers or os.cpu_count() or 1,
        blocking_threads=threads or default_threads(db),
        websockets=False,
        factory=True,
        log_level=LogLevels(log_level),
        log_dictconfig=logging_config(log_level, access_log=access_log),
    ).serve()
