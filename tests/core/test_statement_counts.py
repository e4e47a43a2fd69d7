"""How many SQL statements a span create runs: a regression guard, not a timing.

A span create needs: the token and its account (authentication; read again only when the
store's change mark says a token or account may have changed), the idempotency record,
the run, the span's insert, the run's rewrite, the agent (read once: its
``last_activity_span_at`` moves, and its risk profile scores the run) and its rewrite, the
risk profile (the critical risk check of a span type with data risk), the idempotency
record's insert, and the transaction around them. The schema version is read once per
process. The run and the agent are read once and written once a transaction, however many
spans of a bulk request move them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from governance_core.service import Governance
from governance_core.storage import SQLiteStore

SCHEMA = {"span_type_schemas": [{
    "name": "llm",
    "params_schema": {"type": "object"},
    "data_risk": {"action_profile": {"read_data": "allowed"},
                  "params_data_categories": {"personal_identifiers": "included"}},
}]}


def span(instance_id: str, number: int) -> dict[str, Any]:
    return {
        "agent_instance_id": instance_id, "schema_name": "llm", "status": "complete",
        "payload": {"prompt": "hello", "model": "gpt-4o",
                    "token_usage": {"prompt_tokens": 10, "completion_tokens": 2}},
        "idempotency_key": f"span-{number:08d}",
    }


@contextmanager
def statements(store: SQLiteStore) -> Iterator[list[str]]:
    """Collect the statements ``store`` runs, each as its verb and table."""
    seen: list[str] = []

    def note(sql: str) -> None:
        verb = sql.split()[0].upper()
        table = re.search(r"(?:FROM|INTO)\s+\[(\w+)\]", sql)
        seen.append(f"{verb} {table.group(1)}" if table else verb)

    with store._use() as link:
        link.conn.set_trace_callback(note)
    try:
        yield seen
    finally:
        with store._use() as link:
            link.conn.set_trace_callback(None)


def _run() -> tuple[Governance, str, str]:
    gov = Governance(SQLiteStore(":memory:"))
    token = gov.bootstrap().token
    agent = gov.call("agents/create", {"name": "counted"}, token=token)["details"]
    instance = gov.call("agent_instances/register", {
        "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
        "agent_schema_version": {"external_identifier": "s", **SCHEMA},
    }, token=token)["details"]["id"]
    gov.call("agent_spans/create", span(instance, 0), token=token)
    return gov, token, instance


def test_a_span_create_runs_the_statements_its_rules_need() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    with statements(gov.store) as seen:
        gov.call("agent_spans/create", span(instance, 1), token=token)
    assert seen == [
        # The token and its account were read by the previous call: no token or account has
        # changed since (the counts the store's triggers keep of their changes).
        "SELECT _changes",
        "BEGIN",
        "SELECT idempotency_keys", "SELECT agent_instances",
        # A single create writes each record once, so each is written as it is put (only a
        # batch keeps its records to write them together).
        "INSERT agent_spans",
        # The span's usage moved the run's total_cost, which an index of runs holds (the
        # console's plots read it from there): the upsert that leaves indexes alone changes
        # nothing, and the full one follows.
        "INSERT agent_instances", "INSERT agent_instances",
        "SELECT agents", "INSERT agents",
        "SELECT risk_profiles",
        "INSERT idempotency_keys",
        "COMMIT",
    ]


def test_a_bulk_request_commits_once_and_writes_its_items_together() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    items = [{"_type": "agent_spans/create", **span(instance, number)} for number in (1, 2, 3)]
    before = gov.store.get("agent_instances", instance)
    with statements(gov.store) as seen:
        gov.call("bulk", {"items": items}, token=token)
    assert seen.count("BEGIN") == 1 and seen.count("COMMIT") == 1
    # Each item is a savepoint of the core's (a failed one is taken back before anything of
    # it reaches SQLite); SQLite's own is opened only for an item that writes to it.
    assert seen.count("SAVEPOINT") == seen.count("RELEASE") == 0
    per_item = (len(seen) - 2) / 3
    assert per_item <= 10, seen
    # The items' idempotency records are looked up together, before the first item runs.
    assert seen.count("SELECT idempotency_keys") == 1
    # Everything the items wrote is written together, after every read.
    writes = [index for index, statement in enumerate(seen) if statement.startswith("INSERT")]
    reads = [index for index, statement in enumerate(seen) if statement.startswith("SELECT")]
    assert max(reads) < min(writes)
    # The run is read and rewritten once for the whole request, however many spans move it;
    # when an indexed field of it moved (its cost or risk level), the cheap upsert that leaves
    # indexes alone changes nothing and the full one follows.
    after = gov.store.get("agent_instances", instance)
    assert before is not None and after is not None
    moved = any(before[name] != after[name] for name in ("total_cost", "risk_level"))
    assert seen.count("SELECT agent_instances") == 1
    assert seen.count("INSERT agent_instances") == 1 + moved


def test_a_child_span_reads_its_parent_once() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    parent = gov.call("agent_spans/create", span(instance, 1), token=token)["details"]["id"]
    with statements(gov.store) as seen:
        gov.call("agent_spans/create", {**span(instance, 2), "parent_span_id": parent},
                 token=token)
    assert seen.count("SELECT agent_spans") == 1
