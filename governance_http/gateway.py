"""An ASGI front for the WSGI app: a request's body is read whole before a thread is taken.

A WSGI server hands a request to a thread as soon as its headers arrive, and the thread then
waits on the body: a client that declares ``Content-Length: 1000`` and sends one byte holds
that thread for as long as it likes, and with one thread a worker (the SQLite default) a
handful of such clients stop the server. Here the event loop reads the body, which costs no
thread however many clients are slow; only a request whose body has arrived in full (or that
the app will refuse by its size alone) is run, in a pool of ``threads`` threads. A body that
has not arrived within ``body_timeout`` seconds is answered ``408`` and its connection closed.

A body is read no further than ``max_body_bytes + 1`` bytes: the app then refuses it (413) by
its declared or counted length, as it would under any WSGI server. A declared body larger than
that is not read at all; one of up to :data:`DISCARD_MAX` bytes is read and dropped first, so
the client, still sending, sees the 413 rather than a broken connection.

Under load a request may wait for a thread. A request that :class:`Shedding` names (OTLP
exports, whose exporters give up after 10 s) is answered by the shedding app on the event loop
(``503`` with ``Retry-After``) and never run, so that sending it again is safe, when the work
already waiting for a thread would keep it waiting longer than its time (each kind of request,
named or not, is reckoned at the mean of its recent runs), or when no thread has taken it
within its time after all. A request that does run finds in its environ (:data:`WAITED_KEY`)
how long it waited, which an export's own deadline counts.
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Final

import attrs

from governance_http.body import MAX_BODY_BYTES
from governance_http.requestlog import ACCESS_LOGGER, log_request, request_id
from governance_http.settings import BODY_TIMEOUT_S

__all__ = [
    "DISCARD_MAX",
    "WAITED_KEY",
    "BodyFirst",
    "Shedding",
    "StartResponse",
    "WsgiApp",
]

DISCARD_MAX: Final = 64 * 1024 * 1024
"""The largest refused body read and dropped, so its sender gets the 413 (see the module)."""
WAITED_KEY: Final = "governance.waited_s"
"""The environ key of the seconds a request waited, from its arrival to a thread taking it."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
StartResponse = Callable[..., Callable[[bytes], object]]
"""A WSGI ``start_response``: status, headers, optional exc_info; answers a ``write``."""
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]
"""A WSGI application."""


@attrs.frozen
class Shedding:
    """Which requests are answered ``503`` when no thread would take them in time, and how.

    A request whose path is one of ``paths`` is answered by the WSGI app ``answer`` (run on
    the event loop: it must answer at once, without the store), and never run, when the work
    waiting before it would keep it more than ``after_s`` seconds, or when no thread has
    taken it ``after_s`` seconds after it arrived.
    """

    paths: frozenset[str]
    after_s: float
    answer: WsgiApp


class _Backlog:
    """The work waiting for a pool's threads, in seconds, each request at its kind's mean.

    A kind's mean is an exponentially weighted mean of its runs (the latest weighs 1/5); a
    kind never run counts as nothing.
    """

    def __init__(self, threads: int) -> None:
        self._lock = threading.Lock()
        self._threads = threads
        self._waiting = 0.0
        self._typical: dict[bool, float] = {}

    def wait_s(self) -> float:
        """How long a request queued now would wait for a thread, as things stand."""
        return self._waiting / self._threads

    def queued(self, kind: bool) -> float:
        """Count one more request of ``kind`` waiting; the seconds it is reckoned at."""
        with self._lock:
            estimate = self._typical.get(kind, 0.0)
            self._waiting += estimate
            return estimate

    def left(self, estimate: float) -> None:
        """A waiting request reckoned at ``estimate`` was taken by a thread, or shed."""
        with self._lock:
            self._waiting = max(0.0, self._waiting - estimate)

    def ran(self, kind: bool, seconds: float) -> None:
        """A request of ``kind`` ran for ``seconds``."""
        with self._lock:
            known = self._typical.get(kind)
            self._typical[kind] = seconds if known is None else known * 0.8 + seconds * 0.2


