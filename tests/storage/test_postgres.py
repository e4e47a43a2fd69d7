"""What the PostgreSQL adapter adds to the contract: its schema, migrations, driver errors, secrets.

Needs $GOVERNANCE_TEST_POSTGRES_URL; each test works in an empty schema of its own.
"""

from __future__ import annotations

import base64
import json
import multiprocessing
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests, generate_key
from governance_core.errors import TemporarilyUnavailable, WriteConflict
from governance_core.ids import SeededIds
from governance_core.service import Governance
from governance_core.storage import Filter, SortKey, open_store
from governance_core.storage.schema import SCHEMA_VERSION, TABLES
from tests.core.insight_world import insight_world
from tests.core.test_sensitive_values import PAYLOAD, SSN, show_span, write_sensitive_run
from tests.stores import scratch_schema, server_url, with_query


def _psycopg() -> Any:
    server_url()  # skips, or fails when required, without a server or the driver
    import psycopg as module

    return module


@pytest.fixture
def url() -> Iterator[str]:
    """A URL whose connections use a new, empty schema, dropped afterwards."""
    with scratch_schema("adapter") as made:
        yield made


def _raw(url: str) -> Any:
    return _psycopg().connect(url, autocommit=True)


def _open(url: str, **options: Any) -> Any:
    from governance_core.storage.postgres import PostgresStore

    return PostgresStore(url, **options)


# -- the schema -------------------------------------------------------------------------------
def test_every_declared_field_is_a_typed_indexed_column(url: str) -> None:
    _open(url).close()
    with _raw(url) as raw:
        for table in TABLES.values():
            columns = dict(raw.execute(
                "SELECT column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND table_name = %s", (table.name,)
            ).fetchall())
            expected = {"id": "text", "data": "json"}
            kinds = {"text": "text", "integer": "bigint", "real": "double precision"}
            expected.update({c.name: kinds[c.type] for c in table.columns})
            assert columns == expected
            collations = {
                name for (name,) in raw.execute(
                    "SELECT collation_name FROM information_schema.columns WHERE"
                    " table_schema = current_schema() AND table_name = %s AND data_type = 'text'",
                    (table.name,),
                )
            }
            assert collations == {"C"}
            indexed = {
                tuple(row[0].split(", ")) for row in raw.execute(
                    "SELECT string_agg(a.attname, ', ' ORDER BY k.n) FROM pg_index i"
                    " JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n) ON true"
                    " JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum"
                    " WHERE i.indrelid = %s::regclass GROUP BY i.indexrelid", (table.name,)
                )
            }
            # The indexes the schema declares, as in SQLite: tables written on every span
            # index what their lists filter and sort on, the others every declared field.
            assert set(table.wanted_indexes()) == indexed - {("id",)}
            if table.index_each:
                assert {(c.name,) for c in table.columns} <= indexed
        version = raw.execute("SELECT value FROM _meta WHERE key = 'schema_version'").fetchone()
    assert version == (str(SCHEMA_VERSION),)


def test_a_span_is_in_the_index_of_top_level_spans_or_of_children(url: str) -> None:
    _open(url).close()
    with _raw(url) as raw:
        definitions = dict(raw.execute(
            "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = 'agent_spans'"
        ).fetchall())
        top = "agent_spans__account_id__agent_instance_id__started_at__null_pa"
        children = "agent_spans__parent_span_id__started_at__set_parent_span_id"
        assert definitions[top].endswith("WHERE (parent_span_id IS NULL)")
        assert definitions[children].endswith("WHERE (parent_span_id IS NOT NULL)")
        raw.execute("SET enable_seqscan = off")

        def plan(where: str) -> str:
            sql = f"EXPLAIN SELECT id FROM agent_spans WHERE {where} ORDER BY started_at"
            return " ".join(row[0] for row in raw.execute(sql))

        assert top in plan(
            "account_id = 'a' AND agent_instance_id = 'r' AND parent_span_id IS NULL"
        )
        assert children in plan("account_id = 'a' AND parent_span_id = 's1'")


