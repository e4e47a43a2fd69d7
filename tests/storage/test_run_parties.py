"""A run's session and user on every store: set by span payloads, hidden from the run's view,
filtered on and grouped by; and the version 5 files and databases that gain them on open.

With ``$GOVERNANCE_TEST_POSTGRES_URL`` every test here runs on PostgreSQL too.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from governance_core.clock import FixedClock, parse_timestamp
from governance_core.context import Config
from governance_core.domain.insights import RunFilter, list_runs, run_parties, run_sessions
from governance_core.domain.runs import keep_run_parties
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import Filter, SQLiteStore
from governance_core.storage.schema import SCHEMA_VERSION, TABLES
from tests.storage.parties_world import NOW, PartiesWorld, api_runs, build, expected_sessions
from tests.stores import make_store, scratch_schema

KINDS = ("memory", "sqlite", "postgres")
NEW_INDEXES = (("account_id", "session_id", "started_at"), ("account_id", "user_id", "started_at"))


@pytest.fixture(params=KINDS)
def gov(request: pytest.FixtureRequest) -> Iterator[Governance]:
    governance = Governance(make_store(request.param), clock=FixedClock(NOW),
                            config=Config(cipher=PlaintextForTests()))
    yield governance
    governance.close()


@pytest.fixture
def world(gov: Governance) -> PartiesWorld:
    return build(gov)


def test_span_payloads_give_the_run_its_first_session_and_user(
    gov: Governance, world: PartiesWorld
) -> None:
    for run in world.runs:
        stored = gov.store.get("agent_instances", run.run_id)
        assert stored is not None
        assert (stored.get("session_id"), stored.get("user_id")) == (run.session_id, run.user_id)


def test_the_runs_view_does_not_show_them(gov: Governance, world: PartiesWorld) -> None:
    named = next(run for run in world.runs if run.session_id and run.user_id)
    shown = world.session.details("agent_instances/show", {"agent_instance_id": named.run_id})
    listed = api_runs(world.session)
    for view in (shown, *listed):
        assert not {"session_id", "user_id"} & set(view)
    assert set(shown) == set(listed[0])


def test_values_that_are_no_ids_are_ignored_and_one_set_is_kept(gov: Governance) -> None:
    session = gov.session(gov.bootstrap().token)
    agent = session.details("agents/create", {"name": "plain"})["id"]
    run = session.details("agent_instances/register", {
        "agent_id": agent, "agent_version": {"external_identifier": "1"}})["id"]
    for payload in ({"session_id": "s" * 201, "user_id": 7}, {"session_id": "  "},
                    {"conversation_id": ["a"], "user_id": {"id": "u"}}):
        session.call("agent_spans/create", {"agent_instance_id": run, "schema_name": "x",
                                            "status": "complete", "payload": payload})
    stored = gov.store.get("agent_instances", run)
    assert stored is not None and stored.get("session_id") is None and stored.get("user_id") is None
    session.call("agent_spans/create", {"agent_instance_id": run, "schema_name": "x",
                                        "status": "complete",
                                        "payload": {"session_id": "s" * 200, "user_id": "u-1"}})
    ctx = gov.context(session.principal)
    stored = gov.store.get("agent_instances", run)
    assert stored is not None
    # Already set: kept, and not written again.
    assert keep_run_parties(ctx, stored, "other", "other") is stored
    assert run_parties(ctx, run) == {"session_id": "s" * 200, "user_id": "u-1"}
    outsider = gov.context(gov.session(gov.bootstrap().token).principal)
    assert run_parties(outsider, run) == {"session_id": None, "user_id": None}


@pytest.mark.parametrize("field", ["session_id", "user_id"])
def test_the_runs_filter_keeps_exactly_that_sessions_or_users_runs(
    gov: Governance, world: PartiesWorld, field: str
) -> None:
    ctx = gov.context(world.session.principal)
    api = {run["id"]: run for run in api_runs(world.session)}
    values = {getattr(run, field) for run in world.runs} - {None}
    assert len(values) >= 4
    for value in [*sorted(values), "nobody"]:
        wanted = [run.run_id for run in world.runs if getattr(run, field) == value]
        wanted.sort(key=lambda run_id: (api[run_id]["started_at"] or ""), reverse=True)
        chosen = RunFilter(**{field: value})
        pages = [list_runs(ctx, chosen, offset=offset, limit=3) for offset in range(0, 30, 3)]
        assert all(total == len(wanted) for _, total in pages)
        assert [row["id"] for rows, _ in pages for row in rows] == wanted
    # With another filter: a session's failed runs.
    failed = list_runs(ctx, RunFilter(session_id="chat-a", status="failed"), limit=100)[0]
    assert {row["id"] for row in failed} == {
        run.run_id for run in world.runs
        if run.session_id == "chat-a" and api[run.run_id]["status"] == "failed"}
    # Another account's runs of the same session are not the caller's.
    other = gov.context(world.other.principal)
    mine = {run.run_id for run in world.runs}
    theirs, _ = list_runs(other, RunFilter(session_id="chat-a"), limit=100)
    assert theirs and not {row["id"] for row in theirs} & mine


@pytest.mark.parametrize("days", [1, 7, 30])
def test_the_sessions_figures_are_those_of_their_runs(
    gov: Governance, world: PartiesWorld, days: int
) -> None:
    since = NOW - timedelta(days=days)
    expected = expected_sessions(world, since)
    assert expected
    found = run_sessions(gov.context(world.session.principal), since)
    assert {summary.session_id for summary in found} == set(expected)
    for summary in found:
        entry = expected[summary.session_id]
        assert (summary.runs, summary.failed) == (entry["runs"], entry["failed"])
        assert summary.first_day == min(entry["starts"]).date().isoformat()
        assert summary.last_day == max(entry["starts"]).date().isoformat()
        assert set(summary.user_ids) == entry["users"]
        if entry["cost"] is None:
            assert summary.total_cost is None
        else:
            assert summary.total_cost is not None
            assert abs(summary.total_cost - entry["cost"]) <= Decimal("1e-12")
    # Newest activity first: by the day of the latest start, then more runs first.
    order = [(summary.last_day, summary.runs) for summary in found]
    assert order == sorted(order, reverse=True)


def test_sessions_keep_to_the_account_and_an_ingestion_tokens_reach(
    gov: Governance, world: PartiesWorld
) -> None:
    since = NOW - timedelta(days=30)
    mine = run_sessions(gov.context(world.session.principal), since)
    theirs = run_sessions(gov.context(world.other.principal), since)
    assert sum(s.runs for s in mine) == sum(e["runs"] for e in expected_sessions(
        world, since).values())
    assert theirs and sum(s.runs for s in theirs) < sum(s.runs for s in mine)
    agent = world.agent_ids[0]
    environment = world.session.call("environments/list")["summaries"][0]["id"]
    token = world.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": agent, "environment_id": environment,
    })["token"]
    ingest = gov.context(gov.authenticate(token))
    agent_runs = {run["id"] for run in api_runs(world.session) if run["agent_id"] == agent}
    reached = sum(s.runs for s in run_sessions(ingest, since))
    assert reached == sum(
        1 for run in api_runs(world.session)
        if run["id"] in agent_runs and run["started_at"] is not None
        and parse_timestamp(run["started_at"]) >= since
        and next(r for r in world.runs if r.run_id == run["id"]).session_id is not None)


# -- version 5 files and databases -------------------------------------------------------------
RECORD: dict[str, Any] = {
    "id": "run-1", "account_id": "acct", "inserted_at": "2026-03-01T00:00:00.000000Z",
    "status": "complete", "started_at": "2026-03-01T00:00:00.000000Z",
}


def test_a_version_5_file_gains_the_columns_and_indexes(tmp_path: Path) -> None:
    path = tmp_path / "v5.db"
    SQLiteStore(path).close()
    raw = sqlite3.connect(path, isolation_level=None)
    for fields in NEW_INDEXES:
        raw.execute(f"DROP INDEX [idx_agent_instances_{'_'.join(fields)}]")
    raw.execute("ALTER TABLE agent_instances DROP COLUMN session_id")
    raw.execute("ALTER TABLE agent_instances DROP COLUMN user_id")
    raw.execute("UPDATE _meta SET value = '5'")
    extras: tuple[dict[str, Any], ...] = ({}, {"session_id": "chat-1", "user_id": "ann"},
                                          {"session_id": 5})
    for number, extra in enumerate(extras):
        record = {**RECORD, "id": f"run-{number}", **extra}
        raw.execute("INSERT INTO agent_instances (id, data, account_id, status, started_at)"
                    " VALUES (?, ?, ?, ?, ?)", (record["id"], json.dumps(record), "acct",
                                                "complete", record["started_at"]))
    raw.close()

    store = SQLiteStore(path)
    try:
        assert [r["id"] for r in store.query(
            "agent_instances", [Filter("session_id", "eq", "chat-1")])] == ["run-1"]
        assert store.count("agent_instances", [Filter("user_id", "eq", None)]) == 2
    finally:
        store.close()
    raw = sqlite3.connect(path, isolation_level=None)
    assert raw.execute("SELECT value FROM _meta").fetchone() == (str(SCHEMA_VERSION),) == ("10",)
    columns = {row[1] for row in raw.execute("PRAGMA table_info(agent_instances)")}
    assert {"session_id", "user_id"} <= columns
    indexed = {
        tuple(row[2] for row in raw.execute(f"PRAGMA index_info([{index[1]}])"))
        for index in raw.execute("PRAGMA index_list(agent_instances)")
    }
    assert set(NEW_INDEXES) <= indexed
    assert set(TABLES["agent_instances"].wanted_indexes()) == indexed - {("id",)}
    plan = " ".join(str(row) for row in raw.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM agent_instances WHERE account_id = 'acct'"
        " AND session_id = 'chat-1' ORDER BY started_at DESC"))
    assert "idx_agent_instances_account_id_session_id_started_at" in plan, plan
    raw.close()


def test_a_version_5_postgres_database_gains_the_columns_and_indexes() -> None:
    from tests.stores import server_url

    server_url()
    import psycopg

    from governance_core.storage.postgres import PostgresStore

    with scratch_schema("parties") as url:
        PostgresStore(url).close()
        with psycopg.connect(url, autocommit=True) as raw:
            for fields in NEW_INDEXES:
                raw.execute(f'DROP INDEX "agent_instances__{"__".join(fields)}"'.encode())
            raw.execute("ALTER TABLE agent_instances DROP COLUMN session_id, DROP COLUMN user_id")
            raw.execute("UPDATE _meta SET value = '5'")
            extras: tuple[dict[str, Any], ...] = (
                {}, {"session_id": "chat-1", "user_id": "ann"}, {"session_id": 5})
            for number, extra in enumerate(extras):
                record = {**RECORD, "id": f"run-{number}", **extra}
                raw.execute(
                    "INSERT INTO agent_instances (id, data, account_id, status, started_at)"
                    " VALUES (%s, %s, %s, %s, %s)",
                    (record["id"], json.dumps(record), "acct", "complete", record["started_at"]),
                )
        store = PostgresStore(url)
        try:
            assert [r["id"] for r in store.query(
                "agent_instances", [Filter("session_id", "eq", "chat-1")])] == ["run-1"]
            assert store.count("agent_instances", [Filter("user_id", "eq", None)]) == 2
        finally:
            store.close()
        with psycopg.connect(url, autocommit=True) as raw:
            assert raw.execute("SELECT value FROM _meta").fetchone() == (str(SCHEMA_VERSION),)
            names = {name for (name,) in raw.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'agent_instances'"
                " AND schemaname = current_schema()")}
            assert {f"agent_instances__{'__'.join(fields)}" for fields in NEW_INDEXES} <= names
