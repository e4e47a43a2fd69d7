"""A real ``governance serve`` in a subprocess, for the CLI and SDK tests."""

from __future__ import annotations

import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Served:
    """``governance serve`` in a subprocess, with its output collected line by line."""

    def __init__(self, db: Path, workers: int = 1) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "governance_http", "serve", "--db", str(db),
             "--port", str(self.port), "--workers", str(workers)],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        threading.Thread(target=self._collect, daemon=True).start()

    def _collect(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def output_until(self, marker: str, timeout: float = 20) -> list[str]:
        seen: list[str] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                seen.append(self.lines.get(timeout=0.2))
            except queue.Empty:
                continue
            if marker in seen[-1]:
                return seen
        raise AssertionError(f"no {marker!r} in {seen}")

    def output_so_far(self) -> str:
        """The lines printed and not yet read, for a failing assertion's message."""
        seen: list[str] = []
        while not self.lines.empty():
            seen.append(self.lines.get_nowait())
        return "".join(seen)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(
        self, path: str, token: str | None = None, *, method: str = "GET", body: Any = None
    ) -> tuple[int, Any]:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(f"{self.base_url}/api/v1{path}", data, method=method)
        request.add_header("Content-Type", "application/json")
        if token is not None:
            request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    def wait_ready(self, timeout: float = 20) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.request("/ping")[0] == 200:
                    return
            except OSError:
                time.sleep(0.1)
        raise AssertionError("the server did not answer /ping")

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