def test_indexes_no_longer_declared_are_dropped(url: str) -> None:
    _open(url).close()
    with _raw(url) as raw:
        raw.execute('CREATE INDEX "agent_spans__schema_name" ON agent_spans (schema_name)')
        raw.execute('CREATE INDEX "someone_elses" ON agent_spans (status)')
    _open(url).close()
    with _raw(url) as raw:
        names = {name for (name,) in raw.execute(
            "SELECT indexname FROM pg_indexes WHERE tablename = 'agent_spans'"
        )}
    assert "agent_spans__schema_name" not in names
    assert {"someone_elses", "agent_spans__agent_instance_id__started_at"} <= names


def _open_in_process(url: str, start: Any, done: Any) -> None:
    start.wait()
    try:
        _open(url).close()
        done.put("ok")
    except BaseException as error:
        done.put(repr(error))


def test_processes_opening_an_empty_database_together_migrate_it_once(url: str) -> None:
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(4)
    done = context.Queue()
    processes = [
        context.Process(target=_open_in_process, args=(url, start, done)) for _ in range(4)
    ]
    for process in processes:
        process.start()
    outcomes = [done.get(timeout=60) for _ in processes]
    for process in processes:
        process.join(timeout=60)
    assert outcomes == ["ok"] * 4
    with _raw(url) as raw:
        # One transaction created every table: the others found the schema made.
        creators = raw.execute(
            "SELECT count(DISTINCT xmin::text) FROM pg_class"
            " WHERE relnamespace = current_schema()::regnamespace AND relname = ANY(%s)",
            (list(TABLES),),
        ).fetchone()
        tables = raw.execute(
            "SELECT count(*) FROM pg_tables"
            " WHERE schemaname = current_schema() AND tablename = ANY(%s)", (list(TABLES),)
        ).fetchone()
    assert creators == (1,)
    assert tables == (len(TABLES),)


def test_opening_a_current_store_waits_for_no_writer(url: str) -> None:
    """Opening a store whose schema is current takes no table lock (no DDL at all).

    A store opened while another process writes must not wait for that writer's tables:
    remaking triggers would, and a writer waiting for the next table would deadlock with it.
    """
    open_store(url).close()
    with _raw(url) as raw:
        raw.execute("BEGIN")
        raw.execute("LOCK TABLE agent_spans, agents IN ROW EXCLUSIVE MODE")
        opened: list[object] = []
        opener = threading.Thread(target=lambda: opened.append(open_store(url)))
        opener.start()
        opener.join(timeout=20)
        alive = opener.is_alive()
        raw.execute("ROLLBACK")
        opener.join(timeout=20)
    for store in opened:
        store.close()  # type: ignore[attr-defined]
    assert not alive, "opening the store waited for a writer's lock"


def test_migration_adds_and_backfills_new_columns(url: str) -> None:
    store = _open(url)
    agents: list[dict[str, Any]] = [
        {"id": "g1", "name": "one", "team_id": "t1", "status": "active"},
        {"id": "g2", "name": "two", "team_id": "t\x00", "status": "active"},
        {"id": "g3", "name": "three", "team_id": "t2"},
    ]
    for record in agents:
        store.put("agents", record)
    store.close()
    with _raw(url) as raw:
        raw.execute('ALTER TABLE agents DROP COLUMN team_id, DROP COLUMN status')
        # A value of another type than declared, written before the field was declared.
        raw.execute(
            "UPDATE agents SET data = %s WHERE id = 'g3'",
            (json.dumps({"id": "g3", "name": "three", "team_id": {"not": "text"}}),),
        )
        raw.execute("UPDATE _meta SET value = '0'")
    store = _open(url)
    try:
        assert [r["id"] for r in store.query("agents", [Filter("team_id", "eq", "t1")])] == ["g1"]
        assert [r["id"] for r in store.query("agents", [Filter("team_id", "eq", None)])] == ["g3"]
        ordered = store.query("agents", [Filter("team_id", "ne", None)], [SortKey("team_id")])
        assert [r["id"] for r in ordered] == ["g2", "g1"]  # "t\x00" < "t1"
        assert store.count("agents", [Filter("status", "eq", "active")]) == 2
    finally:
        store.close()
    with _raw(url) as raw:
        assert raw.execute("SELECT value FROM _meta").fetchone() == (str(SCHEMA_VERSION),)


