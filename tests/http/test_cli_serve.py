"""``governance serve`` as an operator runs it: a busy port, the access log, the accounts."""

from __future__ import annotations

import json
import logging
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import falcon
import falcon.testing
import pytest

from governance_core.service import Bootstrap, Governance
from governance_http import serving
from governance_http.app import create_app
from governance_http.cli import main
from governance_http.requestlog import ACCESS_LOGGER, loggable_path
from governance_http.serving import PortInUse, check_port_free, logging_config
from tests.http.server import Served, free_port

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


def test_serve_refuses_a_busy_port_before_touching_the_store(
    listening: socket.socket, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = listening.getsockname()[1]
    with listening, pytest.raises(PortInUse, match=f"port {port} on 127.0.0.1 is in use"):
        check_port_free("127.0.0.1", port)
    check_port_free("127.0.0.1", port)  # closed: free again

    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    with busy:
        db = tmp_path / "new.db"
        status = main(["serve", "--db", str(db), "--port", str(port)])
        captured = capsys.readouterr()
    assert (status, captured.out) == (1, "")
    assert captured.err.startswith(f"error: port {port} on 127.0.0.1 is in use")
    assert not db.exists()


@pytest.fixture
def not_serving(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``governance serve`` does everything but start the server; the stores it would serve."""
    served: list[str] = []
    monkeypatch.setattr(serving, "serve", lambda db, **options: served.append(str(db)))
    return served


def test_serve_prints_the_token_once_then_how_to_make_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], not_serving: list[str]
) -> None:
    db = tmp_path / "store.db"
    serve = ["serve", "--db", str(db), "--port", str(free_port())]
    assert main(serve) == 0
    first = capsys.readouterr().out.splitlines()
    assert first[0] == f"{db} is a new store; bootstrapped:"
    account = next(line.split()[-1] for line in first if line.startswith("account_id:"))
    assert sum(line.startswith("token (shown once, keep it):") for line in first) == 1
    assert not any("tokens create" in line for line in first)

    assert main(serve) == 0
    again = capsys.readouterr().out.splitlines()
    assert not any("pf_" in line for line in again)
    assert again[:2] == [
        f"account {account} Default account",
        f"store {db} exists (its token was printed when it was made); make a token with: "
        f"governance tokens create --account {account} --db {db}",
    ]
    assert not_serving == [str(db), str(db)]

    command = shlex.split(again[1].partition("make a token with: ")[2])
    assert command[0] == "governance" and main(command[1:]) == 0
    assert "token (shown once, keep it):" in capsys.readouterr().out


def test_serve_on_the_default_store_with_accounts_names_no_store_and_no_account(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    not_serving: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GOVERNANCE_DB", raising=False)
    assert main(["init"]) == 0
    assert main(["accounts", "create", "--account-name", "Second"]) == 0
    capsys.readouterr()
    assert main(["serve", "--port", str(free_port())]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[2] == (
        "store governance.db exists (its token was printed when it was made); make a token "
        "with: governance tokens create --account ACCOUNT_ID")
    assert lines[0].endswith(" Default account") and lines[1].endswith(" Second")


def test_logging_config_switches_the_access_log() -> None:
    on, off = logging_config("warning"), logging_config("debug", access_log=False)
    assert on["loggers"][ACCESS_LOGGER]["level"] == "INFO"
    assert off["loggers"][ACCESS_LOGGER]["level"] > logging.CRITICAL
    assert (on["loggers"]["governance_http"]["level"], off["loggers"]["governance_http"]["level"]
            ) == ("WARNING", "DEBUG")


def test_one_access_line_a_request_without_secrets(
    gov: Governance, boot: Bootstrap, caplog: pytest.LogCaptureFixture
) -> None:
    client = falcon.testing.TestClient(create_app(gov))
    caplog.set_level(logging.INFO, logger=ACCESS_LOGGER)
    secret_body = {"details": {"name": "card 4111 1111 1111 1111"}}
    answer = client.simulate_post(
        "/api/v1/team", json=secret_body, params={"token": boot.token},
        headers={"Authorization": f"Bearer {boot.token}", "X-Request-Id": "req-1.a:b"},
    )
    assert answer.status_code == 200 and answer.headers["X-Request-Id"] == "req-1.a:b"
    made = client.simulate_get(f"/api/v1/{boot.token}", headers={"X-Request-Id": "bad id\n"})
    assert made.status_code == 404
    made_id = made.headers["X-Request-Id"]
    assert len(made_id) == 32 and made_id != "bad id\n"
    long_id = client.simulate_get("/api/v1/ping", headers={"X-Request-Id": "a" * 200})
    assert long_id.headers["X-Request-Id"] != "a" * 200

    lines = [record.getMessage() for record in caplog.records if record.name == ACCESS_LOGGER]
    assert len(lines) == 3
    method, path, status, duration, request_id = lines[0].split()
    assert (method, path, status, request_id) == ("POST", "/api/v1/team", "200",
                                                   "request_id=req-1.a:b")
    assert duration.endswith("ms") and float(duration[:-2]) >= 0
    assert lines[1].startswith("GET /api/v1/[redacted] 404 ")
    assert lines[1].endswith(f"request_id={made_id}")
    logged = "\n".join(lines)
    # The card number as sent (a random request id may hold "4111" by chance).
    assert boot.token not in logged and "4111 1111" not in logged and "Bearer" not in logged


def test_loggable_paths_are_escaped_and_capped() -> None:
    assert loggable_path("/api/v1/team\n200 forged") == "/api/v1/team%0A200%20forged"
    assert len(loggable_path("/" + "x" * 5000)) == 512


@pytest.mark.slow
def test_a_second_server_on_the_port_exits_and_the_first_logs_requests(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    with Governance.open(db) as gov:
        made = gov.bootstrap(account_name="Acme")
    first = Served(db)
    try:
        lines = first.output_until("serving http://")
        assert f"account {made.account_id} Acme\n" in lines
        assert not any("pf_" in line for line in lines)
        assert any(f"governance tokens create --account {made.account_id}" in line
                   for line in lines)
        first.wait_ready()
        second = subprocess.run(
            [sys.executable, "-m", "governance_http", "serve", "--db", str(tmp_path / "b.db"),
             "--port", str(first.port)],
            capture_output=True, text=True, timeout=30, cwd=ROOT,
        )
        assert second.returncode == 1
        assert second.stderr.strip() == (
            f"error: port {first.port} on 127.0.0.1 is in use (is another server running?); "
            "choose another with --port")
        assert not (tmp_path / "b.db").exists()

        status, _ = first.request(f"/team?pagination[page_size]=5&secret={made.token}",
                                  made.token)
        assert status == 200
        logged = first.output_until("GET /api/v1/team 200")
        assert made.token not in "".join(logged)
        assert "request_id=" in logged[-1]
    finally:
        first.stop()
    assert json.dumps(first.process.returncode) == "0"


@pytest.mark.slow
def test_a_stop_that_reaches_the_worker_first_still_exits_cleanly(tmp_path: Path) -> None:
    # Ctrl-C signals the whole process group. On a busy machine the worker may stop before
    # the main process runs to read its own signal, which Granian alone reports as a worker
    # crash (exit 1). Holding the main process stopped until the worker is gone makes that
    # order certain.
    server = Served(tmp_path / "served.db")
    try:
        server.output_until("serving http://")
        server.wait_ready()
        children = Path(f"/proc/{server.process.pid}/task/{server.process.pid}/children")
        workers = [int(pid) for pid in children.read_text().split()]
        assert workers
        server.process.send_signal(signal.SIGSTOP)
        server.process.send_signal(signal.SIGINT)
        for pid in workers:
            os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + 20
        while any(Path(f"/proc/{pid}").exists() and "Z" not in _state(pid) for pid in workers):
            assert time.monotonic() < deadline, "the worker did not stop"
            time.sleep(0.05)
        server.process.send_signal(signal.SIGCONT)
        server.process.wait(timeout=20)
    finally:
        server.stop()
    assert server.process.returncode == 0, server.output_so_far()


def _state(pid: int) -> str:
    """A process's state letter from ``/proc`` (``Z`` once it has exited, before its reaping)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "Z"
