"""How many round trips a write costs on PostgreSQL: a regression guard, not a timing.

Counted from the wire, with libpq's protocol trace of the store's one connection: a simple
``Query`` or a ``Sync`` (the end of an extended-protocol exchange, or of a pipeline) is one
wait for the server, however many statements went before it. A transaction's ``BEGIN``
goes with its first statement, its reads go together where they can, and its writes go
together with the ``COMMIT``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from governance_core.service import Governance
from tests.core.test_statement_counts import counted_run, span
from tests.stores import scratch_schema, server_url, with_query

_WAIT = re.compile(r"^F\t\d+\t(Query|Sync)\b", re.MULTILINE)


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[Governance, Path]]:
    """A governance on a PostgreSQL store of one connection, its protocol traced to a file."""
    server_url()  # skips, or fails when required, without a server or the driver
    from psycopg import pq

    from governance_core.storage.postgres import PostgresStore

    trace = tmp_path / "protocol.trace"

    class TracedStore(PostgresStore):
        def _configure(self, conn: Any) -> None:
            super()._configure(conn)
            # Opened for the connection's life: libpq writes each message as it goes.
            out = trace.open("a")
            conn.pgconn.trace(out.fileno())
            conn.pgconn.set_trace_flags(pq.Trace.SUPPRESS_TIMESTAMPS | pq.Trace.REGRESS_MODE)
            opened.append(out)

    opened: list[Any] = []
    with scratch_schema("round_trips") as url:
        gov = Governance(TracedStore(with_query(url, pool_min_size="1", pool_max_size="1")))
        try:
            yield gov, trace
        finally:
            gov.close()
            for out in opened:
                out.close()


@contextmanager
def waits(trace: Path) -> Iterator[list[int]]:
    """Count the waits for the server in the block (in the list it yields, once it ends)."""
    counted: list[int] = []
    start = trace.stat().st_size if trace.exists() else 0
    yield counted
    with trace.open() as text:
        text.seek(start)
        counted.append(len(_WAIT.findall(text.read())))


def test_a_span_create_waits_for_the_server_three_times(
    traced: tuple[Governance, Path],
) -> None:
    gov, trace = traced
    token, instance = counted_run(gov)
    with waits(trace) as counted:
        gov.call("agent_spans/create", span(instance, 1), token=token)
    # The change mark (before the transaction); BEGIN with the idempotency record, the run
    # and its agent, read together; the writes with the COMMIT.
    assert counted == [3]


def test_a_bulk_request_of_a_hundred_spans_waits_as_one_of_three(
    traced: tuple[Governance, Path],
) -> None:
    gov, trace = traced
    # Spans of no data risk: a hundred of them raise no alert (whose raising reads the run's
    # alerts and the account's destinations).
    token, instance = counted_run(gov, {"span_type_schemas": [
        {"name": "llm", "params_schema": {"type": "object"}},
    ]})
    bulks = []
    for size, first in ((3, 1), (100, 10)):
        items = [{"_type": "agent_spans/create", **span(instance, first + number)}
                 for number in range(size)]
        with waits(trace) as counted:
            out = gov.call("bulk", {"items": items}, token=token)
        assert out["status"] == "success", out
        bulks.append(counted[0])
    # The change mark; BEGIN with the items' idempotency records; the run and its agent; the
    # writes, table by table, with the COMMIT.
    assert bulks[1] == bulks[0] == 4, bulks


def test_a_decision_waits_for_the_server_three_times(
    traced: tuple[Governance, Path],
) -> None:
    gov, trace = traced
    session = gov.session(gov.bootstrap().token)
    # Policies that read the run's allowed tool calls and its agent's cost of the day.
    for name, source in (
        ("calls", 'forbid (principal, action == Action::"call_tool", resource)'
                  " when { context.run.tool_calls >= 1000 };"),
        ("budget", "forbid (principal, action, resource)"
                   " when { context.agent.cost_today_micro_usd >= 1000000000 };"),
    ):
        session.call("policies/create", {"name": name, "source": source})
    agent = session.details("agents/create", {"name": "decided"})
    run = session.details("agent_instances/register", {
        "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
        "agent_schema_version": {"external_identifier": "s", "span_type_schemas": [
            {"name": "llm", "params_schema": {"type": "object"}},
        ]},
    })["id"]
    session.call("agent_instances/start", {"agent_instance_id": run})

    def decide(number: int) -> dict[str, Any]:
        return session.details("decisions/decide", {
            "agent_instance_id": run,
            "action": {"kind": "tool_call", "name": "search", "args": {"q": number}},
        })

    # psycopg prepares a statement on its sixth run, in a round trip of its own outside a
    # pipeline: past that, every decision is alike.
    for number in range(8):
        assert decide(number)["outcome"] == "allow"
    with waits(trace) as counted:
        decided = decide(8)
    assert decided["outcome"] == "allow", decided
    # The change mark of the settings (before the transaction); BEGIN with the run, its
    # agent's cost of the day and the run's last allowed tool call, read together; the
    # decision's write with the COMMIT.
    assert counted == [3]
