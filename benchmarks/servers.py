"""Starting and stopping a server process for the benchmarks that measure over HTTP."""

from __future__ import annotations

import http.client
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

HOST = "127.0.0.1"
_TICKS = os.sysconf("SC_CLK_TCK")

Request = tuple[str, str, "str | None"]
"""One request a client sends: its method, target and JSON body (None: no body)."""


def free_port() -> int:
    """A loopback port nobody listens on right now."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        port: int = sock.getsockname()[1]
        return port


def timed_requests(port: int, token: str, requests: Iterable[Request]) -> list[float]:
    """Send ``requests`` in order on one connection as ``token``; each one's latency (s).

    An answer other than 200 raises ``RuntimeError``.
    """
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection = http.client.HTTPConnection(HOST, port, timeout=30)
    latencies = []
    for method, target, body in requests:
        began = time.perf_counter()
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        response.read()
        latencies.append(time.perf_counter() - began)
        if response.status != 200:
            raise RuntimeError(f"{method} {target} answered {response.status}")
    return latencies


def governance_serve(db: str, port: int, *options: str) -> list[str]:
    """The arguments (after the interpreter) of ``governance serve`` on ``db`` and ``port``."""
    return ["-m", "governance_http", "serve", "--db", db, "--host", HOST, "--port", str(port),
            *options]


def start_server(
    argv: Sequence[str],
    port: int,
    *,
    env: Mapping[str, str] | None = None,
    timeout_s: float = 30,
) -> subprocess.Popen[bytes]:
    """Run ``python argv...`` in a session of its own; return it once it answers ``/ping``."""
    process = subprocess.Popen(
        [sys.executable, *argv], env=None if env is None else dict(env),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            connection = http.client.HTTPConnection(HOST, port, timeout=2)
            connection.request("GET", "/api/v1/ping")
            if connection.getresponse().status == 200:
                return process
        except OSError:
            time.sleep(0.1)
    stop_server(process)
    raise RuntimeError(f"{' '.join(argv)} did not start")


def stop_server(process: subprocess.Popen[bytes]) -> None:
    """Stop a server and every process it started."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


def cpu_seconds(group: int) -> float:
    """User and system CPU seconds of every live process of the session ``group``."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        # After the command: state, ppid, pgrp, session, ..., utime (12th), stime (13th).
        if int(fields[3]) == group:
            total += int(fields[11]) + int(fields[12])
    return total / _TICKS
