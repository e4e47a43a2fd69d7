"""The read commands: accounts, tokens, runs and export, for people and with --json."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest

from governance_core.errors import BadAuthToken
from governance_core.rules.states import INSTANCE, states
from governance_core.service import Governance, Session
from governance_http.cli import main
from tests.http.support import as_json, run

ROOT = Path(__file__).resolve().parents[2]


@attrs.frozen
class Store:
    db: str
    first: dict[str, Any]
    second: dict[str, Any]
    failed_run: str
    plain_agent: str


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Store:
    """Two accounts: the first with two playground runs, the second with one failed run."""
    db = str(tmp_path / "g.db")
    first = as_json(capsys, "init", "--db", db, "--account-name", "Acme")
    second = as_json(capsys, "accounts", "create", "--db", db, "--account-name", "Globex")
    assert run(capsys, "demo", "--db", db, "--runs", "2", "--account", first["account_id"])[0] == 0
    with Governance.open(db) as gov:
        session = gov.session(second["token"])
        agent = session.details("agents/create", name="Plain agent")
        with pytest.raises(TimeoutError), session.run(agent_id=agent["id"],
                                                      agent_version="1") as recording:
            with recording.span("tool", {"name": "fetch"}):
                pass
            raise TimeoutError("gave up")
    return Store(db, first, second, recording.id, agent["id"])


def test_accounts_list(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    listed = as_json(capsys, "accounts", "list", "--db", store.db)
    assert [(a["id"], a["name"]) for a in listed] == [
        (store.first["account_id"], "Acme"), (store.second["account_id"], "Globex")]
    status, out, _ = run(capsys, "accounts", "list", "--db", store.db)
    lines = out.splitlines()
    assert status == 0 and lines[0].split() == ["ID", "NAME", "PURPOSE", "CREATED"]
    rows = [line for line in lines if line.startswith("01")]
    assert len(rows) == 2 and rows[0].index("Acme") == rows[1].index("Globex")


def test_tokens_list_and_revoke(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    listed = as_json(capsys, "tokens", "list", "--db", store.db)
    assert {t["account_id"] for t in listed} == {
        store.first["account_id"], store.second["account_id"]}
    assert store.first["token"] not in json.dumps(listed)
    only = as_json(capsys, "tokens", "list", "--db", store.db,
                   "--account", store.second["account_id"])
    assert len(only) == 1
    status, out, _ = run(capsys, "tokens", "list", "--db", store.db)
    assert status == 0 and out.splitlines()[0].split()[:4] == ["ID", "ACCOUNT", "SCOPE", "STATUS"]

    token_id = next(t["id"] for t in listed if t["account_id"] == store.first["account_id"])
    status, out, _ = run(capsys, "tokens", "revoke", "--db", store.db, token_id)
    assert (status, out.strip()) == (0, f"token {token_id} is revoked")
    with Governance.open(store.db) as gov, pytest.raises(BadAuthToken):
        gov.authenticate(store.first["token"])
    status, _, err = run(capsys, "tokens", "revoke", "--db", store.db, "0" * 32)
    assert (status, err.strip()) == (1, f"error: no token {'0' * 32} in this store")


def test_runs_list_and_its_filters(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    runs = as_json(capsys, "runs", "list", "--db", store.db)
    assert len(runs) == 3
    demo = runs[1]
    assert demo["agent_name"] == "Loan application review agent"
    assert (demo["status"], demo["risk_level"], demo["risk_score"]) == ("complete", "high", 293)
    assert round(demo["total_cost"], 4) == 0.0419 and demo["span_counts"]["total"] == 8
    failed = as_json(capsys, "runs", "list", "--db", store.db, "--status", "failed")
    assert [r["id"] for r in failed] == [store.failed_run]
    assert failed[0]["span_counts"]["total"] == 1 and failed[0]["total_cost"] is None
    by_agent = as_json(capsys, "runs", "list", "--db", store.db, "--agent", store.plain_agent)
    assert [r["id"] for r in by_agent] == [store.failed_run]
    assert len(as_json(capsys, "runs", "list", "--db", store.db, "--since", "1h")) == 3
    assert as_json(capsys, "runs", "list", "--db", store.db, "--since", "2999-01-01") == []
    assert len(as_json(capsys, "runs", "list", "--db", store.db, "--limit", "1")) == 1
    assert len(as_json(capsys, "runs", "list", "--db", store.db,
                       "--account", store.first["account_id"])) == 2

    status, out, _ = run(capsys, "runs", "list", "--db", store.db)
    header, *rows = [line for line in out.splitlines() if line.strip()
                     and not set(line.strip()) <= {"─", " "}]
    assert header.split() == ["RUN", "AGENT", "STATUS", "RISK", "SCORE", "COST", "SPANS",
                              "FAILED", "ALERTS", "STARTED"]
    assert "complete   high     293   $0.04189       8        0        1" in rows[1]
    assert "failed" in rows[0] and "-" in rows[0]
    with pytest.raises(SystemExit) as exited:
        main(["runs", "list", "--db", store.db, "--since", "yesterday"])
    assert exited.value.code == 2
    assert "neither an ISO 8601 date-time nor an age" in capsys.readouterr().err
    status, out, _ = run(capsys, "runs", "list", "--db", store.db, "--status", "active")
    assert (status, out.strip()) == (0, "no runs")


def _register(session: Session, agent_id: str) -> str:
    """A pending run of ``agent_id``: registered now, not started."""
    registered = session.details(
        "playground/register_loan_application_review_agent_instance", {"agent_id": agent_id}
    )
    run_id: str = registered["id"]
    return run_id


def test_since_is_the_start_time_and_a_run_not_started_is_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "since.db")
    made = as_json(capsys, "init", "--db", db)
    with Governance.open(db) as gov:
        session = gov.session(made["token"])
        agent = session.call("playground/create_loan_application_review_agent")["agent"]
        # Registered now, started (by the client's clock) in 2020.
        started_long_ago = _register(session, agent["id"])
        session.call("agent_instances/start", {"agent_instance_id": started_long_ago,
                                               "timestamp": "2020-03-01T12:00:00Z"})
        started_now = _register(session, agent["id"])
        session.call("agent_instances/start", {"agent_instance_id": started_now})
        not_started = _register(session, agent["id"])

    def since(moment: str) -> list[str]:
        return [r["id"] for r in as_json(capsys, "runs", "list", "--db", db, "--since", moment)]

    assert since("2021-01-01") == [started_now]
    assert since("1h") == [started_now]
    assert since("2020-03-01T12:00:00Z") == [started_now, started_long_ago]
    assert since("2020-03-01T12:00:01Z") == [started_now]
    listed = {r["id"]: r for r in as_json(capsys, "runs", "list", "--db", db)}
    assert set(listed) == {started_long_ago, started_now, not_started}
    assert listed[not_started]["started_at"] is None


def test_status_takes_every_state_of_the_run_machine(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "states.db")
    made = as_json(capsys, "init", "--db", db)
    with Governance.open(db) as gov:
        session = gov.session(made["token"])
        agent = session.call("playground/create_loan_application_review_agent")["agent"]
        terminated = _register(session, agent["id"])
        session.call("agent_instances/terminate",
                     {"agent_instance_id": terminated, "reason": "runaway cost"})
        pending = _register(session, agent["id"])
    assert "terminated" in states(INSTANCE)
    for status in states(INSTANCE):
        rows = as_json(capsys, "runs", "list", "--db", db, "--status", status)
        expected = {"terminated": [terminated], "pending": [pending]}.get(status, [])
        assert [r["id"] for r in rows] == expected, status
    with pytest.raises(SystemExit) as exited:
        main(["runs", "list", "--db", db, "--status", "stopped"])
    assert exited.value.code == 2
    assert "invalid choice: 'stopped'" in capsys.readouterr().err
    documented = next(line for line in (ROOT / "docs" / "serving.md").read_text().splitlines()
                      if line.startswith("| `governance runs list"))
    assert all(f"`{status}`" in documented for status in states(INSTANCE))


def test_with_one_account_no_command_needs_account(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "one.db")
    Governance.open(db).close()
    status, _, err = run(capsys, "export", "--db", db)
    assert (status, err) == (
        1, "error: the store holds no account: create one with `governance init`\n")
    made = as_json(capsys, "init", "--db", db, "--account-name", "Acme")
    recorded = as_json(capsys, "demo", "--db", db)
    with Governance.open(db) as gov:
        run_record = gov.store.get("agent_instances", recorded["agent_instance_id"])
        assert run_record is not None and run_record["account_id"] == made["account_id"]
    listed = as_json(capsys, "runs", "list", "--db", db)
    assert [r["id"] for r in listed] == [recorded["agent_instance_id"]]
    status, out, err = run(capsys, "export", "--db", db)
    records = [json.loads(line) for line in out.splitlines()]
    assert (status, err) == (0, "")
    assert records[0] == {**records[0], "type": "account", "id": made["account_id"]}
    assert [r["id"] for r in records if r["type"] == "agent_instance"] == [
        recorded["agent_instance_id"]]


def test_with_several_accounts_one_rule_for_account(
    store: Store, capsys: pytest.CaptureFixture[str]
) -> None:
    first, second = store.first["account_id"], store.second["account_id"]
    choices = f"\n  {first}  Acme\n  {second}  Globex"
    # A listing covers every account.
    assert {r["account_id"] for r in as_json(capsys, "runs", "list", "--db", store.db)} == {
        first, second}
    # A command working in one account names it, or is refused with the accounts to choose.
    for command, ask in (
        ("demo", "to record into with --account ID"),
        ("export", "to export with --account ID (or a run with --run ID)"),
    ):
        status, out, err = run(capsys, command, "--db", store.db)
        assert (status, out) == (1, ""), command
        assert err == f"error: the store holds 2 accounts; name the one {ask}:{choices}\n"
    with Governance.open(store.db) as gov:
        assert gov.store.count("agent_instances") == 3
    recorded = as_json(capsys, "demo", "--db", store.db, "--account", second)
    in_second = as_json(capsys, "runs", "list", "--db", store.db, "--account", second)
    assert recorded["agent_instance_id"] in {r["id"] for r in in_second}
    assert len(as_json(capsys, "runs", "list", "--db", store.db, "--account", first)) == 2
    status, out, _ = run(capsys, "export", "--db", store.db, "--account", second)
    exported = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and {r["account_id"] for r in exported[1:]} == {second}
    assert exported[0]["id"] == second


def test_runs_show_prints_the_span_tree(store: Store, capsys: pytest.CaptureFixture[str]) -> None:
    run_id = as_json(capsys, "runs", "list", "--db", store.db)[1]["id"]
    shown = as_json(capsys, "runs", "show", "--db", store.db, run_id)
    assert shown["run"]["id"] == run_id and len(shown["spans"]) == 10
    letter = next(s for s in shown["spans"] if s["schema_name"] == "decision_letter")
    parent = next(s for s in shown["spans"] if s["id"] == letter["parent_span_id"])
    assert parent["schema_name"] == "llm" and parent["cost"] == pytest.approx(0.00066)
    assert (letter["risk_level"], letter["risk_score"], letter["duration_ms"]) == (
        "medium", 90, 600.0)
    status, out, _ = run(capsys, "runs", "show", "--db", store.db, run_id)
    lines = out.splitlines()
    assert status == 0
    assert lines[0].startswith(f"run {run_id}  complete  risk high (293, critical at 500)  "
                               "cost $0.04189  8 spans (0 failed)  1 raised alerts")
    credit = next(line for line in lines if "Credit bureau check" in line)
    assert credit.startswith("├── ") and "risk high (104)" in credit and "1800 ms" in credit
    nested = lines.index(next(line for line in lines if "Decision letter" in line))
    assert lines[nested].startswith("│   └── Decision letter  complete  600 ms")
    assert "cost $0.00066" in lines[nested - 1]
    assert lines[-1].startswith("└── Decision quality [quality]")
    status, _, err = run(capsys, "runs", "show", "--db", store.db, "0" * 32)
    assert (status, err.strip()) == (1, f"error: no run {'0' * 32} in this store")


def test_export_writes_json_lines(
    store: Store, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status, out, _ = run(capsys, "export", "--db", store.db, "--run", store.failed_run)
    records = [json.loads(line) for line in out.splitlines()]
    assert status == 0 and [r["type"] for r in records] == ["agent_instance", "agent_span"]
    assert records[0]["id"] == store.failed_run

    target = tmp_path / "acme.jsonl"
    status, out, err = run(capsys, "export", "--db", store.db, "--account",
                           store.first["account_id"], "-o", str(target))
    lines = target.read_text().splitlines()
    assert (status, out, err.strip()) == (0, "", f"wrote {len(lines)} records to {target}")
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds[0] == "account" and kinds.count("agent_instance") == 2
    assert kinds.count("agent_span") == 20 and kinds.count("alert") == 2
    assert kinds.count("environment") == 1 and kinds.count("agent") == 2


def test_reads_refuse_a_missing_store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    typo = tmp_path / "typo.db"
    for argv in (["runs", "list"], ["accounts", "list"], ["tokens", "list"],
                 ["export", "--run", "x"], ["accounts", "create"]):
        status, out, err = run(capsys, *argv, "--db", str(typo))
        assert (status, out) == (1, ""), argv
        assert err.startswith(f"error: no store at {typo}: create one with `governance init")
    assert not typo.exists()


def test_db_defaults_to_the_environment_then_the_working_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    made = as_json(capsys, "init")
    assert (tmp_path / "governance.db").exists()
    monkeypatch.setenv("GOVERNANCE_DB", str(tmp_path / "other.db"))
    assert run(capsys, "accounts", "list")[0] == 1
    assert as_json(capsys, "accounts", "list", "--db", "governance.db")[0]["id"] == (
        made["account_id"])
    with pytest.raises(SystemExit):
        main(["runs", "list", "--help"])
    assert "other.db)" in capsys.readouterr().out.replace("\n", "").replace(" ", "")


def test_usage_version_and_help_show_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, err = run(capsys)
    assert (status, err) == (0, "") and out.startswith("usage: governance")
    for command in ("init", "serve", "demo", "accounts", "tokens", "runs", "export"):
        assert f"    {command}" in out
    status, _, err = run(capsys, "runs")
    assert status == 2 and "list" in err and "show" in err
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0 and capsys.readouterr().out.startswith("governance ")
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    help_text = " ".join(capsys.readouterr().out.split())
    for shown in ("(default: 127.0.0.1)", "(default: 8000)", "(default: governance.db)",
                  "(default: info)", "--access-log, --no-access-log"):
        assert shown in help_text


def _command(*argv: str, **options: Any) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "governance_http.cli", *argv],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, **options,
    )


def test_no_traceback_when_the_reader_goes_away(store: Store) -> None:
    for argv in (["runs", "list"], ["export", "--run", store.failed_run]):
        process = _command(*argv, "--db", store.db, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE)
        assert process.stdout is not None and process.stderr is not None
        process.stdout.close()
        err = process.stderr.read().decode()
        assert process.wait(timeout=30) == 1
        assert err == "", err


def test_progress_shows_on_a_terminal_only(store: Store, tmp_path: Path) -> None:
    argv = ("export", "--db", store.db, "--account", store.first["account_id"], "-o",
            str(tmp_path / "out.jsonl"))
    piped = _command(*argv, stderr=subprocess.PIPE)
    assert piped.stderr is not None
    assert piped.stderr.read().decode().strip().startswith("wrote ")
    assert piped.wait(timeout=30) == 0
    leader, follower = pty.openpty()
    on_terminal = _command(*argv, stderr=follower)
    os.close(follower)
    assert on_terminal.wait(timeout=30) == 0
    shown = b""
    while True:
        try:
            chunk = os.read(leader, 4096)
        except OSError:
            break
        if not chunk:
            break
        shown += chunk
    os.close(leader)
    assert b"exporting runs" in shown
