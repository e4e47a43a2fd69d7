"""Calls made with a token keep the rulesets and policies under the store's change mark.

The mark is read as the call authenticates, before its transaction (or as a
``Governance.transaction()`` grouping calls begins). A risk profile or policy
changed by another process, or by an earlier item of the same bulk request, must still be
what the next span write or decision applies: these tests first have the old settings kept
under the current mark, then change them and look at what the next call did.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from governance_core.service import Governance
from tests.policies.support import RunWorld, beside_another_process

NO_EMAIL = '@reason("no email") forbid (principal, action, resource == SpanType::"email.send");'
LOOSE = {
    "category_weights": {"health_and_medical": 100},
    "action_multipliers": {"read_data": 1},
    "thresholds": {"medium": 1000, "high": 2000, "critical": 3000},
}
STRICT = {**LOOSE, "thresholds": {"medium": 1, "high": 2, "critical": 3}}


def span(run: str, schema_name: str) -> dict[str, Any]:
    return {"agent_instance_id": run, "schema_name": schema_name, "status": "complete",
            "payload": {}}


def record(gov: Governance, token: str, run: str, schema_name: str) -> str:
    """Record a span on the run through ``gov`` with ``token``; its id."""
    made = gov.call("agent_spans/create", span(run, schema_name), token=token)
    span_id: str = made["details"]["id"]
    return span_id


def judged_spans(world: RunWorld, run: str) -> list[str]:
    """The spans of the run that the policies judged as they were recorded."""
    listed = world.session.call("decisions/list", {"agent_instance_id": run})["summaries"]
    return sorted(d["agent_span_id"] for d in listed if d["agent_span_id"] is not None)


def risk_level(world: RunWorld, run: str) -> str:
    shown = world.session.details("agent_instances/show", {"agent_instance_id": run})
    level: str = shown["risk_score"]["risk_level"]
    return level


def critical_alerts(world: RunWorld, run: str) -> list[dict[str, Any]]:
    listed: list[dict[str, Any]] = world.session.call(
        "alerts/list", {"agent_instance_id": run, "name": "risk_critical"}
    )["summaries"]
    return listed


def test_a_policy_made_in_another_process_judges_the_next_span_and_decision(
    tmp_path: Path,
) -> None:
    with beside_another_process(tmp_path / "shared.db") as (world, reader):
        token, run = world.boot.token, world.run()
        # No policy yet: the reader keeps that under the mark it read.
        record(reader, token, run, "email.send")
        assert judged_spans(world, run) == []
        policy = world.policy(NO_EMAIL)
        sent = record(reader, token, run, "email.send")
        assert judged_spans(world, run) == [sent]

        def decide() -> str:
            return str(reader.call("decisions/decide", {
                "agent_instance_id": run, "action": {"kind": "span", "name": "email.send"},
            }, token=token)["details"]["outcome"])

        assert decide() == "deny"
        world.session.call("policies/update", {"policy_id": policy["id"], "mode": "disabled"})
        assert decide() == "allow"
        record(reader, token, run, "email.send")
        assert judged_spans(world, run) == [sent]


def test_a_profile_changed_in_another_process_scores_the_next_span(tmp_path: Path) -> None:
    with beside_another_process(tmp_path / "shared.db") as (world, reader):
        profile = world.boot.risk_profile_id
        world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": LOOSE})
        token, run = world.boot.token, world.run()
        record(reader, token, run, "crm.read_patient")
        assert risk_level(world, run) == "low"
        world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": STRICT})
        crossing = record(reader, token, run, "crm.read_patient")
        [alert] = critical_alerts(world, run)
        assert alert["payload"]["agent_span_id"] == crossing


def test_a_policy_made_by_an_earlier_item_judges_the_later_items(world: RunWorld) -> None:
    token, run = world.boot.token, world.run()
    record(world.gov, token, run, "email.send")
    assert judged_spans(world, run) == []
    out = world.gov.call("bulk", {"items": [
        {"_type": "policies/create", "idempotency_key": "item-0001", "name": "no email",
         "source": NO_EMAIL},
        {"_type": "agent_spans/create", "idempotency_key": "item-0002",
         **span(run, "email.send")},
    ]}, token=token)
    assert out["status"] == "success", out
    assert judged_spans(world, run) == [out["outputs"]["item-0002"]["details"]["id"]]


def test_a_profile_changed_by_an_earlier_item_scores_the_later_items(world: RunWorld) -> None:
    profile = world.boot.risk_profile_id
    world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": LOOSE})
    token, run = world.boot.token, world.run()
    record(world.gov, token, run, "crm.read_patient")
    assert risk_level(world, run) == "low"
    out = world.gov.call("bulk", {"items": [
        {"_type": "risk_profiles/update", "idempotency_key": "item-0001",
         "risk_profile_id": profile, "ruleset": STRICT},
        {"_type": "agent_spans/create", "idempotency_key": "item-0002",
         **span(run, "crm.read_patient")},
    ]}, token=token)
    assert out["status"] == "success", out
    # The update scores the run again; the span that follows it raises the alert.
    assert risk_level(world, run) == "critical"
    [alert] = critical_alerts(world, run)
    assert alert["payload"]["agent_span_id"] == out["outputs"]["item-0002"]["details"]["id"]


def test_a_policy_made_in_another_process_judges_the_next_transactions_spans(
    tmp_path: Path,
) -> None:
    with beside_another_process(tmp_path / "shared.db") as (world, reader):
        token, run = world.boot.token, world.run()
        # Calls grouped in a transaction apply the settings under the mark read as it began.
        with reader.transaction():
            record(reader, token, run, "email.send")
        assert judged_spans(world, run) == []
        policy = world.policy(NO_EMAIL)
        with reader.transaction():
            sent = record(reader, token, run, "email.send")
        assert judged_spans(world, run) == [sent]
        world.session.call("policies/update", {"policy_id": policy["id"], "mode": "disabled"})
        with reader.transaction():
            record(reader, token, run, "email.send")
        assert judged_spans(world, run) == [sent]


def test_a_profile_changed_in_another_process_scores_the_next_transactions_span(
    tmp_path: Path,
) -> None:
    with beside_another_process(tmp_path / "shared.db") as (world, reader):
        profile = world.boot.risk_profile_id
        world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": LOOSE})
        token, run = world.boot.token, world.run()
        with reader.transaction():
            record(reader, token, run, "crm.read_patient")
        assert risk_level(world, run) == "low"
        world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": STRICT})
        with reader.transaction():
            crossing = record(reader, token, run, "crm.read_patient")
        [alert] = critical_alerts(world, run)
        assert alert["payload"]["agent_span_id"] == crossing


def test_a_policy_made_earlier_in_a_transaction_judges_its_later_spans(world: RunWorld) -> None:
    token, run = world.boot.token, world.run()
    with world.gov.transaction():
        record(world.gov, token, run, "email.send")
    assert judged_spans(world, run) == []
    with world.gov.transaction():
        record(world.gov, token, run, "email.send")
        world.gov.call("policies/create", {"name": "no email", "source": NO_EMAIL}, token=token)
        sent = record(world.gov, token, run, "email.send")
    assert judged_spans(world, run) == [sent]


def test_a_profile_changed_between_judged_spans_scores_the_next_ones_under_it(
    world: RunWorld,
) -> None:
    # What a span type adds to a run's risk is kept across writes under the ruleset that
    # scored it: a changed profile is a new ruleset, so the next span is asked with new sums.
    profile = world.boot.risk_profile_id
    world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": LOOSE})
    world.policy("forbid (principal, action, resource) when { context.run.risk_score >= 1500 };")
    token, run = world.boot.token, world.run()
    for _ in range(3):
        record(world.gov, token, run, "crm.read_patient")
    assert judged_spans(world, run) == []
    heavy = {**LOOSE, "category_weights": {"health_and_medical": 1000}}
    world.session.call("risk_profiles/update", {"risk_profile_id": profile, "ruleset": heavy})
    scored = record(world.gov, token, run, "crm.read_patient")
    assert judged_spans(world, run) == [scored]
