"""Run risk scores through real spans: kept counts, profiles, the critical alert, span levels."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest

from governance_core.converter import json_ready
from governance_core.domain.risk import RISK_CRITICAL
from governance_core.rules.risk import DEFAULT_RULESET, normalize_data_risk, score_run
from governance_core.service import Bootstrap, Governance
from tests.core.insight_world import SPAN_TYPES, InsightWorld, insight_world

# Weights and multipliers as the default ruleset's, with thresholds close enough to cross.
TIGHT = {
    "category_weights": {"personal_identifiers": 8, "contact_information": 4,
                         "organisational_confidential": 5},
    "action_multipliers": {"read_data": 1},
    "thresholds": {"medium": 10, "high": 20, "critical": 30},
}


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> InsightWorld:
    return insight_world(gov, boot)


def recount(world: InsightWorld) -> dict[str, Any]:
    """Score the run from its spans as listed, the slow way, with the default ruleset."""
    listed = world.caller.call(
        "agent_spans/list", agent_instance_id=world.instance_id, purpose="activity",
        pagination={"page_size": 100},
    )["summaries"]
    counts = Counter(span["schema_name"] for span in listed)
    risks = {t["name"]: normalize_data_risk(t.get("data_risk")) for t in SPAN_TYPES}
    return dict(json_ready(score_run(counts, risks, DEFAULT_RULESET)))


def use_profile(world: InsightWorld, ruleset: dict[str, Any]) -> str:
    profile = world.caller.details("risk_profiles/create", name="Tight", ruleset=ruleset)
    world.caller.call("agents/update", agent_id=world.agent["id"],
                      details={"risk_profile_id": profile["id"]})
    profile_id: str = profile["id"]
    return profile_id


def critical_alerts(world: InsightWorld) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = world.caller.call(
        "alerts/list", agent_instance_id=world.instance_id, name=RISK_CRITICAL
    )["summaries"]
    return rows


def test_no_risk_score_before_any_activity_span(world: InsightWorld) -> None:
    assert world.show()["risk_score"] is None
    world.caller.call("agent_instances/record_quality", agent_instance_id=world.instance_id,
                      name="review", payload={"score": 5})
    assert world.show()["risk_score"] is None


def test_the_worked_example_of_decisions_9(world: InsightWorld) -> None:
    for _ in range(3):
        world.span("read_pii")
    world.span("read_internal", status="active")
    world.span("plain")
    risk = world.show()["risk_score"]
    assert risk["total_score"] == 41
    assert risk["risk_level"] == "medium"
    assert risk["any_assessable"] is True
    assert risk["critical_threshold"] == 500
    assert risk["peak_classification"] == "confidential"
    assert risk["all_data_categories"] == [
        "personal_identifiers", "contact_information", "organisational_confidential",
    ]
    assert risk["allowed_actions"] == ["read_data"]
    assert risk["per_type"] == [
        {"schema_name": "plain", "count": 1, "type_score": 0, "total_contribution": 0,
         "risk_level": "low"},
        {"schema_name": "read_internal", "count": 1, "type_score": 5,
         "total_contribution": 5, "risk_level": "low"},
        {"schema_name": "read_pii", "count": 3, "type_score": 12, "total_contribution": 36,
         "risk_level": "low"},
    ]


def test_the_score_on_the_instance_equals_a_recount_of_its_spans(world: InsightWorld) -> None:
    first = world.span("read_pii", status="active")
    world.finish(first["id"], status="failed")
    for name in ("read_internal", "read_internal", "plain", "undeclared", "read_pii"):
        world.span(name)
    world.caller.call("alerts/raise", agent_instance_id=world.instance_id, name="quiet",
                      severity="info", payload={})
    world.caller.call("agent_instances/record_quality", agent_instance_id=world.instance_id,
                      name="review", payload={"score": 3})
    shown = world.show()["risk_score"]
    assert shown == recount(world)
    assert shown["total_score"] == 34
    assert [row["schema_name"] for row in shown["per_type"]] == [
        "plain", "read_internal", "read_pii", "undeclared",
    ]


def test_spans_of_undeclared_or_riskless_types_are_not_assessable(world: InsightWorld) -> None:
    world.span("plain")
    world.span("undeclared")
    risk = world.show()["risk_score"]
    assert risk["any_assessable"] is False and risk["risk_level"] is None
    assert risk["total_score"] == 0 and risk["peak_classification"] == "unknown"


def test_reading_a_run_never_queries_its_spans(
    world: InsightWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("read_pii", "read_internal", "plain"):
        world.span(name)
    touched: list[str] = []
    store = world.gov.store

    def spy(method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(table: str, *args: Any, **kwargs: Any) -> Any:
            touched.append(table)
            return method(table, *args, **kwargs)
        return wrapper

    for name in ("query", "count", "iterate"):
        monkeypatch.setattr(store, name, spy(getattr(store, name)))
    assert world.show()["risk_score"]["total_score"] == 17
    listed = world.caller.call("agent_instances/list", agent_id=world.agent["id"])
    assert listed["summaries"][0]["risk_score"]["total_score"] == 17
    assert "agent_spans" not in touched


def test_a_profile_change_applies_to_the_next_read(world: InsightWorld) -> None:
    world.span("read_pii")
    world.span("read_internal")
    assert world.show()["risk_score"]["risk_level"] == "low"
    profile_id = use_profile(world, TIGHT)
    risk = world.show()["risk_score"]
    assert (risk["total_score"], risk["risk_level"], risk["critical_threshold"]) == (
        17, "medium", 30,
    )
    world.caller.call("risk_profiles/update", risk_profile_id=profile_id, ruleset={
        **TIGHT, "action_multipliers": {"read_data": 2},
    })
    risk = world.show()["risk_score"]
    assert (risk["total_score"], risk["risk_level"]) == (34, "critical")


def test_the_account_default_profile_scores_agents_without_one(
    world: InsightWorld, boot: Bootstrap
) -> None:
    world.span("read_pii")
    world.caller.call("risk_profiles/update", risk_profile_id=boot.risk_profile_id,
                      ruleset=TIGHT)
    assert world.show()["risk_score"]["risk_level"] == "medium"


def test_risk_critical_is_raised_once_by_the_span_that_crosses(world: InsightWorld) -> None:
    use_profile(world, TIGHT)
    world.span("read_pii")
    world.span("read_pii")
    assert critical_alerts(world) == []
    crossing = world.span("read_pii")
    alerts = critical_alerts(world)
    assert len(alerts) == 1
    alert = alerts[0]
    assert (alert["severity"], alert["status"], alert["title"]) == (
        "critical", "raised", RISK_CRITICAL,
    )
    assert alert["payload"] == {
        "risk_level": "critical", "total_score": 36, "critical_threshold": 30,
        "agent_span_id": crossing["id"], "schema_name": "read_pii",
    }
    run = world.show()
    assert run["raised_alert_count"] == 1 and run["risk_score"]["risk_level"] == "critical"
    world.span("read_pii")
    world.caller.call("alerts/clear", agent_instance_id=world.instance_id, name=RISK_CRITICAL)
    world.span("read_pii")
    alerts = critical_alerts(world)
    assert len(alerts) == 1 and alerts[0]["status"] == "cleared" and alerts[0]["version"] == 2


def test_a_run_made_critical_by_a_profile_change_is_alerted_by_its_next_assessable_span(
    world: InsightWorld,
) -> None:
    world.span("read_pii")
    world.span("read_pii")
    world.span("read_pii")
    assert critical_alerts(world) == []
    use_profile(world, TIGHT)
    world.span("plain")
    assert critical_alerts(world) == []
    world.span("read_internal")
    assert len(critical_alerts(world)) == 1


def test_each_run_gets_its_own_critical_alert(world: InsightWorld) -> None:
    use_profile(world, TIGHT)
    other = world.caller.details("agent_instances/register", {
        "agent_id": world.agent["id"],
        "agent_version": {"name": "Reviewer", "external_identifier": "1.0.0"},
    })
    for instance_id in (world.instance_id, other["id"]):
        for _ in range(3):
            world.caller.call("agent_spans/create", agent_instance_id=instance_id,
                              schema_name="read_pii", status="complete", payload={})
    alerts = world.caller.call("alerts/list", name=RISK_CRITICAL)["summaries"]
    assert sorted(a["agent_instance_id"] for a in alerts) == sorted(
        [world.instance_id, other["id"]]
    )


def test_spans_show_their_type_score_and_level_when_asked(world: InsightWorld) -> None:
    pii = world.span("read_pii")
    world.span("read_internal")
    world.span("plain")
    world.span("undeclared")
    world.caller.call("agent_instances/record_quality", agent_instance_id=world.instance_id,
                      name="review", payload={"score": 3})
    rows = world.caller.call(
        "agent_spans/list", agent_instance_id=world.instance_id, include_risk_level=True,
        sorting="id",
    )["summaries"]
    assert [(r["schema_name"], r["risk_score"], r["risk_level"]) for r in rows] == [
        ("read_pii", 12, "low"),
        ("read_internal", 5, "low"),
        ("plain", 0, None),
        ("undeclared", None, None),
        ("review", None, None),
    ]
    shown = world.caller.details("agent_spans/show", agent_span_id=pii["id"],
                                 include_risk_level="true")
    assert (shown["risk_score"], shown["risk_level"]) == (12, "low")
    use_profile(world, TIGHT)
    shown = world.caller.details("agent_spans/show", agent_span_id=pii["id"],
                                 include_risk_level=True)
    assert (shown["risk_score"], shown["risk_level"]) == (12, "medium")


def test_spans_do_not_show_risk_fields_unless_asked(world: InsightWorld) -> None:
    span = world.span("read_pii")
    listed = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id)
    shown = world.caller.details("agent_spans/show", agent_span_id=span["id"])
    for row in (span, listed["summaries"][0], shown):
        assert "risk_level" not in row and "risk_score" not in row


def test_ingestion_tokens_read_the_same_score(world: InsightWorld) -> None:
    world.span("read_pii")
    ingestion = world.ingestion()
    shown = ingestion.details("agent_instances/show", agent_instance_id=world.instance_id)
    assert shown["risk_score"] == world.show()["risk_score"]