class _Disconnected(Exception):
    """The client went away before its body arrived."""


class _Answer:
    """What the WSGI app answered: status, headers and the whole body."""

    def __init__(self) -> None:
        self.status = 500
        self.headers: list[tuple[bytes, bytes]] = []
        self.chunks: list[bytes] = []

    def start_response(
        self, status: str, headers: list[tuple[str, str]], exc_info: ExcInfo | None = None
    ) -> Callable[[bytes], object]:
        self.status = int(status.split(" ", 1)[0])
        self.headers = [(name.lower().encode("latin-1"), value.encode("latin-1"))
                        for name, value in headers]
        return self.chunks.append


class BodyFirst:
    """ASGI app running the WSGI ``app`` in ``threads`` threads once a request's body is read."""

    def __init__(
        self,
        app: WsgiApp,
        *,
        threads: int,
        body_timeout: float = BODY_TIMEOUT_S,
        max_body_bytes: int = MAX_BODY_BYTES,
        logger: logging.Logger | None = None,
        shedding: Shedding | None = None,
    ) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.max_body_bytes = max_body_bytes
        self.shedding = shedding
        self.logger = logger or logging.getLogger(ACCESS_LOGGER)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="governance")
        self._backlog = _Backlog(threads)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope (``http`` or ``lifespan``)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        arrived = time.monotonic()
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await self._body(scope, receive)
        except TimeoutError:
            await self._timed_out(scope, send, started)
            return
        except _Disconnected:
            return
        environ = self._environ(scope, body)
        shedding = self.shedding
        named = shedding is not None and scope["path"] in shedding.paths
        if named and shedding is not None and self._backlog.wait_s() > shedding.after_s:
            await self._shed(scope, send, shedding, environ, started, arrived)
            return
        estimate = self._backlog.queued(named)
        job = self._pool.submit(self._run, environ, arrived, named, estimate)
        waiting = asyncio.wrap_future(job)
        if named and shedding is not None:
            left = arrived + shedding.after_s - time.monotonic()
            done, _ = await asyncio.wait({waiting}, timeout=max(left, 0))
            # A job no thread has started can still be cancelled: it then never runs.
            if not done and job.cancel():
                self._backlog.left(estimate)
                await self._shed(scope, send, shedding, environ, started, arrived)
                return
        await self._send(send, await waiting)

    async def _shed(
        self,
        scope: Scope,
        send: Send,
        shedding: Shedding,
        environ: dict[str, Any],
        started: float,
        arrived: float,
    ) -> None:
        """Answer a request with the shedding app, without running it."""
        rid = request_id(self._header(scope, b"x-request-id"))
        environ.update({WAITED_KEY: time.monotonic() - arrived, "HTTP_X_REQUEST_ID": rid})
        answer = self._collect(shedding.answer, environ)
        await self._send(send, answer)
        log_request(self.logger, scope["method"], scope["path"], answer.status,
                    (time.perf_counter() - started) * 1000, rid)

    @staticmethod
    async def _send(send: Send, answer: _Answer) -> None:
        await send({"type": "http.response.start", "status": answer.status,
                    "headers": answer.headers})
        await send({"type": "http.response.body", "body": b"".join(answer.chunks)})

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                self._pool.shutdown(wait=True)
                await send({"type": "lifespan.shutdown.complete"})
                return

    def _header(self, scope: Scope, name: bytes) -> str | None:
        for found, value in scope["headers"]:
            if found.lower() == name:
                return bytes(value).decode("latin-1")
        return None

    def _declared_length(self, scope: Scope) -> int | None:
        declared = self._header(scope, b"content-length")
        return int(declared) if declared is not None and declared.isdigit() else None

    async def _body(self, scope: Scope, receive: Receive) -> bytes:
        """The body, up to one byte past the limit; a refused declared body read and dropped."""
        declared = self._declared_length(scope)
        keep = self.max_body_bytes + 1
        if declared is not None and declared > self.max_body_bytes:
            keep = 0
            if declared > DISCARD_MAX:
                return b""
        chunks: list[bytes] = []
        kept = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                raise _Disconnected()
            chunk: bytes = message.get("body", b"")
            if kept < keep and chunk:
                chunks.append(chunk[: keep - kept])
                kept += len(chunks[-1])
            if not message.get("more_body", False) or (keep and kept >= keep):
                return b"".join(chunks)

    def _environ(self, scope: Scope, body: bytes) -> dict[str, Any]:
        server = scope.get("server") or ("localhost", 80)
        client = scope.get("client")
        environ: dict[str, Any] = {
            "REQUEST_METHOD": scope["method"],
            "SCRIPT_NAME": scope.get("root_path", "").encode().decode("latin-1"),
            "PATH_INFO": scope["path"].encode().decode("latin-1"),
            "QUERY_STRING": scope.get("query_string", b"").decode("latin-1"),
            "SERVER_NAME": str(server[0]),
            "SERVER_PORT": str(server[1]) if server[1] is not None else "80",
            "SERVER_PROTOCOL": f"HTTP/{scope.get('http_version', '1.1')}",
            "wsgi.version": (1, 0),
            "wsgi.url_scheme": scope.get("scheme", "http"),
            "wsgi.input": io.BytesIO(body),
            "wsgi.errors": sys.stderr,
            "wsgi.multithread": True,
            "wsgi.multiprocess": True,
            "wsgi.run_once": False,
            "wsgi.input_terminated": True,
        }
        if client:
            environ["REMOTE_ADDR"] = str(client[0])
            environ["REMOTE_PORT"] = str(client[1])
        for raw_name, raw_value in scope["headers"]:
            name = raw_name.decode("latin-1").upper().replace("-", "_")
            value = raw_value.decode("latin-1")
            key = name if name in ("CONTENT_LENGTH", "CONTENT_TYPE") else f"HTTP_{name}"
            environ[key] = f"{environ[key]},{value}" if key in environ else value
        if "CONTENT_LENGTH" not in environ and body:
            # A chunked body has arrived whole: its length is now known.
            environ["CONTENT_LENGTH"] = str(len(body))
        return environ

    def _run(
        self, environ: dict[str, Any], arrived: float, named: bool, estimate: float
    ) -> _Answer:
        """Run the WSGI app in a pool thread and collect its whole answer."""
        self._backlog.left(estimate)
        began = time.monotonic()
        environ[WAITED_KEY] = began - arrived
        try:
            return self._collect(self.app, environ)
        finally:
            self._backlog.ran(named, time.monotonic() - began)

    @staticmethod
    def _collect(app: WsgiApp, environ: dict[str, Any]) -> _Answer:
        """Run the WSGI ``app`` and collect its whole answer."""
        answer = _Answer()
        result = app(environ, answer.start_response)
        try:
            answer.chunks.extend(result)
        finally:
            close = getattr(result, "close", None)
            if close is not None:
                close()
        return answer

    async def _timed_out(self, scope: Scope, send: Send, started: float) -> None:
        rid = request_id(self._header(scope, b"x-request-id"))
        message = (
            f"the request body did not arrive within {self.body_timeout:g} s; "
            "send it at once, or through a proxy that buffers request bodies"
        )
        payload = (
            '{"status":"error","code":"bad_request","message":"' + message + '"}'
        ).encode()
        await send({"type": "http.response.start", "status": 408, "headers": [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(payload)).encode()),
            (b"connection", b"close"),
            (b"x-request-id", rid.encode()),
        ]})
        await send({"type": "http.response.body", "body": payload})
        log_request(self.logger, scope["method"], scope["path"], 408,
                    (time.perf_counter() - started) * 1000, rid)
