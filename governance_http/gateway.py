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
"""

from __future__ import annotations

import asyncio
import io
import logging
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import Any, Final

from governance_http.body import MAX_BODY_BYTES
from governance_http.requestlog import ACCESS_LOGGER, log_request, request_id
from governance_http.settings import BODY_TIMEOUT_S

__all__ = [
    "DISCARD_MAX",
    "BodyFirst",
    "WsgiApp",
]

DISCARD_MAX: Final = 64 * 1024 * 1024
"""The largest refused body read and dropped, so its sender gets the 413 (see the module)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None]
StartResponse = Callable[..., Callable[[bytes], object]]
WsgiApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


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
    ) -> None:
        self.app = app
        self.body_timeout = body_timeout
        self.max_body_bytes = max_body_bytes
        self.logger = logger or logging.getLogger(ACCESS_LOGGER)
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="governance")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection scope (``http`` or ``lifespan``)."""
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.body_timeout):
                body = await self._body(scope, receive)
        except TimeoutError:
            await self._timed_out(scope, send, started)
            return
        except _Disconnected:
            return
        environ = self._environ(scope, body)
        loop = asyncio.get_running_loop()
        answer = await loop.run_in_executor(self._pool, self._run, environ)
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

    def _run(self, environ: dict[str, Any]) -> _Answer:
        """Run the WSGI app in a pool thread and collect its whole answer."""
        answer = _Answer()
        result = self.app(environ, answer.start_response)
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
