"""The notification operations over HTTP: routes, the secret shown once, the reference, bulk."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import falcon.testing
import jsonschema
import pytest

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.http.support import Api, component


@pytest.fixture
def hgov() -> Iterator[Governance]:
    governance = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(13))
    yield governance
    governance.close()


@pytest.fixture
def hboot(hgov: Governance) -> Bootstrap:
    return hgov.bootstrap()


@pytest.fixture
def api(hgov: Governance, hboot: Bootstrap) -> Api:
    return Api(falcon.testing.TestClient(create_app(hgov)), hboot.token)


def valid(api: Api, schema_name: str, value: dict[str, Any]) -> None:
    document = api.get("/openapi.json").json
    jsonschema.validate(value, component(document, schema_name))


def test_a_destination_is_made_shown_and_rotated_over_http(api: Api) -> None:
    made = api.ok("POST", "/destination", json={
        "name": "ops", "url": "https://hooks.example.com/ops", "body_format": "slack",
        "event_types": ["alert.raised"],
    })
    assert made["secret"].startswith("whsec_")
    valid(api, "Destination", made["details"])
    shown = api.ok("GET", f"/destination/{made['details']['id']}")
    assert "secret" not in shown and "secrets" not in shown["details"]
    rotated = api.ok("POST", f"/destination/{made['details']['id']}/rotate_secret",
                     json={"grace_seconds": 60})
    assert rotated["secret"] != made["secret"] and rotated["details"]["version"] == 2
    listed = api.ok("GET", "/destination")
    assert [row["id"] for row in listed["summaries"]] == [made["details"]["id"]]


def test_an_internal_url_is_refused_with_the_field_named(api: Api) -> None:
    result = api.post("/destination", json={"name": "x", "url": "http://127.0.0.1:8000/"})
    assert result.status_code == 422, result.text
    assert result.json["code"] == "validation_errors"
    assert "not public" in result.json["errors"]["url"]["message"]


def test_monitors_deliveries_and_events_answer_over_http(api: Api) -> None:
    api.ok("POST", "/destination", json={"name": "ops", "url": "https://hooks.example.com/"})
    monitor = api.ok("POST", "/monitor", json={
        "name": "quiet", "metric": "run_count", "comparison": "lt", "window_seconds": 3600,
        "warning": 1,
    })["details"]
    valid(api, "Monitor", monitor)
    evaluated = api.ok("POST", "/monitor/evaluate", json={})["evaluated"]
    assert evaluated[0]["level"] == "warning"
    [event] = api.ok("GET", "/notification_event")["summaries"]
    valid(api, "NotificationEvent", event)
    assert api.ok("GET", f"/notification_event/{event['id']}")["details"] == event
    [delivery] = api.ok("GET", "/delivery", params={"status": "pending"})["summaries"]
    valid(api, "Delivery", delivery)
    shown = api.ok("GET", f"/delivery/{delivery['id']}")["details"]
    assert shown["attempts"] == []
    result = api.post(f"/delivery/{delivery['id']}/resend")
    assert result.status_code != 200 and result.json["code"] == "invalid_action"
    assert api.get("/delivery/" + "0" * 32).json["code"] == "not_found"


def test_bulk_runs_the_same_operations(api: Api) -> None:
    result = api.ok("POST", "/bulk", json={"items": [
        {"_type": "monitors/create", "idempotency_key": "monitor-0001", "name": "m",
         "metric": "error_rate", "window_seconds": 600, "warning": 0.05, "critical": 0.2},
        {"_type": "destinations/list", "idempotency_key": "destinations-1"},
    ]})
    outputs = result["outputs"]
    assert outputs["monitor-0001"]["details"]["metric"] == "error_rate"
    assert outputs["destinations-1"]["summaries"] == []


def test_an_ingestion_token_cannot_manage_notifications(
    api: Api, hgov: Governance, hboot: Bootstrap
) -> None:
    agent = api.ok("POST", "/agent", json={"name": "a"})["details"]
    token = api.ok("POST", "/api/v1/api_token", json={
        "token_scope": "agent_deployment", "agent_id": agent["id"],
        "environment_id": hboot.environment_id,
    })["token"]
    result = api.get("/destination", token=token)
    assert result.json["code"] == "not_permitted"
