"""A span may name a parent that has not arrived yet; runs and agents are found by external id."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import ValidationErrors
from governance_core.service import Bootstrap, Governance
from tests.core.span_world import SpanWorld, span_world


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def codes(world: SpanWorld, **members: Any) -> dict[str, str]:
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("agent_spans/create", {
            "agent_instance_id": world.instance_id, "schema_name": "llm", "status": "active",
            "payload": {"prompt": "x"}, **members,
        })
    return {name: error.code for name, error in caught.value.errors.items()}


def test_a_child_keeps_a_parent_to_come_and_is_linked_when_it_arrives(world: SpanWorld) -> None:
    partition = world.caller.principal.partition
    parent_id = world.gov.ids.new(partition, world.gov.clock())
    child = world.span(parent_span_id=parent_id)
    assert child["parent_span_id"] == parent_id
    parent = world.span(id=parent_id)
    assert parent["id"] == parent_id
    listed = world.caller.call("agent_spans/list", agent_instance_id=world.instance_id)
    assert {span["id"]: span["parent_span_id"] for span in listed["summaries"]} == {
        parent_id: None, child["id"]: parent_id,
    }


def test_a_parent_to_come_must_arrive_in_its_childrens_run(world: SpanWorld) -> None:
    parent_id = world.gov.ids.new(world.caller.principal.partition, world.gov.clock())
    world.span(parent_span_id=parent_id)
    with pytest.raises(ValidationErrors) as caught:
        world.span(world.new_run()["id"], id=parent_id)
    assert {name: error.code for name, error in caught.value.errors.items()} == {
        "id": "invalid_value"}
    assert world.span(id=parent_id)["id"] == parent_id


def test_a_parent_outside_the_partition_or_of_another_kind_is_still_refused(
    world: SpanWorld,
) -> None:
    partition = world.caller.principal.partition
    foreign = world.gov.ids.new((partition + 1) % 2**30, world.gov.clock())
    assert codes(world, parent_span_id=foreign) == {"parent_span_id": "invalid_value"}
    assert codes(world, parent_span_id=world.agent["id"]) == {
        "parent_span_id": "unexpected_ref_type"}
    assert codes(world, parent_span_id="nope") == {"parent_span_id": "invalid_value"}


def test_lists_filter_runs_and_agents_by_external_identifier(world: SpanWorld) -> None:
    run = world.new_run(external_identifier="trace-1")
    world.new_run(external_identifier="trace-2")
    found = world.caller.call("agent_instances/list", external_identifier="trace-1")
    assert [item["id"] for item in found["summaries"]] == [run["id"]]
    named = world.caller.details("agents/create", name="Named", external_identifier="named")
    agents = world.caller.call("agents/list", external_identifier="named")["summaries"]
    assert [agent["id"] for agent in agents] == [named["id"]]
    assert world.caller.call("agents/list", external_identifier="nobody")["summaries"] == []


def test_a_batch_that_read_its_ids_ahead_still_refuses_an_id_another_run_names(
    world: SpanWorld,
) -> None:
    """What a batch reads ahead (ids no other run's span names) follows its own writes."""
    from governance_core.domain.batch import batch_of
    from governance_core.domain.spans import read_unnamed

    partition = world.caller.principal.partition
    named_before, named_within, free = (
        world.gov.ids.new(partition, world.gov.clock()) for _ in range(3)
    )
    other_run = world.new_run()["id"]
    world.span(other_run, parent_span_id=named_before)
    with world.gov.transaction():
        ctx = world.gov.context(world.caller.principal)
        read_unnamed(ctx, [named_before, named_within, free], world.instance_id)
        batch = batch_of(ctx)
        assert batch is not None
        assert [batch.unnamed(span_id) for span_id in (named_before, named_within, free)] == [
            False, True, True]
        # Within the batch, another run's span comes to name one of them.
        world.span(other_run, parent_span_id=named_within)
        for refused in (named_before, named_within):
            with pytest.raises(ValidationErrors) as caught:
                world.span(id=refused)
            assert {name: error.code for name, error in caught.value.errors.items()} == {
                "id": "invalid_value"}
        assert world.span(id=free)["id"] == free
