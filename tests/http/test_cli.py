"""The ``governance`` command: init, token create, and serve in a real subprocess."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from governance_core.service import Governance
from tests.http.server import Served
from tests.http.support import run

BOOTSTRAP_KEYS = {"account_id", "admin_user_id", "environment_id", "risk_profile_id", "token"}


def test_init_json_prints_one_object_and_accounts_create_adds_accounts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.db")
    status, out, _ = run(capsys, "init", "--db", db, "--json")
    assert status == 0
    first = json.loads(out)
    assert set(first) == BOOTSTRAP_KEYS | {"encryption_key_file"}
    assert first["encryption_key_file"] == f"{db}.key"
    status, out, err = run(capsys, "init", "--db", db, "--json", "--account-name", "Second")
    assert (status, out) == (1, "")
    assert err.strip() == (f"error: {db} already holds 1 account(s); add another with "
                           f"`governance accounts create --db {db}`")
    status, out, _ = run(
        capsys, "accounts", "create", "--db", db, "--json", "--account-name", "Second"
    )
    assert status == 0
    second = json.loads(out)
    assert set(second) == BOOTSTRAP_KEYS
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


def test_token_create_issues_ingestion_tokens(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.db")
    made = json.loads(run(capsys, "init", "--db", db, "--json")[1])
    with Governance.open(db) as gov:
        agent = gov.session(made["token"]).details("agents/create", {"name": "Bot"})
    status, out, _ = run(
        capsys, "token", "create", "--db", db, "--account", made["account_id"], "--json",
        "--scope", "agent_deployment", "--agent-id", agent["id"],
        "--environment-id", made["environment_id"],
    )
    assert status == 0
    token = json.loads(out)
    with Governance.open(db) as gov:
        principal = gov.authenticate(token["token"])
    assert (principal.scope, principal.agent_id) == ("agent_deployment", agent["id"])
    assert principal.environment_id == made["environment_id"]


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


def test_demo_records_the_playground_run_and_prints_risk_and_cost(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "demo.db")
    status, out, err = run(capsys, "demo", "--db", db)
    assert (status, out) == (1, "")
    assert err.strip() == (f"error: no store at {db}: create one with `governance init --db "
                           f"{db}` (or pass --create)")
    assert not Path(db).exists()
    status, out, _ = run(capsys, "demo", "--db", db, "--create")
    assert status == 0
    assert "bootstrapped" in out and "risk:" in out and "cost:" in out
    status, out, _ = run(capsys, "demo", "--db", db, "--json")
    shown = json.loads(out)
    assert shown["risk_score"]["risk_level"] in ("low", "medium", "high", "critical")
    assert shown["cost_breakdown"]["total_cost"] > 0
    with Governance.open(db) as gov:
        assert gov.store.count("accounts") == 1
        assert gov.store.count("agent_instances") == 2
        stored = gov.store.get("agent_instances", shown["agent_instance_id"])
        assert stored is not None and stored["status"] == "complete"
    status, _, err = run(capsys, "demo", "--db", db, "--account", "0" * 32)
    assert (status, err.strip()) == (1, "error: not_found: account not found")


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
    assert served.process.returncode == 0, served.output_so_far()

    again = Served(tmp_path / "served.db")
    try:
        lines = again.output_until("serving http://")
        assert not any("pf_" in line for line in lines)
        assert any("governance tokens create --account" in line for line in lines)
        again.wait_ready()
        assert again.request("/team", token)[0] == 200
    finally:
        again.stop()


def test_a_store_url_is_printed_without_its_password() -> None:
    from governance_http.settings import shown_location

    assert shown_location("postgresql://ops:s3cret@db.internal:5432/gov") == (
        "postgresql://ops:***@db.internal:5432/gov"
    )
    assert shown_location("postgresql://ops@db.internal/gov") == "postgresql://ops@db.internal/gov"
    assert shown_location("./governance.db") == "./governance.db"
