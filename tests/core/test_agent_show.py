"""agents/show by id or external_identifier, scoped counts and the risk roll-up (core)."""

from __future__ import annotations

from decimal import Decimal

import pytest

from governance_core import Governance, NotFound, ValidationErrors
from governance_core.operations.agents import risk_rollup
from governance_core.service import Bootstrap
from tests.core.runs import account_caller, make_agent


def test_exactly_one_way_to_name_the_agent(gov: Governance, boot: Bootstrap) -> None:
    caller = account_caller(gov, boot)
    agent = make_agent(caller, external_identifier="ext-1")
    for params in ({}, {"agent_id": agent["id"], "external_identifier": "ext-1"}):
        with pytest.raises(ValidationErrors):
            caller.call("agents/show", params)
    assert caller.details("agents/show", external_identifier="ext-1")["id"] == agent["id"]


def test_another_accounts_identifier_is_not_found(
    gov: Governance, boot: Bootstrap, other: Bootstrap
) -> None:
    make_agent(account_caller(gov, other), external_identifier="theirs")
    with pytest.raises(NotFound):
        account_caller(gov, boot).call("agents/show", external_identifier="theirs")


def test_an_unknown_environment_is_a_field_error(gov: Governance, boot: Bootstrap) -> None:
    caller = account_caller(gov, boot)
    agent = make_agent(caller)
    with pytest.raises(ValidationErrors) as caught:
        caller.call("agents/show", agent_id=agent["id"], environment_id="0" * 32)
    assert "environment_id" in caught.value.errors


def test_a_rollup_without_runs_and_with_unassessed_runs() -> None:
    empty = risk_rollup([])
    assert empty == {
        "instance_count": 0, "assessed_instance_count": 0, "risk_level": None,
        "max_total_score": None, "level_counts": dict.fromkeys(
            ("low", "medium", "high", "critical"), 0
        ),
    }
    rolled = risk_rollup([
        None,
        {"total_score": Decimal(3), "risk_level": None},
        {"total_score": Decimal(80), "risk_level": "high"},
        {"total_score": Decimal(12), "risk_level": "medium"},
    ])
    assert rolled["instance_count"] == 4 and rolled["assessed_instance_count"] == 2
    assert rolled["risk_level"] == "high" and rolled["max_total_score"] == 80
