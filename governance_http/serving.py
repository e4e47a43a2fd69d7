"""Serving the app with granian: the factories each worker calls, and :func:`serve`.

SQLite connections must not cross a ``fork``: a server that forks workers imports this factory
in each worker (never in the parent), so every worker opens its own connections.
"""

from __future__ import annotations

import copy
import errno
import logging
import os
import socket
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import attrs
import falcon
from granian import Granian
from granian.constants import Interfaces
from granian.log import LOGGING_CONFIG, LogLevels

from governance_core.idempotency import KEEP_FOR, purge_expired_keys
from governance_core.notifications.sender import (
    Running,
    Sender,
    SenderSettings,
    SenderUnavailable,
    start_in_thread,
)
from governance_core.otel.idle import ROOT_WAIT_VARIABLE, end_idle_runs, parse_root_wait
from governance_core.service import Governance
from governance_http.app import create_app
from governance_http.gateway import BodyFirst, Shedding
from governance_http.requestlog import ACCESS_LOGGER
from governance_http.settings import (
    BASE_URL_VARIABLE,
    DB_ENVIRONMENT_VARIABLE,
    DEFAULT_DB,
    ENCRYPTION_KEY_VARIABLE,
    LOG_LEVELS,
    PRICE_OVERRIDES_VARIABLE,
    THREADS_VARIABLE,
    body_timeout,
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
    "IDEMPOTENCY_WINDOW_VARIABLE",
    "LOG_LEVELS",
    "PRICE_OVERRIDES_VARIABLE",
    "SENDER_VARIABLE",
    "PortInUse",
    "asgi_app",
    "check_port_free",
    "logging_config",
    "open_governance",
    "parse_idempotency_window",
    "serve",
    "start_idempotency_purge",
    "start_idle_run_sweeper",
    "start_sender",
    "wsgi_app",
]

SENDER_VARIABLE = "GOVERNANCE_SENDER"
"""Set to ``off`` to keep the server from sending webhooks (``governance deliver`` does)."""


class PortInUse(Exception):
    """Another process listens on the address ``serve`` was asked to take."""


def wsgi_app() -> falcon.App[falcon.Request, falcon.Response]:
    """Build the app over the store named by ``$GOVERNANCE_DB`` (``governance.db``): a path or URL.

    Servers call this factory once per process: ``gunicorn
    'governance_http.serving:wsgi_app()'`` or ``waitress-serve --call
    governance_http.serving:wsgi_app``.
    """
    governance = open_governance(default_db())
    start_sender(governance)
    start_idle_run_sweeper(governance)
    start_idempotency_purge(governance)
    return create_app(governance)


IDLE_SWEEP_SECONDS = 60.0
"""How often each worker ends the trace runs whose root never arrived."""


def start_idle_run_sweeper(
    governance: Governance, every: float = IDLE_SWEEP_SECONDS
) -> threading.Event | None:
    """Start this process's sweep of trace runs whose root never came; the event that stops it.

    Every ``every`` seconds it ends, in every account, the trace runs idle for
    ``$GOVERNANCE_OTEL_ROOT_WAIT`` (seconds, default one hour;
    :func:`governance_core.otel.end_idle_runs`), so a quiet agent's last run ends too. ``off``
    turns it off (None is returned). Every worker runs one: the sweep's idempotency keys end
    each run once.
    """
    wait = parse_root_wait(os.environ.get(ROOT_WAIT_VARIABLE))
    if wait is None:
        return None
    stop = threading.Event()

    def sweep() -> None:
        while not stop.wait(every):
            try:
                end_idle_runs(governance, idle_after=wait)
            except Exception:  # a sweep must never end the thread; the next one retries
                logging.getLogger("governance_http").exception("idle run sweep failed")

    threading.Thread(target=sweep, name="governance-idle-runs", daemon=True).start()
    return stop


IDEMPOTENCY_WINDOW_VARIABLE = "GOVERNANCE_IDEMPOTENCY_HOURS"
"""How many hours idempotency keys are kept: 24 (the least, decisions 5) or more, or ``off``."""
IDEMPOTENCY_PURGE_SECONDS = 300.0
"""How often each worker deletes the idempotency records past their window."""


def parse_idempotency_window(text: str | None) -> timedelta | None:
    """The window ``$GOVERNANCE_IDEMPOTENCY_HOURS`` names: 24 hours unset, None for ``off``.

    Anything but ``off`` or a number of hours of at least 24 is ``ValueError`` naming the
    variable.
    """
    if text is None or not text.strip():
        return KEEP_FOR
    if text.strip().lower() == "off":
        return None
    try:
        hours = float(text)
    except ValueError:
        hours = float("nan")
    if not hours >= KEEP_FOR / timedelta(hours=1) or hours == float("inf"):
        raise ValueError(
            f"{IDEMPOTENCY_WINDOW_VARIABLE} must be off or a number of hours of at least 24,"
            f" not {text!r}"
        )
    return timedelta(hours=hours)


