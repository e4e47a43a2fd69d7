"""The routes of decisions section 16, over HTTP."""

from __future__ import annotations

import falcon.testing
import pytest

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.http.support import Api
from tests.policies.support import CONFIG, RunWorld, run_world

REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)


@pytest.fixture
def http_world() -> RunWorld:
    gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(13), config=CONFIG)
    return run_world(gov, gov.bootstrap())


@pytest.fixture
def api(http_world: RunWorld) -> Api:
    return Api(falcon.testing.TestClient(create_app(http_world.gov)), http_world.boot.token)


def test_policies_are_created_updated_validated_and_refused(api: Api) -> None:
    refused = api.post("/policy", json={"name": "x", "source": "forbid (principal,\n action"})
    assert refused.status_code == 422
    assert refused.json["errors"]["source"]["message"] == "line 2: unexpected end of input"
    created = api.ok("POST", "/policy", json={"name": "Refunds", "source": REFUNDS})["details"]
    assert (created["type"], created["version"], created["mode"]) == ("policy", 1, "enforce")
    updated = api.ok("POST", f"/policy/{created['id']}", json={"mode": "observe"})["details"]
    assert (updated["version"], updated["mode"]) == (2, "observe")
    assert api.ok("GET", f"/policy/{created['id']}")["details"] == updated
    assert api.ok("GET", "/policy", query="mode=observe")["pagination"]["item_count"] == 1
    checked = api.ok("POST", "/policy/validate", json={"source": REFUNDS})
    assert checked["valid"] is True
    assert api.ok("GET", "/policy")["pagination"]["item_count"] == 1


def test_deciding_and_approving_over_http(api: Api, http_world: RunWorld) -> None:
    run = http_world.run()
    api.ok("POST", "/policy", json={"name": "Refunds", "source": REFUNDS})
    body = {"agent_instance_id": run,
            "action": {"kind": "tool_call", "name": "refund", "args": {"amount": 150}}}
    held = api.ok("POST", "/decision", json=body)["details"]
    assert held["outcome"] == "pending_approval"
    approval_id = held["approval_id"]
    assert api.ok("GET", "/approval", query="status=pending")["summaries"][0]["id"] == approval_id
    api.ok("POST", f"/approval/{approval_id}/approve", json={"reason": "fine"})
    twice = api.post(f"/approval/{approval_id}/approve", json={})
    assert twice.status_code == 409 and twice.json["code"] == "conflict"
    shown = api.ok("GET", f"/decision/{held['id']}")["details"]
    assert shown["approval"]["status"] == "approved"
    assert api.ok("POST", "/decision", json=body)["details"]["outcome"] == "allow"
    listed = api.ok("GET", "/decision", query=f"agent_instance_id={run}")
    assert [d["outcome"] for d in listed["summaries"]] == ["pending_approval", "allow"]


def test_a_bulk_decide_answers_as_the_endpoint(api: Api, http_world: RunWorld) -> None:
    run = http_world.run()
    body = {"agent_instance_id": run, "action": {"kind": "model_call", "name": "m"}}
    bulk = api.ok("POST", "/bulk", json={"items": [
        {"_type": "decisions/decide", "idempotency_key": "decide-item-1", **body},
    ]})
    output = bulk["outputs"]["decide-item-1"]
    assert output["status"] == "success" and output["details"]["outcome"] == "allow"
    replay = api.ok("POST", "/decision", json={**body, "idempotency_key": "decide-http-1"})
    again = api.ok("POST", "/decision", json={**body, "idempotency_key": "decide-http-1"})
    assert replay == again


def test_ingestion_tokens_may_decide_but_not_write_policies(
    api: Api, http_world: RunWorld
) -> None:
    run = http_world.run()
    issued = http_world.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": http_world.agent_id,
        "environment_id": http_world.boot.environment_id,
    })
    ingestion = Api(api.client, issued["token"])
    decided = ingestion.ok("POST", "/decision", json={
        "agent_instance_id": run, "action": {"kind": "span", "name": "llm"},
    })
    assert decided["details"]["outcome"] == "allow"
    refused = ingestion.post("/policy", json={"name": "x", "source": REFUNDS})
    assert refused.status_code == 403 and refused.json["code"] == "not_permitted"


def test_a_decision_keeps_its_interception_record_over_http(
    api: Api, http_world: RunWorld
) -> None:
    from tests.policies.test_interceptions import record

    run = http_world.run()
    decision = api.ok("POST", "/decision", json={
        "agent_instance_id": run, "action": {"kind": "tool_call", "name": "search"},
    })["details"]
    path = f"/decision/{decision['id']}/record_interception"
    kept = api.ok("POST", path, json={"record": record()})["details"]
    assert kept["interception"] == record()
    assert api.ok("GET", f"/decision/{decision['id']}")["details"]["interception"] == record()
    other = api.post(path, json={"record": record(sequence=9)})
    assert other.status_code == 409 and other.json["code"] == "conflict"
    bad = api.post(path, json={"record": {"mode": "enforce"}})
    assert bad.status_code == 422 and "record" in bad.json["errors"]
