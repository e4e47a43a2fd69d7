"""The loan review playground end to end, called with an account token as a client would."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import InvalidValue, NotFound, NotPermitted
from governance_core.fields import BODY
from governance_core.service import Bootstrap, Governance

CREATE = "playground/create_loan_application_review_agent"
REGISTER = "playground/register_loan_application_review_agent_instance"
RECORD = "playground/record_loan_application_review_spans"


def call(gov: Governance, boot: Bootstrap, operation: str, params: Any = None) -> Any:
    return gov.call(operation, params or {}, token=boot.token)


@pytest.fixture
def run(gov: Governance, boot: Bootstrap) -> dict[str, Any]:
    """A demo agent, a registered run and its recorded spans."""
    agent = call(gov, boot, CREATE)["agent"]
    registered = call(gov, boot, REGISTER, {BODY: agent["id"]})
    recorded = call(gov, boot, RECORD, {"agent_instance_id": registered["details"]["id"]})
    instance = call(gov, boot, "agent_instances/show",
                    {"agent_instance_id": registered["details"]["id"]})["details"]
    return {"agent": agent, "registered": registered, "recorded": recorded,
            "instance": instance}


def test_create_answers_the_agent(gov: Governance, boot: Bootstrap) -> None:
    created = call(gov, boot, CREATE)
    assert created["status"] == "success" and set(created) == {"status", "agent"}
    agent = created["agent"]
    assert agent["type"] == "agent" and agent["status"] == "pending"
    assert agent["name"] == "Loan application review agent"


def test_create_with_an_idempotency_key_makes_one_agent(gov: Governance, boot: Bootstrap) -> None:
    first = gov.call(CREATE, {}, token=boot.token, idempotency_keys=["demo-agent-0001"])
    again = gov.call(CREATE, {}, token=boot.token, idempotency_keys=["demo-agent-0001"])
    assert first == again
    assert len(call(gov, boot, "agents/list")["summaries"]) == 1


def test_register_answers_the_full_schema_version_the_version_and_the_run(
    run: dict[str, Any],
) -> None:
    registered = run["registered"]
    assert registered["status"] == "success"
    schema = registered["agent_schema_version"]
    assert schema["type"] == "agent_schema_version"
    assert {"llm", "tool", "tool:credit_bureau_check", "tool:identity_document_verification",
            "tool:income_verification", "decision_letter"} == set(schema["span_type_schemas"])
    assert set(schema["alert_schemas"]) == {"affordability_concern", "risk_critical"}
    assert set(schema["quality_schemas"]) == {"decision_quality"}
    for entry in schema["span_type_schemas"].values():
        assert entry["params_schema_validation"]["status"] == "valid"
        assert entry["template_validation"]["status"] == "valid"
    for group in ("alert_schemas", "quality_schemas"):
        for entry in schema[group].values():
            assert entry["template_validation"]["status"] == "valid"
    assert registered["agent_version"]["type"] == "agent_version"
    assert registered["agent_version"]["agent_schema_version_id"] == schema["id"]
    details = registered["details"]
    assert details["type"] == "agent_instance" and details["status"] == "pending"
    assert details["agent_id"] == run["agent"]["id"]


def test_register_accepts_an_object_body_and_reuses_the_schema_version(
    gov: Governance, boot: Bootstrap, run: dict[str, Any],
) -> None:
    again = call(gov, boot, REGISTER, {"agent_id": run["agent"]["id"],
                                        "environment_id": boot.environment_id})
    assert again["agent_schema_version"]["id"] == run["registered"]["agent_schema_version"]["id"]
    assert again["details"]["id"] != run["registered"]["details"]["id"]


def test_register_refuses_a_body_that_is_not_an_agent(gov: Governance, boot: Bootstrap) -> None:
    with pytest.raises(InvalidValue):
        call(gov, boot, REGISTER, {BODY: 12})
    # The agent is the resource the register acts on: answered like a path id.
    foreign = gov.bootstrap(account_name="Globex", admin_email="admin@globex.test")
    foreign_agent = call(gov, foreign, "agents/create", {"details": {"name": "Theirs"}})
    for unknown in (boot.environment_id, "nope", "0" * 32, foreign_agent["details"]["id"]):
        with pytest.raises(NotFound):
            call(gov, boot, REGISTER, {BODY: unknown})
        with pytest.raises(NotFound):
            call(gov, boot, REGISTER, {"agent_id": unknown})


def test_the_recorded_run_is_scored_high(run: dict[str, Any]) -> None:
    risk = run["instance"]["risk_score"]
    assert risk["risk_level"] in ("medium", "high")
    assert risk["risk_level"] == "high" and risk["total_score"] == 293
    assert risk["peak_classification"] == "restricted"
    assert {"personal_identifiers", "financial_information", "authentication_and_secrets",
            "gdpr_biometric_for_identification"} <= set(risk["all_data_categories"])
    assert "external_communication" in risk["allowed_actions"]
    counts = {row["schema_name"]: row["count"] for row in risk["per_type"]}
    assert counts["llm"] == 3 and counts["decision_letter"] == 1


def test_the_recorded_run_is_priced_per_real_model(run: dict[str, Any]) -> None:
    breakdown = run["instance"]["cost_breakdown"]
    groups = {group["model_name"]: group for group in breakdown["groups"]}
    assert set(groups) == {"gpt-4o", "claude-sonnet-4-5", "gpt-4o-mini"}
    for group in groups.values():
        assert group["total_cost"] is not None and group["total_cost"] > 0
        assert group["context_limit"] is not None
    assert groups["gpt-4o"]["cache_read"] == 1024 and groups["gpt-4o"]["input"] == 2176
    assert groups["claude-sonnet-4-5"]["cache_read"] == 2048
    assert breakdown["total_cost"] > 0


def test_the_recorded_run_has_its_summaries_alert_and_quality(
    gov: Governance, boot: Bootstrap, run: dict[str, Any],
) -> None:
    instance = run["instance"]
    assert instance["status"] == "complete"
    assert instance["quality_summaries"]["decision_quality"].startswith(
        "Decision quality 4/5 (sound); 4 checks passed (identity, credit, income, policy)."
    )
    recorded = run["recorded"]
    assert set(recorded) == {"status", "ids", "alert_ids"}
    span_ids, (alert_id,) = recorded["ids"], recorded["alert_ids"]
    alert = call(gov, boot, "alerts/show", {"alert_id": alert_id})["details"]
    assert alert["name"] == "affordability_concern" and alert["severity"] == "warning"
    assert alert["summary"] == (
        "Debt-to-income 46% exceeds the 43% policy limit for application APP-2026-004211"
    )
    spans = call(gov, boot, "agent_spans/list", {
        "agent_instance_id": instance["id"], "purpose": "activity", "include_summaries": True,
    })["summaries"]
    assert [span["id"] for span in spans] == span_ids
    assert all(span["summary"] for span in spans)
    assert all(span["payload_validation"]["status"] == "valid" for span in spans)
    assert instance["span_counts"]["complete"] == len(spans) == 8
    for span_id in span_ids:
        shown = call(gov, boot, "agent_spans/show", {"agent_span_id": span_id})["details"]
        assert shown["type"] == "agent_span" and shown["agent_instance_id"] == instance["id"]


def test_the_national_id_is_kept_apart(
    gov: Governance, boot: Bootstrap, run: dict[str, Any],
) -> None:
    listed = call(gov, boot, "agent_spans/list", {
        "agent_instance_id": run["instance"]["id"],
        "schema_name": "tool:identity_document_verification",
    })["summaries"][0]
    assert "value" not in listed["payload"]["applicant"]["national_id"]
    shown = call(gov, boot, "agent_spans/show", {"agent_span_id": listed["id"]})["details"]
    assert shown["payload"]["applicant"]["national_id"]["value"] == "QQ123456C"


def test_recording_again_on_a_finished_run_adds_late_spans(
    gov: Governance, boot: Bootstrap, run: dict[str, Any],
) -> None:
    again = call(gov, boot, RECORD, {"agent_instance_id": run["instance"]["id"]})
    assert len(again["ids"]) == 8 and len(again["alert_ids"]) == 1
    assert again["alert_ids"] == run["recorded"]["alert_ids"]
    instance = call(gov, boot, "agent_instances/show",
                    {"agent_instance_id": run["instance"]["id"]})["details"]
    assert instance["status"] == "complete" and instance["span_counts"]["total"] == 16


def test_the_playground_is_for_account_tokens(
    gov: Governance, boot: Bootstrap, run: dict[str, Any],
) -> None:
    token = call(gov, boot, "api_tokens/create", {"details": {
        "token_scope": "agent_deployment", "agent_id": run["agent"]["id"],
        "environment_id": boot.environment_id,
    }})["token"]
    with pytest.raises(NotPermitted):
        gov.call(RECORD, {"agent_instance_id": run["instance"]["id"]}, token=token)