def start_idempotency_purge(
    governance: Governance, every: float = IDEMPOTENCY_PURGE_SECONDS
) -> threading.Event | None:
    """Start this process's purge of idempotency records; the event that stops it.

    Every ``every`` seconds it deletes the records older than ``$GOVERNANCE_IDEMPOTENCY_HOURS``
    (default 24; :func:`governance_core.idempotency.purge_expired_keys`, a short transaction
    per 500 records). ``off`` keeps every record (None is returned). Every worker runs one:
    a record two of them find is deleted once.
    """
    window = parse_idempotency_window(os.environ.get(IDEMPOTENCY_WINDOW_VARIABLE))
    if window is None:
        return None
    stop = threading.Event()

    def purge() -> None:
        while not stop.wait(every):
            try:
                purge_expired_keys(governance.store, governance.clock(), window)
            except Exception:  # a purge must never end the thread; the next one retries
                logging.getLogger("governance_http").exception("idempotency purge failed")

    threading.Thread(target=purge, name="governance-idempotency-purge", daemon=True).start()
    return stop


def start_sender(governance: Governance) -> Running | None:
    """Start this process's webhook sender (stop it with ``stop()``); None when it is off.

    Every worker starts one and the lease in the store lets one of them send at a time.
    ``$GOVERNANCE_SENDER=off`` turns it off (for those who run ``governance deliver``
    apart); without the ``notifications`` extra it is off, and the log says so.
    ``$GOVERNANCE_WEBHOOK_ALLOWED_NETWORKS`` lets webhooks reach the networks it lists.
    """
    settings = SenderSettings.from_environment()
    governance.config = attrs.evolve(
        governance.config,
        webhook_allowed_networks=tuple(str(net) for net in settings.allowed_networks),
    )
    if os.environ.get(SENDER_VARIABLE, "on").lower() in ("off", "0", "false", "no"):
        return None
    try:
        return start_in_thread(Sender(governance, settings))
    except SenderUnavailable as error:
        logging.getLogger("governance_http").warning("%s", error)
        return None


def asgi_app() -> BodyFirst:
    """The app ``governance serve`` runs: :func:`wsgi_app` behind :class:`BodyFirst`.

    Each request body is read on the event loop before one of ``$GOVERNANCE_THREADS``
    threads (default: :func:`~governance_http.settings.default_threads`) runs the request; a
    body that takes longer than ``$GOVERNANCE_BODY_TIMEOUT`` seconds is answered ``408``.
    """
    db = default_db()
    threads = int(os.environ.get(THREADS_VARIABLE) or default_threads(db))
    governance = open_governance(db)
    start_sender(governance)
    start_idle_run_sweeper(governance)
    start_idempotency_purge(governance)
    return BodyFirst(
        create_app(governance), threads=threads, body_timeout=body_timeout(),
        shedding=_shedding(),
    )


def _shedding() -> Shedding | None:
    """What the server sheds under load: OTLP exports (none without the ``otel`` extra)."""
    try:
        from governance_http.otlp import export_shedding
    except ModuleNotFoundError:
        return None
    return export_shedding()


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
    :func:`asgi_app`, so each opens its own connections to the store, reads request bodies on
    its event loop and answers requests from ``threads`` threads (default:
    :func:`~governance_http.settings.default_threads`, 1 on SQLite and 4 on PostgreSQL).
    Raises :class:`PortInUse` before starting when the port is taken, and ``ValueError``
    when ``$GOVERNANCE_BODY_TIMEOUT`` is not a number of seconds or a sender setting
    (:meth:`SenderSettings.from_environment`) is not valid.
    """
    check_port_free(host, port)
    body_timeout()
    SenderSettings.from_environment()
    path = file_path(db)
    os.environ[DB_ENVIRONMENT_VARIABLE] = str(path.resolve()) if path else str(db)
    os.environ[THREADS_VARIABLE] = str(threads or default_threads(db))
    server = Granian(
        f"{__name__}:asgi_app",
        address=host,
        port=port,
        interface=Interfaces.ASGINL,
        workers=workers or os.cpu_count() or 1,
        websockets=False,
        factory=True,
        log_level=LogLevels(log_level),
        log_dictconfig=logging_config(log_level, access_log=access_log),
    )
    try:
        server.serve()
    except SystemExit as exit:
        # Ctrl-C and `kill` of the process group signal the workers too; one that stops
        # before the main process has read its own signal counts as a crash to Granian,
        # which then exits 1. Asked to stop, the server stopped: that is success. (A Granian
        # that does not say whether it was signalled keeps its exit status.)
        if not (exit.code == 1 and getattr(server, "interrupt_signal", False)):
            raise
