"""Summaries rendered from schema templates: spans, quality payloads and alerts."""

from __future__ import annotations

import pytest

from governance_core.service import Bootstrap, Governance
from tests.core.insight_world import InsightWorld, insight_world


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> InsightWorld:
    return insight_world(gov, boot)


def record_quality(world: InsightWorld, name: str, payload: object) -> dict[str, object]:
    result: dict[str, object] = world.caller.details(
        "agent_instances/record_quality", agent_instance_id=world.instance_id, name=name,
        payload=payload,
    )
    return result


def test_a_span_summary_renders_a_liquid_template_on_create_and_on_finish(
    world: InsightWorld,
) -> None:
    span = world.span("llm", status="active", payload={"model": "gpt-4o"})
    assert span["summary"] == "gpt-4o pending"
    finished = world.finish(span["id"], result_payload={"text": "The applicant qualifies"})
    assert finished["summary"] == "gpt-4o: The appli..."
    shown = world.caller.details("agent_spans/show", agent_span_id=span["id"])
    assert shown["summary"] == finished["summary"]


def test_the_result_wins_over_the_payload_in_a_span_summary(world: InsightWorld) -> None:
    span = world.span("llm", payload={"model_name": "gpt-4o", "text": "from the payload"},
                      result_payload={"text": "from result", "model_name": "claude-sonnet-4-5"})
    assert span["summary"] == "claude-sonnet-4-5: from result"


def test_lists_show_span_summaries_only_when_asked(world: InsightWorld) -> None:
    world.span("llm", payload={"model": "gpt-4o"}, result_payload={"error": "timeout"})
    plain = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id)
    asked = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id,
                              include_summaries=True)
    assert plain["summaries"][0]["summary"] is None
    assert asked["summaries"][0]["summary"] == "gpt-4o failed"


def test_a_failing_template_gives_no_summary_and_never_fails_the_write(
    world: InsightWorld,
) -> None:
    span = world.span("broken", payload={"anything": 1})
    assert span["summary"] is None and span["status"] == "complete"
    assert world.span("plain", payload={"x": 1})["summary"] is None


def test_a_template_that_does_not_compile_is_reported_and_gives_no_summary(
    world: InsightWorld,
) -> None:
    registered = world.caller.details("agent_instances/register", {
        "agent_id": world.agent["id"],
        "agent_version": {"name": "Reviewer", "external_identifier": "2.0.0"},
        "agent_schema_version": {"external_identifier": "bad", "span_type_schemas": [
            {"name": "odd", "params_schema": {}, "template": "{% if %}"},
        ]},
    })
    version = world.caller.details("agent_schema_versions/show",
                                   agent_schema_version_id=registered["agent_schema_version_id"])
    assert version["span_type_schemas"]["odd"]["template_validation"]["status"] == "invalid"
    span = world.caller.details("agent_spans/create", agent_instance_id=registered["id"],
                                schema_name="odd", status="complete", payload={})
    assert span["summary"] is None


def test_quality_summaries_render_each_schema_template_with_its_payload(
    world: InsightWorld,
) -> None:
    record_quality(world, "review", {"score": 4, "tags": ["accurate", "polite"]})
    record_quality(world, "untemplated", {"score": 1})
    run = record_quality(world, "failing", {"score": 1})
    assert run["quality_summaries"] == {"review": "good (4/5, accurate, polite)"}
    run = record_quality(world, "review", {"score": 2})
    assert run["quality_summaries"] == {"review": "fair (2/5, no tags)"}
    assert world.show()["quality_summaries"] == run["quality_summaries"]
    listed = world.caller.call("agent_instances/list", agent_id=world.agent["id"])
    assert listed["summaries"][0]["quality_summaries"] == run["quality_summaries"]


def test_removing_a_quality_payload_removes_its_summary(world: InsightWorld) -> None:
    record_quality(world, "review", {"score": 5})
    assert record_quality(world, "review", None)["quality_summaries"] == {}


def test_a_quality_payload_of_an_undeclared_name_has_no_summary(world: InsightWorld) -> None:
    run = record_quality(world, "unknown_name", {"score": 5})
    assert run["quality_payloads"] == {"unknown_name": {"score": 5}}
    assert run["quality_summaries"] == {}


def test_an_alert_summary_renders_the_schema_template_with_the_payload(
    world: InsightWorld,
) -> None:
    raised = world.caller.details("alerts/raise", agent_instance_id=world.instance_id,
                                  name="overspend", severity="warning",
                                  payload={"amount": 120, "budget": 100})
    assert raised["summary"] == "spent 120 of 100"
    again = world.caller.details("alerts/raise", agent_instance_id=world.instance_id,
                                 name="overspend", severity="warning",
                                 payload={"amount": 130, "budget": 100})
    assert again["summary"] == "spent 130 of 100"
    shown = world.caller.details("alerts/show", alert_id=raised["id"])
    assert shown["summary"] == "spent 130 of 100"


@pytest.mark.parametrize("name", ["quiet", "failing", "undeclared"])
def test_alerts_without_a_rendering_template_have_a_null_summary(
    world: InsightWorld, name: str
) -> None:
    raised = world.caller.details("alerts/raise", agent_instance_id=world.instance_id,
                                  name=name, severity="info", payload={"a": 1})
    assert raised["summary"] is None and raised["status"] == "raised"
