"""Back-testing over HTTP (the route the registry gives, the documented shape) and the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import falcon.testing
import jsonschema
import pytest

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.policies.detective import judge_recorded, keep_recorded
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from governance_http.routes import ROUTES
from tests.http.support import Api, as_json, run, success_schema
from tests.policies.recording import model_call, record
from tests.policies.support import CONFIG, RunWorld, run_world

EVERYTHING = "forbid (principal, action, resource);"


@pytest.fixture
def http_world() -> RunWorld:
    gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(17), config=CONFIG)
    return run_world(gov, gov.bootstrap())


def test_post_policy_test_answers_the_documented_report(http_world: RunWorld) -> None:
    run_id = http_world.run()
    model_call(http_world, run_id, 10)
    client = falcon.testing.TestClient(create_app(http_world.gov))
    api = Api(client, http_world.boot.token)
    body = api.ok("POST", "/policy/test", json={"source": EVERYTHING, "days": 1, "limit": 5})
    assert (body["spans"], body["stopped_runs"]["count"]) == (1, 1)
    document = client.simulate_get("/api/v1/openapi.json").json
    route = next(r for r in ROUTES if r.operation == "policies/test")
    assert (route.method, route.path) == ("POST", "/api/v1/policy/test")
    jsonschema.validate(body, success_schema(document, route))
    refused = api.post("/policy/test", json={"source": "forbid (", "days": 91})
    assert refused.status_code == 422
    assert set(refused.json["errors"]) == {"source", "days"}


def test_a_recorded_decision_is_shown_as_documented(http_world: RunWorld) -> None:
    world = http_world
    world.policy(EVERYTHING)
    run_id = world.run()
    before = world.gov.store.get("agent_instances", run_id)
    span = world.gov.store.get("agent_spans", record(world, run_id, "crm.read_order"))
    assert before is not None and span is not None
    ctx = world.gov.context(world.session.principal)
    with world.gov.store.transaction():
        judgement = judge_recorded(ctx, before, [span])
        after = world.gov.store.get("agent_instances", run_id)
        assert after is not None
        keep_recorded(ctx, after, judgement)
    client = falcon.testing.TestClient(create_app(world.gov))
    decision_id = judgement.decisions[0]["id"]
    shown = Api(client, world.boot.token).ok("GET", f"/decision/{decision_id}")
    assert shown["details"]["agent_span_id"] == span["id"]
    document = client.simulate_get("/api/v1/openapi.json").json
    route = next(r for r in ROUTES if r.operation == "decisions/show")
    jsonschema.validate(shown, success_schema(document, route))


def test_the_command_prints_counts_and_stopped_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "g.db")
    made = as_json(capsys, "init", "--db", db)
    with Governance.open(db) as gov:
        world = run_world(gov, gov.bootstrap(account_name="Second"))
        run_id = world.run()
        model_call(world, run_id, 10)
        model_call(world, run_id, 10)
        second_account = world.boot.account_id
    policy = tmp_path / "everything.cedar"
    policy.write_text(EVERYTHING)
    status, _, err = run(capsys, "policies", "test", str(policy), "--db", db)
    assert status == 1 and "name the one to test in with --account" in err
    report = as_json(capsys, "policies", "test", str(policy), "--db", db, "--account",
                     second_account, "--days", "3", "--mode", "observe")
    assert report["outcomes"] == {"allow": 2, "deny": 0, "pending_approval": 0}
    assert report["observed_outcomes"]["deny"] == 2
    assert report["window"]["agent_id"] is None and "status" not in report
    status, out, _ = run(capsys, "policies", "test", str(policy), "--db", db, "--account",
                         second_account)
    assert status == 0
    assert "outcomes: allow 0, deny 2, pending_approval 0" in out
    assert "stopped: 2 spans in 1 runs" in out and run_id in out
    status, out, _ = run(capsys, "policies", "test", str(policy), "--db", db, "--account",
                         made["account_id"])
    assert status == 0 and "no run would have been stopped" in out
    status, _, err = run(capsys, "policies", "test", str(tmp_path / "missing.cedar"),
                         "--db", db, "--account", second_account)
    assert status == 1 and "cannot read" in err
    policy.write_text("forbid (principal,")
    status, _, err = run(capsys, "policies", "test", str(policy), "--db", db, "--account",
                         second_account)
    assert status == 1 and "source: invalid_value: line 1:" in err
    with pytest.raises(SystemExit) as usage:
        run(capsys, "policies", "test", str(policy), "--db", db, "--days", "0")
    assert usage.value.code == 2 and "must be from 1 to 90" in capsys.readouterr().err
    assert json.loads(json.dumps(report)) == report
