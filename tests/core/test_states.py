"""The operations follow the tables in rules/states.py: every allowed transition succeeds, and
nothing outside the tables does."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.errors import InvalidAction
from governance_core.rules.states import AGENT, INSTANCE, reinstated_state
from tests.core.runs import Caller, fresh_caller, make_agent, register
from tests.stores import STORE_KINDS

INSTANCE_STATES = ("pending", "active", "complete", "failed", "cancelled", "terminated")
# ``span`` (a span starting a pending run) belongs to span ingestion and is tested there.
INSTANCE_TRIGGERS = ("start", "complete", "failed", "cancelled", "terminate")
AGENT_TRIGGERS = ("instance", "retire", "reinstate")


def fire_on_instance(caller: Caller, instance_id: str, trigger: str) -> str:
    """Fire ``trigger`` through its operation; the status the operation answers."""
    if trigger == "start":
        result = caller.details("agent_instances/start", agent_instance_id=instance_id)
    elif trigger == "terminate":
        result = caller.details(
            "agent_instances/terminate", agent_instance_id=instance_id, reason="stop"
        )
    else:
        result = caller.details(
            "agent_instances/finish", agent_instance_id=instance_id, status=trigger
        )
    status: str = result["status"]
    return status


def instance_in(caller: Caller, agent_id: str, state: str) -> str:
    """A new instance brought to ``state`` by the shortest path the table offers."""
    instance_id: str = register(caller, agent_id)["id"]
    path = {"pending": [], "active": ["start"], "terminated": ["terminate"]}.get(state, [state])
    for trigger in path:
        fire_on_instance(caller, instance_id, trigger)
    return instance_id


def shown_status(caller: Caller, instance_id: str) -> str:
    status: str = caller.details("agent_instances/show", agent_instance_id=instance_id)["status"]
    return status


@pytest.mark.parametrize("store", STORE_KINDS)
def test_every_instance_state_and_trigger(store: str) -> None:
    caller = fresh_caller(store)
    agent_id = make_agent(caller)["id"]
    for state, trigger in itertools.product(INSTANCE_STATES, INSTANCE_TRIGGERS):
        instance_id = instance_in(caller, agent_id, state)
        assert shown_status(caller, instance_id) == state
        if (state, trigger) in INSTANCE:
            assert fire_on_instance(caller, instance_id, trigger) == INSTANCE[(state, trigger)]
        elif trigger == "start":
            # Clients send start late: outside the table it answers the run unchanged.
            assert fire_on_instance(caller, instance_id, trigger) == state
        else:
            with pytest.raises(InvalidAction):
                fire_on_instance(caller, instance_id, trigger)
        expected = INSTANCE.get((state, trigger), state)
        assert shown_status(caller, instance_id) == expected


@pytest.mark.parametrize("store", STORE_KINDS)
@settings(max_examples=30, deadline=None)
@given(triggers=st.lists(st.sampled_from(INSTANCE_TRIGGERS), max_size=8))
def test_instance_walks_follow_the_table(store: str, triggers: list[str]) -> None:
    caller = fresh_caller(store)
    instance_id = register(caller, make_agent(caller)["id"])["id"]
    state = "pending"
    for trigger in triggers:
        if (state, trigger) in INSTANCE:
            state = INSTANCE[(state, trigger)]
            assert fire_on_instance(caller, instance_id, trigger) == state
        elif trigger == "start":
            assert fire_on_instance(caller, instance_id, trigger) == state
        else:
            with pytest.raises(InvalidAction):
                fire_on_instance(caller, instance_id, trigger)
        assert shown_status(caller, instance_id) == state


def fire_on_agent(caller: Caller, agent_id: str, trigger: str) -> str:
    """Fire an AGENT trigger through its operation; the agent's stored status afterwards."""
    if trigger == "instance":
        register(caller, agent_id)
    else:
        caller.call(f"agents/{trigger}", agent_id=agent_id)
    status: str = caller.details("agents/show", agent_id=agent_id)["status"]
    return status


@pytest.mark.parametrize("store", STORE_KINDS)
@settings(max_examples=30, deadline=None)
@given(triggers=st.lists(st.sampled_from(AGENT_TRIGGERS), max_size=8))
def test_agent_walks_follow_the_table(store: str, triggers: list[str]) -> None:
    caller = fresh_caller(store)
    agent_id = make_agent(caller)["id"]
    state, instances = "pending", 0
    for trigger in triggers:
        if (state, trigger) in AGENT:
            state = AGENT[(state, trigger)]
            instances += trigger == "instance"
            if trigger == "reinstate":
                state = reinstated_state(instances)
            assert fire_on_agent(caller, agent_id, trigger) == state
        else:
            with pytest.raises(InvalidAction):
                fire_on_agent(caller, agent_id, trigger)
        shown = caller.details("agents/show", agent_id=agent_id)
        assert shown["status"] == state
        assert shown["instance_counts"]["total"] == instances
