"""A store written before allowed tool calls were numbered has them numbered as it opens.

A run's ``context.run.tool_calls`` is the number of its last allowed tool call; calls an
older library stored carry none, so opening the store numbers them, run by run, on SQLite
and on PostgreSQL alike.
"""

from __future__ import annotations

from typing import Any

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance, Session
from governance_core.storage import Filter, SortKey, open_store
from tests.stores import RunSQL


def _open(location: str) -> Governance:
    return Governance(open_store(location), config=Config(cipher=PlaintextForTests()))


def _run(session: Session, agent_id: str) -> str:
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "v1"},
        "agent_schema_version": {"external_identifier": "s1"},
    })
    session.call("agent_instances/start", {"agent_instance_id": run["id"]})
    return str(run["id"])


def _decide(session: Session, run_id: str) -> str:
    return str(session.details("decisions/decide", {
        "agent_instance_id": run_id, "action": {"kind": "tool_call", "name": "search"},
    })["outcome"])


def _numbers(gov: Governance, run_id: str) -> list[Any]:
    return [decision.get("tool_call_number") for decision in gov.store.query("decisions", [
        Filter("agent_instance_id", "eq", run_id), Filter("outcome", "eq", "allow"),
    ], [SortKey("decided_at")])]


def test_an_older_stores_allowed_tool_calls_are_numbered_as_it_opens(
    location: tuple[str, RunSQL],
) -> None:
    where, run = location
    gov = _open(where)
    try:
        token = gov.bootstrap().token
        session = gov.session(token)
        agent = session.details("agents/create", {"name": "numbered"})["id"]
        session.call("policies/create", {"name": "three calls", "source": (
            'forbid (principal, action == Action::"call_tool", resource)'
            " when { context.run.tool_calls >= 3 };"
        )})
        first, second = _run(session, agent), _run(session, agent)
        assert [_decide(session, first) for _ in range(4)] == ["allow"] * 3 + ["deny"]
        assert _decide(session, second) == "allow"
        assert _numbers(gov, first) == [1, 2, 3] and _numbers(gov, second) == [1]
    finally:
        gov.close()
    # As an older library left them: no call numbered, the schema version before numbers.
    if where.startswith("postgresql"):
        run("UPDATE decisions SET tool_call_number = NULL,"
            " data = (data::jsonb - 'tool_call_number')::json")
    else:
        run("UPDATE decisions SET tool_call_number = NULL")
    run("UPDATE _meta SET value = '8' WHERE key = 'schema_version'")

    gov = _open(where)
    try:
        assert _numbers(gov, first) == [1, 2, 3] and _numbers(gov, second) == [1]
        session = gov.session(token)
        # The numbers count the calls: the first run is at its limit, the second goes on.
        assert _decide(session, first) == "deny"
        assert _decide(session, second) == "allow"
        assert _numbers(gov, second) == [1, 2]
    finally:
        gov.close()
