"""Property: any JSON a client can send is stored and read back equal, or refused with a 4xx
naming the field; never a 500.

Drawn values go through the HTTP app into a SQLite store (the adapter with typed columns,
64-bit integers and UTF-8 text) as span payloads and results, alert and quality payloads,
schema names and agent text members: every kind of member that reaches storage as sent.
"""

from __future__ import annotations

import json
from typing import Any

import falcon.testing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.service import Governance
from governance_core.storage import SQLiteStore
from governance_http import create_app
from tests.http.support import Api
from tests.http.world import World, build_world

# Text as clients can send it: any code point, lone surrogates included (JSON escapes allow
# them), plus integers and floats of every size JSON can write.
# Surrogates come only from ``surrogate``, alone: two drawn side by side would form a pair,
# which JSON's escapes carry as the one character it encodes.
plain = st.text(st.characters(codec=None, min_codepoint=0, exclude_categories=["Cs"]),
                max_size=12)
surrogate = st.characters(categories=["Cs"])
text = plain | st.tuples(plain, surrogate, plain).map("".join)
numbers = st.integers() | st.floats(allow_nan=False, allow_infinity=False)
json_values = st.recursive(
    st.none() | st.booleans() | numbers | text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4),
    max_leaves=16,
)
objects = st.dictionaries(text, json_values, max_size=5)
SETTINGS = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def target() -> tuple[Api, World]:
    gov = Governance(SQLiteStore(":memory:"), clock=FixedClock(), ids=SeededIds(9))
    world = build_world(gov, gov.bootstrap())
    return Api(falcon.testing.TestClient(create_app(gov)), world.token), world


def send(api: Api, method: str, path: str, body: Any) -> falcon.testing.Result:
    # Sent as JSON text with ASCII escapes, so lone surrogates travel as the clients send them.
    result = api.request(method, path, body=json.dumps(body))
    assert result.status_code < 500, result.text
    answer = result.json
    assert isinstance(answer, dict)
    if result.status_code != 200:
        assert 400 <= result.status_code < 500
        assert answer["status"] == "error"
        if result.status_code == 422:
            assert answer["code"] in ("validation_errors", "invalid_value", "required_value")
            if answer["code"] == "validation_errors":
                assert answer["errors"], answer
    return result


def refused_naming(result: falcon.testing.Result, *names: str) -> bool:
    """A 4xx whose field errors name one of ``names`` at the top level."""
    answer = result.json
    return result.status_code == 422 and bool(set(answer.get("errors", {})) & set(names))


@SETTINGS
@given(payload=objects, result_payload=objects | st.none())
def test_span_payloads_round_trip(
    target: tuple[Api, World], payload: dict[str, Any], result_payload: dict[str, Any] | None
) -> None:
    api, world = target
    result = send(api, "POST", "/agent_spans", {
        "agent_instance_id": world.ids["agent_instance_id"], "schema_name": "langchain:tool",
        "status": "complete", "payload": payload, "result_payload": result_payload,
    })
    if result.status_code != 200:
        assert refused_naming(result, "payload", "result_payload"), result.text
        return
    span_id = result.json["details"]["id"]
    shown = api.ok("GET", f"/agent_spans/{span_id}")["details"]
    assert (shown["payload"], shown["result_payload"]) == (payload, result_payload)


@SETTINGS
@given(payload=objects, name=text)
def test_alert_and_quality_payloads_round_trip(
    target: tuple[Api, World], payload: dict[str, Any], name: str
) -> None:
    api, world = target
    run = world.ids["agent_instance_id"]
    raised = send(api, "POST", "/alerts/raise", {
        "agent_instance_id": run, "name": name, "severity": "info", "payload": payload,
    })
    if raised.status_code == 200:
        shown = api.ok("GET", f"/alerts/{raised.json['details']['id']}")["details"]
        assert shown["payload"] == payload and shown["name"] == name.strip()
    else:
        assert refused_naming(raised, "payload", "name"), raised.text
    recorded = send(api, "POST", f"/agent_instance/{run}/record_quality", {
        "name": name, "payload": payload,
    })
    if recorded.status_code == 200:
        shown = api.ok("GET", f"/agent_instance/{run}")["details"]
        assert shown["quality_payloads"][name.strip()] == payload
    else:
        assert refused_naming(recorded, "payload", "name"), recorded.text


@SETTINGS
@given(name=text, description=text | st.none(), external=text | st.none())
def test_agent_text_members_round_trip(
    target: tuple[Api, World], name: str, description: str | None, external: str | None
) -> None:
    api, _ = target
    result = send(api, "POST", "/agent", {"details": {
        "name": name, "description": description, "external_identifier": external,
    }})
    if result.status_code != 200:
        assert refused_naming(result, "details", "name", "description", "external_identifier") \
            or result.json["code"] == "conflict", result.text
        return
    shown = api.ok("GET", f"/agent/{result.json['details']['id']}")["details"]
    assert shown["name"] == name.strip()
    assert shown["description"] == ((description or "").strip() or None)
    assert shown["external_identifier"] == ((external or "").strip() or None)
