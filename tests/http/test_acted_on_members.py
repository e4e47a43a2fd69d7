"""A body member naming the resource an operation acts on is answered like a path id.

Unknown, malformed, another kind's or another account's: 404 ``not_found``, for the instance
of ``POST /alerts/clear`` (bare or as ``agent_instance_id``), the agent of the playground
register (bare or as ``agent_id``) and the instance of the playground recording. The
recording answers the ids of the spans it made, each of which fetches as a span, and apart
from them the alert's.
"""

from __future__ import annotations

import json

import falcon.testing

from governance_core.service import Bootstrap, Governance
from tests.http.support import Api
from tests.http.world import build_world

REGISTER = "/playground/register_loan_application_review_agent_instance"
RECORD = "/playground/record_loan_application_review_spans"


def unknown_ids(gov: Governance, boot: Bootstrap, other: Bootstrap) -> list[str]:
    theirs = build_world(gov, other)
    mine = build_world(gov, boot)
    return [
        "nope", "0" * 32, mine.ids["environment_id"], theirs.ids["agent_id"],
        theirs.ids["agent_instance_id"],
    ]


def test_acted_on_body_members_are_404(
    gov: Governance, boot: Bootstrap, other: Bootstrap, client: falcon.testing.TestClient
) -> None:
    api = Api(client, boot.token)
    for unknown in unknown_ids(gov, boot, other):
        for path, body in [
            ("/alerts/clear", json.dumps(unknown)),
            ("/alerts/clear", json.dumps({"agent_instance_id": unknown, "name": "slow"})),
            (REGISTER, json.dumps(unknown)),
            (REGISTER, json.dumps({"agent_id": unknown})),
            (RECORD, json.dumps({"agent_instance_id": unknown})),
        ]:
            result = api.post(path, body=body)
            assert result.status_code == 404, (path, body, result.text)
            assert result.json["code"] == "not_found"


def test_the_recording_answers_a_list_of_the_ids_it_made(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    api = Api(client, boot.token)
    agent = api.ok("POST", "/playground/create_loan_application_review_agent")["agent"]
    run = api.ok("POST", REGISTER, body=json.dumps(agent["id"]))["details"]
    recorded = api.ok("POST", RECORD, json={"agent_instance_id": run["id"]})
    assert set(recorded) == {"status", "ids", "alert_ids"}
    ids = recorded["ids"]
    assert isinstance(ids, list) and len(ids) == len(set(ids)) == 8
    spans = api.ok(
        "GET", "/agent_spans", query=f"agent_instance_id={run['id']}&purpose=activity"
    )["summaries"]
    assert ids == [row["id"] for row in spans]
    for span_id in ids:
        assert api.ok("GET", f"/agent_spans/{span_id}")["details"]["type"] == "agent_span"
    alerts = api.ok("GET", "/alerts", query=f"agent_instance_id={run['id']}")["summaries"]
    assert recorded["alert_ids"] == [row["id"] for row in alerts]
    for alert_id in recorded["alert_ids"]:
        assert api.ok("GET", f"/alerts/{alert_id}")["details"]["name"] == "affordability_concern"