def test_a_newer_schema_is_refused(url: str) -> None:
    _open(url).close()
    with _raw(url) as raw:
        raw.execute("UPDATE _meta SET value = %s", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(RuntimeError, match="newer than this library"):
        _open(url)


# -- locations --------------------------------------------------------------------------------
def test_a_url_opens_postgres_and_pool_parameters_stay_out_of_the_connection(url: str) -> None:
    store = open_store(with_query(url, pool_max_size="2", pool_min_size="1",
                                  application_name="gov-test"))
    try:
        assert type(store).__name__ == "PostgresStore"
        store.put("teams", {"id": "t1"})
        with _raw(url) as raw:
            names = raw.execute(
                "SELECT application_name FROM pg_stat_activity WHERE datname = current_database()"
            ).fetchall()
        assert ("gov-test",) in names
    finally:
        store.close()
    for name, bad in (("pool_max_size", "0"), ("pool_max_size", "many"),
                      ("pool_min_size", "1.5"), ("pool_timeout", "-1")):
        with pytest.raises(ValueError, match=name):
            open_store(with_query(url, **{name: bad}))


def test_an_unreachable_database_is_temporarily_unavailable_with_the_reason(url: str) -> None:
    with pytest.raises(TemporarilyUnavailable, match=r"cannot be reached.*does not exist"):
        open_store(url.rsplit("/", 1)[0] + "/no_such_database_here")


# -- driver errors ----------------------------------------------------------------------------
def test_a_concurrent_update_is_a_write_conflict_and_rolls_back(url: str) -> None:
    store = _open(url)
    try:
        store.put("teams", {"id": "counter", "value": 0})
        with pytest.raises(WriteConflict) as raised, store.transaction():
            seen = store.get("teams", "counter")
            store.put("teams", {"id": "mine"})
            with _raw(url) as other:
                other.execute("UPDATE teams SET data = '{\"id\": \"counter\", \"value\": 5}'")
            store.put("teams", {**(seen or {}), "value": 1})
        assert raised.value.code == "temporarily_unavailable"
        assert raised.value.retry_after_ms > 0
        assert store.get("teams", "mine") is None
        assert store.get("teams", "counter") == {"id": "counter", "value": 5}
    finally:
        store.close()


def test_a_commit_sent_with_the_last_writes_that_fails_is_a_write_conflict(url: str) -> None:
    """The COMMIT goes in the pipeline of a transaction's last writes; its failure is theirs.

    A constraint checked at commit stands for a serialization failure found only then.
    """
    from governance_core.storage.write_behind import WriteBehindStore

    inner = _open(url)
    with _raw(url) as raw:
        raw.execute(
            "CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN"
            " RAISE EXCEPTION 'could not serialize' USING ERRCODE = '40001'; END $$"
        )
        raw.execute(
            "CREATE CONSTRAINT TRIGGER refused_at_commit AFTER INSERT ON teams"
            " DEFERRABLE INITIALLY DEFERRED FOR EACH ROW WHEN (NEW.id = 'doomed')"
            " EXECUTE FUNCTION refuse()"
        )
    store = WriteBehindStore(inner)
    try:
        with pytest.raises(WriteConflict), store.transaction():
            store.put("teams", {"id": "kept"})
            store.put("teams", {"id": "doomed"})
        assert inner.get("teams", "kept") is None
        # The connection went back to the pool usable: more transactions than the driver
        # runs a statement before preparing it commit, each with its writes.
        for number in range(8):
            with store.transaction():
                assert store.get("teams", "kept") is None
                store.put("teams", {"id": f"t{number}"})
        assert inner.count("teams") == 8
    finally:
        store.close()


def test_nothing_runs_in_a_transaction_after_its_commit_went_with_its_writes(url: str) -> None:
    store = _open(url)
    try:
        with store.transaction():
            store.put("teams", {"id": "t1"})
            with store.batched(ending=True):
                store.put("teams", {"id": "t2"})
            with pytest.raises(RuntimeError, match="committed"):
                store.get("teams", "t1")
        assert [store.get("teams", key) for key in ("t1", "t2")] == [{"id": "t1"}, {"id": "t2"}]
        # A block ending a savepoint is not the transaction's end: it commits nothing.
        with pytest.raises(ValueError), store.transaction():
            with store.transaction(), store.batched(ending=True):
                store.put("teams", {"id": "t3"})
            raise ValueError("the transaction fails after its savepoint")
        assert store.get("teams", "t3") is None
    finally:
        store.close()


def test_a_held_lock_past_the_lock_timeout_is_temporarily_unavailable(url: str) -> None:
    store = _open(url, lock_timeout_ms=100)
    try:
        store.put("teams", {"id": "t1"})
        with _raw(url) as other, other.transaction():
            other.execute("SELECT * FROM teams WHERE id = 't1' FOR UPDATE")
            with pytest.raises(TemporarilyUnavailable) as raised:
                store.put("teams", {"id": "t1", "name": "x"})
        assert not isinstance(raised.value, WriteConflict)
        store.put("teams", {"id": "t1", "name": "after"})
        assert store.get("teams", "t1") == {"id": "t1", "name": "after"}
    finally:
        store.close()


def test_statements_queued_behind_a_failed_one_are_run_again_unprepared(url: str) -> None:
    """A read that never ran because the statement before it failed leaves nothing behind.

    A transaction sends its BEGIN and its share of the writes with its first statements, in
    one pipeline: when the share cannot be had, the reads queued behind it do not run, nor
    does the preparing of a statement the driver was about to prepare. The transaction's
    rollback makes the driver forget what it took for prepared.
    """
    store = _open(url, lock_timeout_ms=100)
    keys = [("teams", "t1"), ("people", "p1")]
    try:
        store.put("teams", {"id": "t1"})
        with pytest.raises(ValueError), store.transaction():
            store.put("teams", {"id": "t2"})
            raise ValueError("a transaction rolled back before")
        for _ in range(5):  # the driver prepares a statement on its sixth run
            assert store.get_many(keys) == [{"id": "t1"}, None]
        with _raw(url) as other, other.transaction():
            other.execute('LOCK TABLE "_writers" IN EXCLUSIVE MODE')
            with pytest.raises(TemporarilyUnavailable), store.transaction():
                store.get_many(keys)
        assert store.get_many(keys) == [{"id": "t1"}, None]
        with store.transaction():
            assert store.get_many(keys) == [{"id": "t1"}, None]
    finally:
        store.close()


def test_a_lost_connection_is_temporarily_unavailable_and_the_store_recovers(url: str) -> None:
    url = with_query(url, application_name="gov-lost-connection")
    store = _open(url)
    try:
        store.put("teams", {"id": "t1"})
        with pytest.raises(TemporarilyUnavailable), store.transaction():
            store.put("teams", {"id": "t2"})
            with _raw(url) as other:
                other.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                    " WHERE application_name = 'gov-lost-connection' AND pid <> pg_backend_pid()"
                )
            store.put("teams", {"id": "t3"})
        for _ in range(3):  # the pool may still hold connections the server ended
            try:
                ids = [r["id"] for r in store.query("teams")]
                break
            except TemporarilyUnavailable:
                continue
        assert ids == ["t1"]
    finally:
        store.close()


