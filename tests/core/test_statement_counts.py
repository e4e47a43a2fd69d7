"""How many SQL statements a span create runs: a regression guard, not a timing.

A span create needs: the token and its account (authentication; read again only when the
store's change mark says a token or account may have changed), the idempotency record,
the run and the agent (read together, in one statement: the agent's
``last_activity_span_at`` moves, and its risk profile scores the run), the span's insert, the
run's rewrite, the agent's rewrite, the idempotency record's insert, and the transaction
around them. The agent's risk profile (the
critical risk check of a span type with data risk) and the account's live policies
(detective mode judges the span when there are any) are read again only when the same change
mark says a risk profile or policy may have changed (a transaction grouping calls reads that
mark once, before it begins). The schema version is read once per
process. The run and the agent are read once and written once a transaction, however many
spans of a bulk request move them.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.ids import extract_partition
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
    last = [""]

    def note(sql: str) -> None:
        # SQLite reports each trigger program a statement runs (the store's own, keeping its
        # ids table and change counts) with that statement's text, bound values included: a
        # repeat of the text just seen is the same statement, not one more.
        if sql == last[0]:
            return
        last[0] = sql
        verb = sql.split()[0].upper()
        table = re.search(r"(?:FROM|INTO|UPDATE)\s+\[(\w+)\]", sql)
        seen.append(f"{verb} {table.group(1)}" if table else verb)

    with store._use() as link:
        link.conn.set_trace_callback(note)
    try:
        yield seen
    finally:
        with store._use() as link:
            link.conn.set_trace_callback(None)


def counted_run(gov: Governance, schema: dict[str, Any] = SCHEMA) -> tuple[str, str]:
    """Bootstrap ``gov`` and record a first span on a new run of ``schema``: token, run id."""
    token = gov.bootstrap().token
    agent = gov.call("agents/create", {"name": "counted"}, token=token)["details"]
    instance = gov.call("agent_instances/register", {
        "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
        "agent_schema_version": {"external_identifier": "s", **schema},
    }, token=token)["details"]["id"]
    gov.call("agent_spans/create", span(instance, 0), token=token)
    return token, instance


def _run() -> tuple[Governance, str, str]:
    gov = Governance(SQLiteStore(":memory:"), config=Config(cipher=PlaintextForTests()))
    token, instance = counted_run(gov)
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
        # The idempotency record, the run and its agent: one statement (a UNION ALL of the
        # three reads, named here by its first table).
        "SELECT idempotency_keys",
        # A single create writes each record once, so each is written as it is put (only a
        # batch keeps its records to write them together).
        "INSERT agent_spans",
        # The span's usage moved its model's tokens: the run's row of that model in
        # run_models (the trends page's per-model sums) follows, its tokens being in that
        # table's one index (so the full upsert at once).
        "INSERT run_models",
        # The run and the agent were read in this transaction: each is rewritten by one
        # UPDATE of its JSON and of the columns that changed, so only the indexes holding
        # those (the run's total_cost, which the console's plots read) are rewritten.
        "UPDATE agent_instances",
        "UPDATE agents",
        # The agent's risk profile and the account's live policies (detective mode would
        # judge the span before the commit) are not read: no risk profile or policy has
        # changed since they were read under the same change mark.
        "INSERT idempotency_keys",
        "COMMIT",
    ]


def test_a_span_create_reads_its_idempotency_record_run_and_agent_in_one_statement() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    seen: list[str] = []
    with gov.store._use() as link:
        link.conn.set_trace_callback(seen.append)
    try:
        gov.call("agent_spans/create", span(instance, 1), token=token)
    finally:
        with gov.store._use() as link:
            link.conn.set_trace_callback(None)
    reads = [sql for sql in seen if sql.startswith("SELECT") and "_changes" not in sql]
    assert len(reads) == 1, reads
    for table in ("idempotency_keys", "agent_instances", "agents"):
        assert f"FROM [{table}] WHERE id = " in reads[0], (table, reads[0])


def test_a_known_caller_reads_the_settings_change_counts_instead_of_the_settings() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    session = gov.session(token)
    session.call("agent_spans/create", span(instance, 1))
    with statements(gov.store) as seen:
        session.call("agent_spans/create", span(instance, 2))
    # No token is read: the change counts of the risk profiles and policies, read before the
    # transaction, stand for the agent's risk profile and the account's policies.
    assert seen[:2] == ["SELECT _changes", "BEGIN"]
    assert "SELECT risk_profiles" not in seen and "SELECT policies" not in seen
    with statements(gov.store) as seen:
        session.call("agents/list", {})
    # A read applies no setting: it reads no change count.
    assert "SELECT _changes" not in seen


def test_calls_grouped_in_a_transaction_read_the_settings_change_counts_as_it_begins() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    session = gov.session(token)
    with gov.transaction():
        session.call("agent_spans/create", span(instance, 1))
    with statements(gov.store) as seen, gov.transaction():
        session.call("agent_spans/create", span(instance, 2))
        session.call("agent_spans/create", span(instance, 3))
    # One read of the change counts before the transaction (as OTLP ingest's steps group
    # their calls) stands for the risk profile and the policies in every call of it.
    assert seen[:2] == ["SELECT _changes", "BEGIN"]
    assert seen.count("SELECT _changes") == 1
    assert "SELECT risk_profiles" not in seen and "SELECT policies" not in seen

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
    writes = [
        index for index, statement in enumerate(seen)
        if statement.startswith(("INSERT", "UPDATE"))
    ]
    reads = [index for index, statement in enumerate(seen) if statement.startswith("SELECT")]
    assert max(reads) < min(writes)
    # The run is read and rewritten once for the whole request, however many spans move it:
    # one UPDATE of the columns that changed (its cost moved, which indexes hold).
    after = gov.store.get("agent_instances", instance)
    assert before is not None and after is not None
    assert before["total_cost"] != after["total_cost"]
    assert seen.count("SELECT agent_instances") == 1
    assert seen.count("UPDATE agent_instances") == 1
    assert "INSERT agent_instances" not in seen


def test_a_child_span_reads_its_parent_once() -> None:
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    parent = gov.call("agent_spans/create", span(instance, 1), token=token)["details"]["id"]
    with statements(gov.store) as seen:
        gov.call("agent_spans/create", {**span(instance, 2), "parent_span_id": parent},
                 token=token)
    assert seen.count("SELECT agent_spans") == 1


def test_a_span_with_its_own_id_and_a_parent_to_come_reads_each_id_once() -> None:
    """Whether an id is taken, by any kind of resource, is one read of the store's ``ids``."""
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    partition = extract_partition(instance)
    child_id, parent_id = (gov.ids.new(partition, gov.clock()) for _ in range(2))
    with statements(gov.store) as seen:
        child = gov.call("agent_spans/create", {
            **span(instance, 1), "id": child_id, "parent_span_id": parent_id,
        }, token=token)["details"]
    assert child["id"] == child_id and child["parent_span_id"] == parent_id
    # The parent to come: not a span of the caller's, held by no resource. The child's own id:
    # held by no resource, named as a parent to come by no other run's span.
    assert seen.count("SELECT agent_spans") == 2
    assert seen.count("SELECT ids") == 2
    assert len(seen) <= 20, seen


def test_a_new_spans_sensitive_values_are_stored_without_a_look_up() -> None:
    # Its id was just claimed, and nothing is kept for an id before its owner exists.
    gov, token, instance = _run()
    assert isinstance(gov.store, SQLiteStore)
    marked = span(instance, 1)
    marked["sensitive_encoding"] = True
    marked["payload"]["prompt"] = {"$sensitive": "string", "value": "hello"}
    with statements(gov.store) as seen:
        gov.call("agent_spans/create", marked, token=token)
    assert "INSERT sensitive_values" in seen
    assert "SELECT sensitive_values" not in seen
