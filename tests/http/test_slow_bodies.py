"""A request body that stalls holds no thread: others are served, and the stalled one gets 408."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from governance_http.gateway import BodyFirst
from governance_http.settings import BODY_TIMEOUT_VARIABLE, body_timeout
from tests.http.server import free_port


def echo_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    """A WSGI app answering what it was given: a few environ keys and the body it read."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    seen = {key: environ.get(key) for key in (
        "REQUEST_METHOD", "PATH_INFO", "QUERY_STRING", "CONTENT_TYPE", "CONTENT_LENGTH",
        "HTTP_X_TWICE", "REMOTE_ADDR", "wsgi.url_scheme",
    )}
    start_response("200 OK", [("Content-Type", "application/json")])
    return [json.dumps({**seen, "body": body.decode("latin-1")}).encode()]


def scope(path: str = "/x", headers: list[tuple[bytes, bytes]] | None = None) -> dict[str, Any]:
    return {"type": "http", "method": "POST", "path": path, "query_string": b"a=1",
            "headers": headers or [], "http_version": "1.1", "scheme": "http",
            "server": ("127.0.0.1", 8000), "client": ("10.0.0.1", 5000), "root_path": ""}


class Client:
    """Feeds an ASGI request body in the given pieces (``None``: stall for good)."""

    def __init__(self, pieces: list[bytes | None]) -> None:
        self.pieces = pieces
        self.sent: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        piece = self.pieces.pop(0) if self.pieces else b""
        if piece is None:
            await asyncio.Event().wait()
        return {"type": "http.request", "body": piece, "more_body": bool(self.pieces)}

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int:
        return int(self.sent[0]["status"])

    @property
    def body(self) -> Any:
        return json.loads(b"".join(m.get("body", b"") for m in self.sent[1:]))


def serve_one(app: BodyFirst, client: Client, **request: Any) -> None:
    asyncio.run(app(scope(**request), client.receive, client.send))


def test_a_stalled_body_is_answered_408_while_another_request_is_served() -> None:
    app = BodyFirst(echo_app, threads=1, body_timeout=0.5)
    stalled = Client([b"{", None])
    served = Client([b'{"a":', b"1}"])

    async def both() -> None:
        slow = asyncio.create_task(app(scope(), stalled.receive, stalled.send))
        await asyncio.sleep(0)
        await app(scope(), served.receive, served.send)
        assert not stalled.sent, "the stalled request must not have been answered yet"
        await slow

    asyncio.run(both())
    assert served.status == 200 and served.body["body"] == '{"a":1}'
    assert stalled.status == 408
    assert stalled.body["code"] == "bad_request" and "0.5 s" in stalled.body["message"]
    assert (b"connection", b"close") in stalled.sent[0]["headers"]


def test_the_environ_carries_the_request() -> None:
    app = BodyFirst(echo_app, threads=1)
    client = Client([b"hello"])
    serve_one(app, client, path="/caf\u00e9", headers=[
        (b"content-type", b"application/json"), (b"x-twice", b"1"), (b"x-twice", b"2"),
    ])
    assert client.status == 200
    assert client.body == {
        "REQUEST_METHOD": "POST", "PATH_INFO": "/caf\u00c3\u00a9", "QUERY_STRING": "a=1",
        "CONTENT_TYPE": "application/json", "CONTENT_LENGTH": "5", "HTTP_X_TWICE": "1,2",
        "REMOTE_ADDR": "10.0.0.1", "wsgi.url_scheme": "http", "body": "hello",
    }


def test_a_chunked_body_is_read_no_further_than_one_byte_past_the_limit() -> None:
    app = BodyFirst(echo_app, threads=1, max_body_bytes=4)
    client = Client([b"abc", b"def", None])
    serve_one(app, client)
    assert client.body["body"] == "abcde" and client.body["CONTENT_LENGTH"] == "5"


def test_a_declared_body_over_the_limit_is_dropped_unread() -> None:
    app = BodyFirst(echo_app, threads=1, max_body_bytes=4)
    client = Client([b"abc", b"def"])
    serve_one(app, client, headers=[(b"content-length", b"6")])
    assert client.body["body"] == "" and client.body["CONTENT_LENGTH"] == "6"


def test_the_body_timeout_setting_names_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(BODY_TIMEOUT_VARIABLE, "2.5")
    assert body_timeout() == 2.5
    for bad in ("0", "-1", "soon", "inf"):
        monkeypatch.setenv(BODY_TIMEOUT_VARIABLE, bad)
        with pytest.raises(ValueError, match=BODY_TIMEOUT_VARIABLE):
            body_timeout()


SLOW_CONNECTIONS = 50
HELD_FOR_S = 20


def _slow_request(port: int, path: str) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", port))
    connection.sendall(
        f"POST {path} HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\n"
        "Content-Length: 1000\r\n\r\n{".encode()
    )
    return connection


def _request(port: int, method: str, path: str, token: str, body: Any = None) -> int:
    data = b"" if body is None else json.dumps(body).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as connection:
        connection.sendall(
            f"{method} {path} HTTP/1.1\r\nHost: test\r\nAuthorization: Bearer {token}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
            "Connection: close\r\n\r\n".encode() + data
        )
        return int(connection.recv(64).split()[1])


@pytest.mark.slow
def test_fifty_stalled_bodies_do_not_stop_the_default_server(tmp_path: Path) -> None:
    db = tmp_path / "slow.db"
    made = subprocess.run(
        [sys.executable, "-m", "governance_http", "init", "--db", str(db), "--json"],
        capture_output=True, text=True, check=True,
    )
    token = json.loads(made.stdout)["token"]
    port = free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "governance_http", "serve", "--db", str(db), "--port", str(port),
         "--workers", "2"],
        env={**os.environ, BODY_TIMEOUT_VARIABLE: str(HELD_FOR_S)},
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    held: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if _request(port, "GET", "/api/v1/ping", token) == 200:
                    break
            except OSError:
                time.sleep(0.2)
        began = time.monotonic()
        held = [_slow_request(port, "/api/v1/team" if n % 2 else "/sign-in")
                for n in range(SLOW_CONNECTIONS)]
        statuses = [_request(port, "GET", "/api/v1/ping", token) for _ in range(20)]
        statuses += [_request(port, "POST", "/api/v1/agent", token, {"name": f"Held {n}"})
                     for n in range(5)]
        assert statuses == [200] * 25
        assert time.monotonic() - began < HELD_FOR_S, "the slow bodies were not held throughout"
        for connection in held:
            connection.setblocking(False)
            with pytest.raises(BlockingIOError):
                connection.recv(1)
        held[0].setblocking(True)
        held[0].settimeout(HELD_FOR_S + 20)
        assert held[0].recv(64).startswith(b"HTTP/1.1 408")
    finally:
        for connection in held:
            connection.close()
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)
