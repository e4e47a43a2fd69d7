"""The published clients' order and retries (clients.md), replayed request by request.

Spans before the run's start, span finishes and quality after the run's finish, retries with
the same idempotency key, and a finish of a finished run: nothing is refused but that finish,
and nothing is lost.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from governance_core.errors import IdempotencyKeyAlreadyUsed, InvalidAction
from governance_core.service import Bootstrap, Governance
from tests.core.runs import account_caller, make_agent
from tests.core.span_world import ALERT_SCHEMAS, QUALITY_SCHEMAS, SPAN_TYPES


def key() -> str:
    return str(uuid.uuid4())


def test_the_clients_request_sequence(gov: Governance, boot: Bootstrap) -> None:
    admin = account_caller(gov, boot)
    agent = make_agent(admin)
    token = admin.call("api_tokens/create", token_scope="agent_deployment",
                       agent_id=agent["id"], environment_id=boot.environment_id)["token"]
    client = gov.session(token)

    def python(operation: str, details: dict[str, Any], **path: Any) -> dict[str, Any]:
        """The Python client: members in ``details``, the key inside them."""
        return client.call(operation, {**path, "details": details})

    registered = client.call("agent_instances/register", {
        "agent_version": {"name": "Reviewer", "external_identifier": "1.0.0"},
        "agent_schema_version": {
            "external_identifier": "s1", "span_type_schemas": SPAN_TYPES,
            "quality_schemas": QUALITY_SCHEMAS, "alert_schemas": ALERT_SCHEMAS,
        },
        "idempotency_key": key(),
    })
    run_id = registered["details"]["id"]
    assert registered["details"]["status"] == "pending"

    # A span arrives before the run's start, and is retried after a lost response.
    first_key = key()
    first_body = {"agent_instance_id": run_id, "schema_name": "llm", "status": "active",
                  "payload": {"prompt": "plan"}, "idempotency_key": first_key}
    first = python("agent_spans/create", first_body)
    assert python("agent_spans/create", first_body) == first
    with pytest.raises(IdempotencyKeyAlreadyUsed):
        python("agent_spans/create", {**first_body, "schema_name": "tool"})
    first_id = first["details"]["id"]

    started = client.call("agent_instances/start", agent_instance_id=run_id, timestamp=None,
                          idempotency_key=key())
    assert started["details"]["status"] == "active"

    # A span cancelled before it began is sent as pending, then finished.
    pending = python("agent_spans/create", {"agent_instance_id": run_id, "schema_name": "tool",
                                            "status": "pending", "payload": {},
                                            "idempotency_key": key()})
    assert pending["details"]["status"] == "active"
    python("agent_spans/finish", {"status": "cancelled", "idempotency_key": key()},
           agent_span_id=pending["details"]["id"])

    # The TypeScript client: already finished spans, the key at the top level.
    typescript = client.call("agent_spans/create", {
        "details": {"agent_instance_id": run_id, "schema_name": "llm", "status": "complete",
                    "payload": {"prompt": "q", "token_usage": {"prompt_tokens": 3}},
                    "result_payload": {"text": "a"},
                    "started_at": "2026-01-01T00:00:00Z",
                    "finished_at": "2026-01-01T00:00:02Z"},
        "idempotency_key": key(),
    })
    assert typescript["details"]["status"] == "complete"

    child = python("agent_spans/create", {"agent_instance_id": run_id, "schema_name": "tool",
                                          "status": "active", "parent_span_id": first_id,
                                          "payload": {}, "idempotency_key": key()})
    python("agent_spans/finish", {"idempotency_key": key()}, agent_span_id=child["details"]["id"])

    finish_key = key()
    finished = client.call("agent_instances/finish", agent_instance_id=run_id,
                           idempotency_key=finish_key)
    assert finished["details"]["status"] == "complete"

    # Work that was in flight lands after the finish.
    late_finish_body = {"result_payload": {"text": "late"}, "idempotency_key": key()}
    late_finish = python("agent_spans/finish", late_finish_body, agent_span_id=first_id)
    assert late_finish["details"]["status"] == "complete"
    assert python("agent_spans/finish", late_finish_body, agent_span_id=first_id) == late_finish
    quality = python("agent_instances/record_quality",
                     {"name": "accuracy", "payload": {"score": 0.8}, "idempotency_key": key()},
                     agent_instance_id=run_id)
    assert quality["details"]["quality_payloads"] == {"accuracy": {"score": 0.8}}
    bulk = client.call("bulk", {"items": [{
        "_type": "agent_spans/create", "idempotency_key": "bulk-late-span-1",
        "agent_instance_id": run_id, "schema_name": "tool", "status": "complete", "payload": {},
    }]})
    assert bulk["outputs"]["bulk-late-span-1"]["status"] == "success"
    client.call("alerts/raise", agent_instance_id=run_id, name="slow", severity="info",
                payload={"seconds": 1}, idempotency_key=key())

    # The finish is retried with its key (same answer), then re-sent with a new one (409).
    assert client.call("agent_instances/finish", agent_instance_id=run_id,
                       idempotency_key=finish_key) == finished
    with pytest.raises(InvalidAction):
        client.call("agent_instances/finish", agent_instance_id=run_id, idempotency_key=key())
    late_start = client.call("agent_instances/start", agent_instance_id=run_id,
                             idempotency_key=key())
    assert late_start["details"]["status"] == "complete"

    run = client.details("agent_instances/show", agent_instance_id=run_id)
    assert run["status"] == "complete"
    assert run["span_counts"] == {"active": 0, "complete": 4, "failed": 0, "cancelled": 1,
                                  "total": 5, "finished": 5, "pending": 0}
    assert run["span_schema_counts"] == {"by_name": {"llm": 2, "tool": 3}}
    assert run["quality_payloads"] == {"accuracy": {"score": 0.8}}
    assert run["raised_alert_count"] == 1
    listed = client.call("agent_spans/list", agent_instance_id=run_id,
                         **{"pagination[page_size]": 100})
    by_purpose: dict[str, int] = {}
    for row in listed["summaries"]:
        by_purpose[row["purpose"]] = by_purpose.get(row["purpose"], 0) + 1
    assert by_purpose == {"activity": 5, "quality": 1, "alert": 1}
    first_stored = client.details("agent_spans/show", agent_span_id=first_id)
    assert first_stored["result_payload"] == {"text": "late"}
    agent_now = admin.details("agents/show", agent_id=agent["id"])
    assert agent_now["instance_counts"]["complete"] == 1
    assert agent_now["last_activity_span_at"] == run["last_activity_span_at"]
