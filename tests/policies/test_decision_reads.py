"""What a decision reads on SQLite does not grow with the run's calls or the agent's day.

A regression guard, not a timing: each read a decide (or the judge of a recorded span) makes
is checked against SQLite's plan for it. The run's tool calls are read from the end of their
index range (the last one's number), the agent's cost today by primary key from the day costs
the store keeps (no run is read, nor summed), and no read scans a table.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance, Session
from governance_core.storage import SQLiteStore

POLICIES = (
    'forbid (principal, action == Action::"call_tool", resource)'
    " when { context.run.tool_calls >= 1000 };",
    "forbid (principal, action, resource)"
    " when { context.agent.cost_today_micro_usd >= 1000000000 };",
)


def _run(session: Session, agent_id: str) -> str:
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "v1"},
        "agent_schema_version": {"external_identifier": "s1", "span_type_schemas": [
            {"name": "llm", "params_schema": {"type": "object"}},
        ]},
    })
    session.call("agent_instances/start", {"agent_instance_id": run["id"]})
    return str(run["id"])


def _decide(session: Session, run_id: str) -> dict[str, Any]:
    return session.details("decisions/decide", {
        "agent_instance_id": run_id, "action": {"kind": "tool_call", "name": "search"},
    })


def _plans(store: SQLiteStore, write: Callable[[], object]) -> dict[str, str]:
    """SQLite's plan of each read ``write`` makes, by statement."""
    seen: list[str] = []
    with store._use() as link:
        link.conn.set_trace_callback(seen.append)
    try:
        write()
    finally:
        with store._use() as link:
            link.conn.set_trace_callback(None)
    with store._use() as link:
        return {
            statement: " / ".join(
                row[3] for row in link.conn.execute(f"EXPLAIN QUERY PLAN {statement}")
            )
            for statement in seen if statement.startswith("SELECT")
        }


@contextmanager
def _busy_agent(*policies: str) -> Iterator[tuple[SQLiteStore, Session, str]]:
    """A store with ``policies`` live, and an agent with 20 other runs today: its new run."""
    store = SQLiteStore(":memory:")
    gov = Governance(store, config=Config(cipher=PlaintextForTests()))
    try:
        session = gov.session(gov.bootstrap().token)
        agent = session.details("agents/create", {"name": "busy"})["id"]
        for number, source in enumerate(policies):
            session.call("policies/create", {"name": f"p{number}", "source": source})
        for _ in range(20):
            _run(session, agent)
        yield store, session, _run(session, agent)
    finally:
        gov.close()


def _assert_day_cost_read_by_key(plans: dict[str, str]) -> None:
    """The agent's cost today was one read by primary key, and no sum over its runs."""
    assert not [statement for statement in plans if "sum([total_cost])" in statement], plans
    (cost_today,) = [plan for statement, plan in plans.items()
                     if "FROM [agent_day_costs]" in statement]
    assert "USING PRIMARY KEY (id=?)" in cost_today, cost_today


def test_a_recorded_spans_judge_reads_the_agents_day_cost_by_key() -> None:
    with _busy_agent(POLICIES[1]) as (store, session, run):
        plans = _plans(store, lambda: session.call("agent_spans/create", {
            "agent_instance_id": run, "schema_name": "llm", "status": "complete",
            "payload": {"model": "gpt-4o", "token_usage": {"prompt_tokens": 10}},
        }))
    assert not [plan for plan in plans.values() if "SCAN" in plan], plans
    _assert_day_cost_read_by_key(plans)


def test_a_decides_reads_are_index_searches_that_read_no_more_than_they_answer() -> None:
    # Other runs of the agent today, and a run with calls before this one.
    with _busy_agent(*POLICIES) as (store, session, run):
        decided = [_decide(session, run) for _ in range(30)]
        assert {decision["outcome"] for decision in decided} == {"allow"}
        asked: list[dict[str, Any]] = []
        plans = _plans(store, lambda: asked.append(_decide(session, run)))
        assert asked[0]["outcome"] == "allow"
        numbers = [
            int(decision.get("tool_call_number") or 0) for decision in store.query("decisions")
        ]
    assert not [plan for plan in plans.values() if "SCAN" in plan], plans
    (tool_calls,) = [plan for statement, plan in plans.items() if "FROM [decisions]" in statement]
    assert "tool_call_number>?" in tool_calls, tool_calls
    _assert_day_cost_read_by_key(plans)
    # Each allowed call is numbered after those before it.
    assert sorted(numbers) == list(range(1, 32))