def test_threads_in_transactions_each_use_their_own_connection(url: str) -> None:
    store = _open(url)
    inside = threading.Barrier(2)
    seen: list[Any] = []

    def writer() -> None:
        with store.transaction():
            store.put("teams", {"id": "uncommitted"})
            inside.wait()
            inside.wait()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        inside.wait()
        seen.append(store.get("teams", "uncommitted"))
        inside.wait()
        thread.join()
        seen.append(store.get("teams", "uncommitted"))
    finally:
        store.close()
    assert seen == [None, {"id": "uncommitted"}]


def test_a_read_while_holding_a_turn_uses_the_turns_connection(url: str) -> None:
    """On a pool of one connection: a second one would be waited for until the pool's timeout.

    ``Governance.transaction()`` reads the settings' change counts before its transaction
    opens, inside the turn an OTLP export step holds.
    """
    from governance_core.otel.ingest import ingest
    from governance_core.otel.otlp_codec import decode_request
    from tests.otel.exports import export

    store = _open(with_query(url, pool_max_size="1", pool_timeout="2"))
    try:
        store.put("teams", {"id": "t1"})
        with store.turn("one"):
            assert store.get("teams", "t1") == {"id": "t1"}
            with store.transaction():
                store.put("teams", {"id": "t2"})
        assert store.get("teams", "t2") == {"id": "t2"}
        gov = Governance(store)
        principal = gov.authenticate(gov.bootstrap().token)
        body = decode_request(export(2, 5), "application/x-protobuf", 64)
        assert ingest(gov, principal, body).accepted == 10
    finally:
        store.close()


