"""Each agent's cost per day is kept by the store, and a store written before has it made.

A daily budget (``context.agent.cost_today_micro_usd``) reads the agent's day cost by key
instead of summing its runs of the day; a store an older library wrote (no day costs, schema
version 9) has them summed from its runs as it opens, on SQLite and on PostgreSQL alike.
"""

from __future__ import annotations

import pytest

from governance_core.clock import format_timestamp
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance, Session
from governance_core.storage import Filter, open_store
from tests.stores import RunSQL

_TRIGGERS = tuple(
    f"agent_instances_cost_{name}" for name in ("added", "priced", "moved", "removed")
)


def _open(location: str) -> Governance:
    return Governance(open_store(location), config=Config(cipher=PlaintextForTests()))


def _spend(session: Session, agent_id: str, prompt_tokens: int) -> str:
    """A started run of the agent with one model call of ``prompt_tokens`` (priced)."""
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "v1"},
        "agent_schema_version": {"external_identifier": "s1", "span_type_schemas": [
            {"name": "llm", "params_schema": {"type": "object"}},
        ]},
    })
    session.call("agent_instances/start", {"agent_instance_id": run["id"]})
    session.call("agent_spans/create", {
        "agent_instance_id": run["id"], "schema_name": "llm", "status": "complete",
        "payload": {"model": "gpt-4o", "token_usage": {"prompt_tokens": prompt_tokens}},
    })
    return str(run["id"])


def _decide(session: Session, run_id: str) -> str:
    return str(session.details("decisions/decide", {
        "agent_instance_id": run_id, "action": {"kind": "tool_call", "name": "search"},
    })["outcome"])


def _day_cost(gov: Governance, agent_id: str) -> float:
    today = format_timestamp(gov.clock())[:10]
    record = gov.store.get("agent_day_costs", f"{agent_id}/{today}")
    assert record is not None
    return float(record["total_cost"])


def _runs_cost(gov: Governance, agent_id: str) -> float:
    return sum(float(run["total_cost"] or 0) for run in gov.store.query(
        "agent_instances", [Filter("agent_id", "eq", agent_id)]
    ))


def test_an_older_stores_day_costs_are_summed_from_its_runs_as_it_opens(
    location: tuple[str, RunSQL],
) -> None:
    where, run = location
    gov = _open(where)
    try:
        token = gov.bootstrap().token
        session = gov.session(token)
        agent = session.details("agents/create", {"name": "spender"})["id"]
        runs = [_spend(session, agent, tokens) for tokens in (4_000, 8_000, 2_000)]
        spent = _runs_cost(gov, agent)
        assert spent > 0 and _day_cost(gov, agent) == pytest.approx(spent)
        # A budget just above what the agent spent today: it allows, until the day costs more.
        budget = int(spent * 1_000_000) + 1
        session.call("policies/create", {"name": "daily budget", "source": (
            "forbid (principal, action, resource)"
            f" when {{ context.agent.cost_today_micro_usd >= {budget} }};"
        )})
        assert _decide(session, runs[0]) == "allow"
    finally:
        gov.close()
    # As an older library left it: no day costs, nothing keeping them, the version before.
    if where.startswith("postgresql"):
        for trigger in _TRIGGERS:
            run(f"DROP TRIGGER IF EXISTS {trigger} ON agent_instances")
    else:
        for trigger in _TRIGGERS:
            run(f"DROP TRIGGER IF EXISTS {trigger}")
    run("DROP TABLE agent_day_costs")
    run("UPDATE _meta SET value = '9' WHERE key = 'schema_version'")

    gov = _open(where)
    try:
        assert _day_cost(gov, agent) == pytest.approx(spent)
        session = gov.session(token)
        assert _decide(session, runs[1]) == "allow"
        # Kept from here on: one more run's spending tips the day over the budget.
        _spend(session, agent, 1_000)
        assert _day_cost(gov, agent) == pytest.approx(_runs_cost(gov, agent))
        assert _decide(session, runs[2]) == "deny"
    finally:
        gov.close()
