"""The ``governance`` command: init, token create, and serve in a real subprocess."""

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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governance_core.service import Governance
from governance_http.cli import main

BOOTSTRAP_KEYS = {"account_id", "admin_user_id", "environment_id", "risk_profile_id", "token"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def test_init_json_prints_one_object_and_adds_accounts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.db")
    status, out, _ = run(capsys, "init", "--db", db, "--json")
    assert status == 0
    first = json.loads(out)
    assert set(first) == BOOTSTRAP_KEYS
    status, out, _ = run(capsys, "init", "--db", db, "--json", "--account-name", "Second")
    second = json.loads(out)
    assert second["account_id"] != first["account_id"]
    with Governance.open(db) as gov:
        assert gov.authenticate(first["token"]).account_id == first["account_id"]
        assert gov.authenticate(second["token"]).account_id == second["account_id"]
        assert gov.store.count("accounts") == 2


def test_init_prints_the_ids_and_the_token(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "init", "--db", str(tmp_path / "g.db"))
    assert status == 0
    lines = dict(line.split(":", 1) for line in out.splitlines())
    assert {"account_id", "admin_user_id", "environment_id", "risk_profile_id"} <= set(lines)
    assert any(value.strip().startswith("pf_") for value in lines.values())


def test_token_create_goes_through_the_core(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.db")
    made = json.loads(run(capsys, "init", "--db", db, "--json")[1])
    status, out, _ = run(
        capsys, "token", "create", "--db", db, "--account", made["account_id"], "--json",
        "--expires-at", "2999-01-01T00:00:00Z",
    )
    assert status == 0
    token = json.loads(out)
    assert token["token_scope"] == "account" and token["token"].startswith("pf_")
    with Governance.open(db) as gov:
        principal = gov.authenticate(token["token"])
        assert (principal.account_id, principal.token_id) == (made["account_id"], token["id"])


def test_token_create_reports_refusals(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.db")
    made = json.loads(run(capsys, "init", "--db", db, "--json")[1])
    status, _, err = run(
        capsys, "token", "create", "--db", db, "--account", made["account_id"],
        "--scope", "agent_deployment",
    )
    assert status == 1
    assert "validation_errors" in err and "agent_id" in err and "environment_id" in err
    status, _, err = run(capsys, "token", "create", "--db", db, "--account", "0" * 32)
    assert (status, err.strip()) == (1, "error: not_found: account not found")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Served:
    """``governance serve`` in a subprocess, with its output collected line by line."""

    def __init__(self, db: Path) -> None:
        self.port = free_port()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "governance_http", "serve", "--db", str(db),
             "--port", str(self.port), "--workers", "1"],
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

    def request(self, path: str, token: str | None = None) -> tuple[int, Any]:
        request = urllib.request.Request(f"http://127.0.0.1:{self.port}/api/v1{path}")
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


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    server = Served(tmp_path / "served.db")
    yield server
    server.stop()


@pytest.mark.slow
def test_serve_bootstraps_a_new_store_once_and_answers(served: Served, tmp_path: Path) -> None:
    lines = served.output_until("serving http://")
    token = next(line.split()[-1] for line in lines if "token" in line)
    served.wait_ready()
    assert served.request("/ping", token) == (200, {"status": "success"})
    status, teams = served.request("/team", token)
    assert status == 200 and teams["summaries"] == []
    status, error = served.request("/team")
    assert (status, error["code"]) == (401, "not_authenticated")
    served.stop()
    assert served.process.returncode == 0

    again = Served(tmp_path / "served.db")
    try:
        lines = again.output_until("serving http://")
        assert not any("token" in line for line in lines)
        again.wait_ready()
        assert again.request("/team", token)[0] == 200
    finally:
        again.stop()