def test_a_turn_held_past_the_lock_timeout_is_temporarily_unavailable(url: str) -> None:
    store, waiter = _open(url), _open(url, lock_timeout_ms=100)
    held, done = threading.Event(), threading.Event()

    def holder() -> None:
        with store.turn("export"):
            held.set()
            done.wait(5)

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        held.wait(5)
        with pytest.raises(TemporarilyUnavailable), waiter.turn("export"):
            pass
        done.set()
        thread.join()
        # Let go by its holder, the turn is free again.
        with waiter.turn("export"), waiter.transaction():
            waiter.put("teams", {"id": "after"})
        assert waiter.get("teams", "after") == {"id": "after"}
    finally:
        done.set()
        store.close()
        waiter.close()


# -- what is kept where -----------------------------------------------------------------------
def _every_row(url: str) -> str:
    with _raw(url) as raw:
        return "\n".join(
            str(row)
            for table in TABLES
            for row in raw.execute(f'SELECT t::text FROM "{table}" t'.encode())
        )


@pytest.mark.parametrize("encrypted", [False, True])
def test_secrets_are_hashes_and_sensitive_values_stay_in_their_table(
    url: str, encrypted: bool
) -> None:
    key = generate_key() if encrypted else None
    config = None if encrypted else Config(cipher=PlaintextForTests())
    gov = Governance.open(url, encryption_key=key, config=config, clock=FixedClock(),
                          ids=SeededIds(5))
    try:
        boot = gov.bootstrap()
        world = insight_world(gov, boot)
        span_id = write_sensitive_run(world)
        issued = world.caller.call("api_tokens/create", details={"description": "ci"},
                                   idempotency_key="token-key-1")
        assert show_span(world, span_id)["payload"] == PAYLOAD
    finally:
        gov.close()
    everything = _every_row(url)
    for token in (boot.token, issued["token"]):
        assert token not in everything
    with _raw(url) as raw:
        outside = "\n".join(
            str(row) for table in TABLES if table != "sensitive_values"
            for row in raw.execute(f'SELECT t::text FROM "{table}" t'.encode())
        )
        kept = [row[0] for row in raw.execute("SELECT data FROM sensitive_values")]
    plain = "\n".join(base64.b64decode(record["ciphertext"]).decode("latin-1") for record in kept)
    for secret in (SSN, "result-secret-77"):
        assert secret not in outside
        assert (secret in plain) is not encrypted
    assert len(kept) == 2
