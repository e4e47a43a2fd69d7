"""Whether an id is taken is one read of the store's ``ids`` table, kept by the store itself.

Decisions 2 stand as they were: a supplied id any resource holds (of any kind, in any account)
is 409 ``conflict``; a parent to come is an id no resource holds; an id of another kind is
``unexpected_ref_type``. A file written before the table existed has it filled as it opens.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from governance_core.errors import Conflict, ValidationErrors
from governance_core.service import Bootstrap, Governance
from governance_core.storage import SQLiteStore
from governance_core.storage.schema import SCHEMA_VERSION, kinded_tables
from tests.core.span_world import SpanWorld, span_world
from tests.stores import scratch_database


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def new_id(world: SpanWorld) -> str:
    return world.gov.ids.new(world.caller.principal.partition, world.gov.clock())


def span_body(world: SpanWorld, **members: Any) -> dict[str, Any]:
    return {
        "agent_instance_id": world.instance_id, "schema_name": "llm", "status": "active",
        "payload": {"prompt": "x"}, **members,
    }


def test_an_id_any_resource_holds_is_a_conflict(world: SpanWorld) -> None:
    # A generated id (the agent's, the run's) and a supplied one (a span's) alike.
    span = world.span(id=new_id(world))
    for taken in (world.agent["id"], world.instance_id, span["id"]):
        with pytest.raises(Conflict):
            world.caller.call("agent_spans/create", span_body(world, id=taken))
        with pytest.raises(Conflict):
            world.caller.call("agents/create", {"name": f"named {taken}", "id": taken})


def test_each_resource_id_is_recorded_with_its_kind(world: SpanWorld) -> None:
    span = world.span()
    store = world.gov.store
    account = world.caller.principal.account_id
    for record_id, kind in (
        (world.agent["id"], "agent"), (world.instance_id, "agent_instance"),
        (span["id"], "agent_span"),
    ):
        assert store.get("ids", record_id) == {
            "id": record_id, "kind": kind, "account_id": account,
        }


def test_a_bulk_request_sees_the_ids_its_earlier_items_took(world: SpanWorld) -> None:
    """Items are kept unwritten until the request commits: their ids count all the same."""
    parent_id, other_id = new_id(world), new_id(world)
    items = [
        {"_type": "agent_spans/create", **span_body(world, id=parent_id)},
        {"_type": "agent_spans/create", **span_body(world, id=other_id,
                                                   parent_span_id=parent_id)},
        {"_type": "agents/create", "name": "clashing", "id": other_id},
    ]
    for number, item in enumerate(items):
        item["idempotency_key"] = f"claims-{number:04d}"
    outputs = list(world.caller.call("bulk", {"items": items})["outputs"].values())
    assert [output["status"] for output in outputs] == ["success", "success", "error"]
    assert outputs[1]["details"]["parent_span_id"] == parent_id
    assert outputs[2]["code"] == "conflict"


def test_a_parent_that_is_another_kind_of_resource_is_not_one_to_come(
    world: SpanWorld,
) -> None:
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call("agent_spans/create", span_body(
            world, parent_span_id=world.instance_id,
        ))
    assert {name: error.code for name, error in caught.value.errors.items()} == {
        "parent_span_id": "unexpected_ref_type"}


def test_another_accounts_resource_is_never_named(
    gov: Governance, boot: Bootstrap, other: Bootstrap,
) -> None:
    mine, theirs = span_world(gov, boot), span_world(gov, other)
    # Another account's resource, of the kind asked or another, does not exist to this caller.
    for foreign in (theirs.instance_id, theirs.agent["id"]):
        with pytest.raises(ValidationErrors) as caught:
            mine.caller.call("agent_spans/create", span_body(mine, agent_instance_id=foreign))
        assert caught.value.errors["agent_instance_id"].code == "invalid_value"


def test_a_file_written_before_the_ids_table_gets_it_filled_on_open(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    gov = Governance(SQLiteStore(path))
    token = gov.bootstrap().token
    agent = gov.call("agents/create", {"name": "old"}, token=token)["details"]
    gov.close()
    # As version 3 left it: no ids table, no triggers keeping it.
    raw = sqlite3.connect(path)
    for table in kinded_tables():
        raw.execute(f"DROP TRIGGER [{table.name}_records_id]")
        raw.execute(f"DROP TRIGGER [{table.name}_frees_id]")
    raw.execute("DROP TABLE ids")
    raw.execute("UPDATE _meta SET value = ? WHERE key = 'schema_version'",
                (str(SCHEMA_VERSION - 1),))
    raw.commit()
    raw.close()
    store = SQLiteStore(path)
    try:
        assert store.get("ids", agent["id"]) == {
            "id": agent["id"], "kind": "agent", "account_id": agent["account_id"],
        }
        every = sum(store.count(table.name) for table in kinded_tables())
        assert store.count("ids") == every > 1
        reopened = Governance(store)
        with pytest.raises(Conflict):
            reopened.call("agents/create", {"name": "again", "id": agent["id"]}, token=token)
    finally:
        store.close()


def test_a_postgres_database_written_before_the_ids_table_gets_it_filled_on_open() -> None:
    import psycopg

    from governance_core.storage.postgres import PostgresStore

    with scratch_database() as url:
        store = PostgresStore(url)
        store.put("agents", {"id": "g1", "account_id": "acc", "name": "old"})
        store.put("agent_spans", {"id": "s1", "account_id": "acc"})
        store.close()
        with psycopg.connect(url, autocommit=True) as raw:
            for table in kinded_tables():
                raw.execute(f'DROP TRIGGER "{table.name}_records_id" ON "{table.name}"'.encode())
                raw.execute(f'DROP TRIGGER "{table.name}_frees_id" ON "{table.name}"'.encode())
            raw.execute("DROP TABLE ids")
            raw.execute("UPDATE _meta SET value = %s", (str(SCHEMA_VERSION - 1),))
        store = PostgresStore(url)
        try:
            assert store.query("ids") == [
                {"id": "g1", "kind": "agent", "account_id": "acc"},
                {"id": "s1", "kind": "agent_span", "account_id": "acc"},
            ]
            store.put("agent_spans", {"id": "s2", "account_id": "acc"})
            assert store.get("ids", "s2") == {"id": "s2", "kind": "agent_span", "account_id": "acc"}
        finally:
            store.close()
