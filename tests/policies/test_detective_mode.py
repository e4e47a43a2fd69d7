"""Detective mode: the live policies judge spans as they are recorded, one by one or in batches.

An agent that cannot ask before it acts (an OpenTelemetry-instrumented one, or a client that
records after the fact) still gets its violations kept: each recorded activity span is
judged by the policies in scope before its write commits, the decisions that say something
are stored with the span, and the first enforce-mode deny raises ``policy_denied``. The
write itself is never refused.
"""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.policies.detective import RECORDED_KIND_PREFIX
from tests.policies.recording import record
from tests.policies.support import RunWorld

NO_EMAIL = '@reason("no email") forbid (principal, action, resource == SpanType::"email.send");'


def decisions(world: RunWorld, run: str) -> list[dict[str, Any]]:
    listed = world.session.call("decisions/list", {"agent_instance_id": run})
    return list(listed["summaries"])


def alerts(world: RunWorld, run: str) -> list[str]:
    listed = world.session.call("alerts/list", {"agent_instance_id": run})["summaries"]
    return [alert["name"] for alert in listed]


def span_body(run: str, schema_name: str) -> dict[str, Any]:
    return {"agent_instance_id": run, "schema_name": schema_name, "status": "complete",
            "payload": {}}


def test_a_span_recorded_alone_is_judged_and_stored_all_the_same(world: RunWorld) -> None:
    world.policy(NO_EMAIL)
    run = world.run()
    sent = record(world, run, "email.send")
    record(world, run, "crm.read_order")
    [decision] = decisions(world, run)
    assert (decision["agent_span_id"], decision["outcome"]) == (sent, "deny")
    stored = world.gov.store.get("decisions", decision["id"])
    assert stored is not None and stored["action_kind"] == RECORDED_KIND_PREFIX + "span"
    assert alerts(world, run) == ["policy_denied"]
    spans = world.session.call("agent_spans/list", {"agent_instance_id": run})["summaries"]
    assert sent in {span["id"] for span in spans}


def test_a_bulk_is_judged_once_per_run_and_raises_the_alert_once(world: RunWorld) -> None:
    world.policy(NO_EMAIL)
    first, second = world.run(), world.run()
    items = [
        {"_type": "agent_spans/create", "idempotency_key": f"item-{number:04d}",
         **span_body(run, name)}
        for number, (run, name) in enumerate([
            (first, "email.send"), (second, "crm.read_order"), (first, "email.send"),
        ])
    ]
    out = world.session.call("bulk", {"items": items})
    assert out["status"] == "success"
    assert all(item["status"] == "success" for item in out["outputs"].values())
    made = [out["outputs"][f"item-{number:04d}"]["details"]["id"] for number in (0, 2)]
    assert sorted(d["agent_span_id"] for d in decisions(world, first)) == sorted(made)
    assert decisions(world, second) == []
    assert alerts(world, first) == ["policy_denied"] and alerts(world, second) == []


def test_observe_mode_keeps_what_it_would_have_denied_and_raises_nothing(
    world: RunWorld,
) -> None:
    world.policy(NO_EMAIL, mode="observe")
    run = world.run()
    record(world, run, "email.send")
    [decision] = decisions(world, run)
    assert (decision["outcome"], decision["observed_outcome"]) == ("allow", "deny")
    assert alerts(world, run) == []


def test_a_decision_asked_in_the_same_bulk_sees_the_spans_judged_before(
    world: RunWorld,
) -> None:
    """A batch's recorded spans are judged before any other operation of it runs."""
    world.policy(NO_EMAIL)
    run = world.run()
    out = world.session.call("bulk", {"items": [
        {"_type": "agent_spans/create", "idempotency_key": "span-item",
         **span_body(run, "email.send")},
        {"_type": "decisions/list", "idempotency_key": "list-item", "agent_instance_id": run},
    ]})
    listed = out["outputs"]["list-item"]["summaries"]
    assert [d["agent_span_id"] for d in listed] == [
        out["outputs"]["span-item"]["details"]["id"]]


def test_detective_mode_can_be_turned_off(world: RunWorld) -> None:
    world.policy(NO_EMAIL)
    world.gov.config = attrs.evolve(world.gov.config, judge_recorded_spans=False)
    run = world.run()
    record(world, run, "email.send")
    assert decisions(world, run) == [] and alerts(world, run) == []


def test_an_opentelemetry_export_is_judged_as_it_is_recorded(world: RunWorld) -> None:
    from governance_core.otel import ingest
    from governance_core.otel.otlp_codec import decode_request
    from tests.otel.exports import export

    world.policy('@reason("no model calls here") forbid (principal, action == '
                 'Action::"call_model", resource);', mode="observe")
    principal = world.session.principal
    result = ingest(world.gov, principal,
                    decode_request(export(1, 6), "application/x-protobuf", 64))
    assert result.accepted == 6 and not result.rejected
    [run] = result.run_ids
    judged = decisions(world, run)
    spans = world.session.call("agent_spans/list", {"agent_instance_id": run})["summaries"]
    calls = {span["id"] for span in spans if span["purpose"] == "activity"
             and span["payload"].get("gen_ai.request.model", span["payload"].get("model"))}
    assert judged and {d["agent_span_id"] for d in judged} <= {s["id"] for s in spans}
    assert {d["observed_outcome"] for d in judged} == {"deny"}
    assert calls and {d["agent_span_id"] for d in judged} == calls
