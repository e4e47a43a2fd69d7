"""Fixtures of the notification tests: a real HTTP receiver on 127.0.0.1, and a facade that
may send to it (the address rules allow 127.0.0.1 only here, through the operator setting)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import attrs
import pytest

from governance_core.clock import SystemClock
from governance_core.context import Config
from governance_core.ids import SeededIds
from governance_core.notifications.addresses import parse_networks
from governance_core.notifications.sender import RetryPolicy, Sender, SenderSettings
from governance_core.notifications.transport import Timeouts
from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller
from tests.stores import STORE_KINDS, make_store

LOOPBACK_ONLY = ("127.0.0.1/32",)

Answer = Callable[["Received"], tuple[int, bytes, dict[str, str]]]
"""What the receiver answers a request: status, body, headers."""


@attrs.frozen
class Received:
    """One request the receiver got."""

    path: str
    headers: dict[str, str]
    body: bytes


class Receiver:
    """An HTTP server on 127.0.0.1 that records every POST and answers as told."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.answer: Answer = lambda request: (200, b"ok", {})
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                request = Received(self.path, dict(self.headers), self.rfile.read(length))
                with receiver.arrived:
                    receiver.received.append(request)
                    receiver.arrived.notify_all()
                status, body, headers = receiver.answer(request)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        """The receiver's webhook URL."""
        return f"http://127.0.0.1:{self.server.server_port}/hook"

    def wait_for(self, count: int, timeout: float = 10.0) -> bool:
        """Wait until ``count`` requests arrived; whether they did in time."""
        with self.arrived:
            return self.arrived.wait_for(lambda: len(self.received) >= count, timeout)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A receiver on 127.0.0.1 answering 200 unless told otherwise."""
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def other_receiver() -> Iterator[Receiver]:
    """A second receiver."""
    made = Receiver()
    yield made
    made.close()


@pytest.fixture(params=STORE_KINDS)
def ngov(request: pytest.FixtureRequest) -> Iterator[Governance]:
    """A facade over each store whose webhooks may reach 127.0.0.1 (the wall clock, since
    receivers check the signature's timestamp against theirs)."""
    governance = Governance(
        make_store(request.param), clock=SystemClock, ids=SeededIds(5),
        config=Config(webhook_allowed_networks=LOOPBACK_ONLY),
    )
    yield governance
    governance.close()


@pytest.fixture
def nboot(ngov: Governance) -> Bootstrap:
    """A bootstrapped account on ``ngov``."""
    return ngov.bootstrap(account_name="Acme", admin_email="admin@acme.test")


@pytest.fixture
def caller(ngov: Governance, nboot: Bootstrap) -> Caller:
    """The account's admin, calling operations."""
    return account_caller(ngov, nboot)


def quick_settings(**changes: Any) -> SenderSettings:
    """Sender settings for tests: 127.0.0.1 allowed, retries after milliseconds."""
    settings = SenderSettings(
        allowed_networks=parse_networks(LOOPBACK_ONLY),
        retry=RetryPolicy(max_attempts=4, base_seconds=0.001, cap_seconds=0.01),
        timeouts=Timeouts(connect=1.0, read=2.0), poll_seconds=0.01, monitor_seconds=0,
    )
    return attrs.evolve(settings, **changes)


@pytest.fixture
def sender(ngov: Governance) -> Iterator[Sender]:
    """A sender over ``ngov`` with :func:`quick_settings`."""
    made = Sender(ngov, quick_settings(), holder="test-sender")
    yield made
    made.close()
