"""What the SQLite adapter adds to the contract: WAL, migrations, busy handling, concurrency."""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from governance_core.errors import TemporarilyUnavailable
from governance_core.storage import Filter, SortKey, SQLiteStore, Store
from governance_core.storage import sqlite as sqlite_adapter
from governance_core.storage.schema import SCHEMA_VERSION, TABLES
from governance_core.storage.sqlite import BUSY_TIMEOUT_MS, RETRY_AFTER_MS


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "governance.db"


@pytest.fixture
def store(path: Path) -> Iterator[SQLiteStore]:
    opened = SQLiteStore(path)
    yield opened
    opened.close()


def _raw(path: Path) -> sqlite3.Connection:
    return sqlite3.connect(path, isolation_level=None, check_same_thread=False)


def _run_threads(count: int, work: Callable[[int], None]) -> None:
    """Run ``work(n)`` in ``count`` threads started together; re-raise the first failure."""
    start = threading.Barrier(count)
    failures: list[BaseException] = []

    def body(n: int) -> None:
        start.wait()
        try:
            work(n)
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=body, args=(n,)) for n in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]


def _increment(store: Store, record_id: str) -> None:
    """Add one to the shared counter and store a record, in one transaction."""
    with store.transaction():
        counter = store.get("teams", "counter") or {"id": "counter", "value": 0}
        store.put("teams", {**counter, "value": counter["value"] + 1})
        store.put("teams", {"id": record_id})


def _increments(store: Store, prefix: str, count: int) -> None:
    for number in range(count):
        _increment(store, f"{prefix}-{number:03d}")


# -- the file ---------------------------------------------------------------------------------
def test_files_use_wal(store: SQLiteStore, path: Path) -> None:
    store.put("teams", {"id": "t1"})
    assert _raw(path).execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert store.busy_timeout_ms == BUSY_TIMEOUT_MS == 5000


def test_schema_version_is_recorded(store: SQLiteStore, path: Path) -> None:
    rows = _raw(path).execute("SELECT key, value FROM _meta").fetchall()
    assert rows == [("schema_version", str(SCHEMA_VERSION))]


def test_every_declared_field_is_a_column_with_the_declared_indexes(
    store: SQLiteStore, path: Path
) -> None:
    raw = _raw(path)
    for table in TABLES.values():
        columns = {row[1] for row in raw.execute(f"PRAGMA table_info([{table.name}])")}
        assert columns == {"id", "data", *(c.name for c in table.columns)}
        indexed = {
            tuple(row[2] for row in raw.execute(f"PRAGMA index_info([{index[1]}])"))
            for index in raw.execute(f"PRAGMA index_list([{table.name}])")
        }
        assert set(table.wanted_indexes()) == indexed - {("id",)}
        if table.index_each:
            assert {(c.name,) for c in table.columns} <= indexed


def _old_file(path: Path) -> None:
    """A file from before ``agents.team_id``/``status`` and ``environments.is_default`` existed."""
    raw = _raw(path)
    raw.execute("CREATE TABLE _meta (key TEXT PRIMARY KEY, value TEXT)")
    raw.execute("INSERT INTO _meta VALUES ('schema_version', '0')")
    raw.execute("CREATE TABLE agents (id TEXT PRIMARY KEY, data TEXT NOT NULL, name TEXT)")
    raw.execute("CREATE TABLE environments (id TEXT PRIMARY KEY, data TEXT NOT NULL)")
    agents: list[dict[str, Any]] = [
        {"id": "g1", "name": "one", "team_id": "t1", "status": "active"},
        {"id": "g2", "name": "two", "team_id": {"not": "text"}, "status": 5},
        {"id": "g3", "name": "three", "team_id": "t2"},
    ]
    for record in agents:
        row = (record["id"], json.dumps(record), record["name"])
        raw.execute("INSERT INTO agents VALUES (?, ?, ?)", row)
    for record in [{"id": "e1", "is_default": True}, {"id": "e2", "is_default": False}]:
        raw.execute("INSERT INTO environments VALUES (?, ?)", (record["id"], json.dumps(record)))
    raw.close()


def test_migration_adds_and_backfills_new_columns(path: Path) -> None:
    _old_file(path)
    store = SQLiteStore(path)
    assert [r["id"] for r in store.query("agents", [Filter("team_id", "eq", "t1")])] == ["g1"]
    # A value of another type than declared is not copied, as a put would not accept it.
    assert [r["id"] for r in store.query("agents", [Filter("team_id", "eq", None)])] == ["g2"]
    assert [r["id"] for r in store.query("agents", [Filter("status", "eq", None)])] == ["g2", "g3"]
    by_team = store.query("agents", [Filter("team_id", "ne", None)], [SortKey("team_id", True)])
    assert [r["id"] for r in by_team] == ["g3", "g1"]
    defaults = store.query("environments", [Filter("is_default", "eq", True)])
    assert defaults == [{"id": "e1", "is_default": True}]
    assert store.get("agents", "g2") == {
        "id": "g2", "name": "two", "team_id": {"not": "text"}, "status": 5
    }
    store.close()

    raw = _raw(path)
    assert raw.execute("SELECT value FROM _meta").fetchone() == (str(SCHEMA_VERSION),)
    columns = {row[1] for row in raw.execute("PRAGMA table_info(agents)")}
    assert {c.name for c in TABLES["agents"].columns} <= columns
    explain = "EXPLAIN QUERY PLAN SELECT id FROM agents WHERE team_id = 't1'"
    plan = " ".join(str(row) for row in raw.execute(explain))
    assert "USING INDEX" in plan
    assert raw.execute("SELECT count(*) FROM people").fetchone() == (0,)
    SQLiteStore(path).close()  # opening a migrated file again changes nothing
    assert raw.execute("SELECT count(*) FROM agents WHERE team_id IS NOT NULL").fetchone() == (2,)


# -- rows: a declared field is stored once ----------------------------------------------------
def _data(path: Path, table: str, record_id: str) -> Any:
    row = _raw(path).execute(f"SELECT data FROM [{table}] WHERE id = ?", (record_id,)).fetchone()
    return json.loads(row[0])


def test_a_declared_field_its_column_gives_back_as_it_is_is_stored_in_the_column_alone(
    store: SQLiteStore, path: Path
) -> None:
    run = {
        "id": "r1", "account_id": "a1", "status": "running", "total_cost": 0.25,
        "duration_ms": 120, "risk_level": None, "payload": {"status": "kept"},
    }
    store.put("agent_instances", run)
    # Each member keeps its place in the JSON, as null where its column holds it.
    assert _data(path, "agent_instances", "r1") == {
        "id": None, "account_id": None, "status": None, "total_cost": None,
        "duration_ms": None, "risk_level": None, "payload": {"status": "kept"},
    }
    read = store.get("agent_instances", "r1")
    assert read == run and list(read or {}) == list(run)
    assert store.query("agent_instances", [Filter("status", "eq", "running")]) == [run]


def test_a_value_its_column_would_change_stays_in_the_json(store: SQLiteStore, path: Path) -> None:
    # A boolean comes back from an integer column as 1 and an integer from a real one as a
    # float: the JSON keeps each as it is.
    store.put("environments", {"id": "e1", "is_default": True, "name": "prod"})
    store.put("agent_instances", {"id": "r1", "total_cost": 3, "status": "running"})
    assert _data(path, "environments", "e1") == {"id": None, "is_default": True, "name": None}
    assert _data(path, "agent_instances", "r1") == {"id": None, "total_cost": 3, "status": None}
    assert store.get("environments", "e1") == {"id": "e1", "is_default": True, "name": "prod"}
    read = store.get("agent_instances", "r1")
    assert read == {"id": "r1", "total_cost": 3, "status": "running"}
    assert read is not None and type(read["total_cost"]) is int


def test_rows_that_hold_the_whole_record_in_their_json_read_the_same(
    store: SQLiteStore, path: Path
) -> None:
    whole = {"id": "g1", "name": "one", "status": "active", "extra": [1, 2]}
    store.put("agents", {"id": "g1"})
    _raw(path).execute(
        "UPDATE agents SET data = ?, name = 'one', status = 'active' WHERE id = 'g1'",
        (json.dumps(whole),),
    )
    assert store.get("agents", "g1") == whole


def test_an_id_entry_is_kept_in_its_columns(store: SQLiteStore, path: Path) -> None:
    store.put("agents", {"id": "g1", "account_id": "a1"})
    assert _data(path, "ids", "g1") == {"id": None, "kind": None, "account_id": None}
    assert store.get("ids", "g1") == {"id": "g1", "kind": "agent", "account_id": "a1"}


def test_an_older_file_keeps_the_values_of_columns_no_longer_declared(path: Path) -> None:
    store = SQLiteStore(path)
    store.put("agents", {"id": "g1", "account_id": "a1", "name": "one"})
    store.close()
    raw = _raw(path)
    # As a version that declared a field the schema has since dropped left its rows.
    raw.execute("ALTER TABLE agents ADD COLUMN dropped TEXT")
    raw.execute(
        "UPDATE agents SET dropped = 'kept', data = json_set(data, '$.dropped', json('null'))"
    )
    raw.execute("UPDATE _meta SET value = ?", (str(SCHEMA_VERSION - 1),))
    # Its id triggers wrote the whole entry into the JSON.
    raw.execute("DROP TRIGGER agents_records_id")
    raw.execute(
        "CREATE TRIGGER agents_records_id AFTER INSERT ON agents BEGIN INSERT INTO ids"
        " (id, kind, account_id, data) VALUES (NEW.id, 'agent', NEW.account_id,"
        " json_object('id', NEW.id)) ON CONFLICT (id) DO NOTHING; END"
    )
    store = SQLiteStore(path)
    assert store.get("agents", "g1") == {
        "id": "g1", "account_id": "a1", "name": "one", "dropped": "kept"
    }
    store.put("agents", {"id": "g2", "account_id": "a1"})
    assert _data(path, "ids", "g2") == {"id": None, "kind": None, "account_id": None}
    store.close()


_COLUMN_VALUES = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**53), 2**53),
    st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=3),
)


def _exactly(value: Any) -> Any:
    """``value`` with its type and a float's sign made visible to ``==``."""
    if isinstance(value, dict):
        return {key: _exactly(item) for key, item in value.items()}
    if isinstance(value, float):
        return (float, repr(value))
    return (type(value), value)


@settings(max_examples=60, deadline=None)
@example(first={"total_cost": -0.0}, second={"total_cost": 0.0})
@example(first={"total_cost": 0.0}, second={"total_cost": -0.0})
@example(first={"duration_ms": 1}, second={"duration_ms": True})
@given(
    first=st.fixed_dictionaries({}, optional={
        "status": st.text(max_size=3), "total_cost": _COLUMN_VALUES,
        "duration_ms": st.integers(-(2**53), 2**53) | st.booleans(), "note": _COLUMN_VALUES,
    }),
    second=st.fixed_dictionaries({}, optional={
        "status": st.text(max_size=3), "total_cost": _COLUMN_VALUES,
        "duration_ms": st.integers(-(2**53), 2**53) | st.booleans(), "note": _COLUMN_VALUES,
    }),
)
def test_a_record_reads_back_exactly_as_it_was_put_and_rewritten(
    first: dict[str, Any], second: dict[str, Any]
) -> None:
    store = SQLiteStore(":memory:")
    try:
        run = {"id": "r1", **first}
        rewritten = {"id": "r1", **second}
        try:
            store.put("agent_instances", run)
        except ValueError:
            return  # a value its column cannot hold (a float in an integer column) is refused
        assert _exactly(store.get("agent_instances", "r1")) == _exactly(run)
        with store.transaction():
            assert store.get("agent_instances", "r1") is not None
            try:
                store.put("agent_instances", rewritten)
            except ValueError:
                rewritten = run
        read = store.get("agent_instances", "r1")
        assert _exactly(read) == _exactly(rewritten)
        assert list(read or {}) == list(rewritten)
    finally:
        store.close()


# -- rewrites: only what changed ---------------------------------------------------------------
def _traced(store: SQLiteStore) -> list[str]:
    seen: list[str] = []

    def note(sql: str) -> None:
        # SQLite reports each trigger program a statement enters (the store's own, keeping
        # the agents' day costs) with that statement's text: a repeat is not one more.
        if not seen or seen[-1] != sql:
            seen.append(sql)

    with store._use() as link:
        link.conn.set_trace_callback(note)
    return seen


def test_a_row_read_in_the_transaction_is_rewritten_by_its_changed_columns_alone(
    store: SQLiteStore,
) -> None:
    store.put("agent_instances", {"id": "r1", "status": "running", "total_cost": 1.0})
    seen = _traced(store)
    with store.transaction():
        run = store.get("agent_instances", "r1")
        assert run is not None
        store.put("agent_instances", {**run, "total_cost": 2.5, "label": "x"})
        store.put("agent_instances", {**run, "total_cost": 2.5, "label": "y"})
    updates = [sql for sql in seen if sql.startswith("UPDATE")]
    assert len(updates) == 2 and not any(sql.startswith("INSERT") for sql in seen)
    # The first sets the JSON and the cost; the second (the cost as the first left it) the
    # JSON alone: no index of an unchanged column is rewritten.
    assert "[total_cost] = 2.5" in updates[0] and "[status]" not in updates[0]
    assert "[total_cost]" not in updates[1]
    assert store.get("agent_instances", "r1") == {
        "id": "r1", "status": "running", "total_cost": 2.5, "label": "y"
    }


def test_a_rewrite_after_a_savepoint_was_rolled_back_writes_what_is_stored(
    store: SQLiteStore,
) -> None:
    store.put("agents", {"id": "g1", "name": "one", "status": "active"})
    with store.transaction():
        agent = store.get("agents", "g1")
        assert agent is not None
        with pytest.raises(RuntimeError), store.transaction():
            store.put("agents", {**agent, "status": "retired"})
            raise RuntimeError("taken back")
        # The same value again: the column holds the one from before the savepoint.
        store.put("agents", {**agent, "status": "retired", "name": "renamed"})
    assert store.get("agents", "g1") == {"id": "g1", "name": "renamed", "status": "retired"}
    assert [r["id"] for r in store.query("agents", [Filter("status", "eq", "retired")])] == ["g1"]


def test_a_row_gone_since_it_was_read_is_written_again(store: SQLiteStore) -> None:
    store.put("agents", {"id": "g1", "account_id": "a1"})
    with store.transaction():
        entry = store.get("ids", "g1")
        assert entry is not None
        # Its resource's delete takes the id's entry with it, through a trigger.
        store.delete("agents", "g1")
        store.put("ids", entry)
    assert store.get("ids", "g1") == {"id": "g1", "kind": "agent", "account_id": "a1"}


def _plan(raw: sqlite3.Connection, where: str) -> str:
    sql = f"EXPLAIN QUERY PLAN SELECT id FROM agent_spans WHERE {where} ORDER BY started_at"
    return " ".join(str(row) for row in raw.execute(sql))


def test_a_span_is_in_the_index_of_top_level_spans_or_of_children(
    store: SQLiteStore, path: Path
) -> None:
    store.put("agent_spans", {"id": "s1", "account_id": "a", "agent_instance_id": "r"})
    store.put("agent_spans", {"id": "s2", "account_id": "a", "agent_instance_id": "r",
                              "parent_span_id": "s1"})
    raw = _raw(path)
    top = "idx_agent_spans_account_id_agent_instance_id_started_at_null_parent_span_id"
    children = "idx_agent_spans_parent_span_id_started_at_set_parent_span_id"
    # Each partial index holds the rows its condition names, and nothing else.
    assert raw.execute(f"SELECT id FROM agent_spans INDEXED BY [{top}]"
                       " WHERE account_id = 'a' AND agent_instance_id = 'r'"
                       " AND parent_span_id IS NULL").fetchall() == [("s1",)]
    assert raw.execute(f"SELECT id FROM agent_spans INDEXED BY [{children}]"
                       " WHERE parent_span_id = 's1'").fetchall() == [("s2",)]
    assert top in _plan(raw, "account_id = 'a' AND agent_instance_id = 'r'"
                             " AND [parent_span_id] IS NULL")
    assert children in _plan(raw, "account_id = 'a' AND [parent_span_id] = 's1'")
    assert children in _plan(raw, "[parent_span_id] = 's1' AND agent_instance_id != 'r'")


def test_indexes_of_an_older_layout_are_replaced(path: Path) -> None:
    SQLiteStore(path).close()
    raw = _raw(path)
    # The spans' indexes as they were before the partial ones.
    raw.execute("DROP INDEX idx_agent_spans_parent_span_id_started_at_set_parent_span_id")
    raw.execute("CREATE INDEX idx_agent_spans_parent_span_id ON agent_spans (parent_span_id)")
    raw.execute("CREATE INDEX idx_agent_spans_account_id_agent_instance_id_parent_span_id"
                "_started_at ON agent_spans (account_id, agent_instance_id, parent_span_id,"
                " started_at)")
    raw.execute("CREATE INDEX kept_by_an_operator ON agent_spans (schema_name)")
    SQLiteStore(path).close()
    names = {row[1] for row in raw.execute("PRAGMA index_list(agent_spans)")}
    assert names == {
        "sqlite_autoindex_agent_spans_1", "kept_by_an_operator",
        "idx_agent_spans_agent_instance_id_started_at", "idx_agent_spans_agent_id_started_at",
        "idx_agent_spans_parent_span_id_started_at_set_parent_span_id",
        "idx_agent_spans_account_id_agent_instance_id_started_at_null_parent_span_id",
        "idx_agent_spans_status_account_id_agent_instance_id_started_at",
    }


def test_a_newer_schema_is_refused(store: SQLiteStore, path: Path) -> None:
    store.put("teams", {"id": "t1"})
    store.close()
    _raw(path).execute("UPDATE _meta SET value = ?", (str(SCHEMA_VERSION + 1),))
    with pytest.raises(RuntimeError, match="newer"):
        SQLiteStore(path)
    assert _raw(path).execute("SELECT value FROM _meta").fetchone() == (str(SCHEMA_VERSION + 1),)


def test_bad_busy_timeouts_are_refused(path: Path) -> None:
    for bad in (-1, 1.5, True):
        with pytest.raises(ValueError, match="busy_timeout_ms"):
            SQLiteStore(path, busy_timeout_ms=bad)  # type: ignore[arg-type]


# -- busy and locked --------------------------------------------------------------------------
def test_busy_database_is_temporarily_unavailable(path: Path) -> None:
    store = SQLiteStore(path, busy_timeout_ms=50)
    store.put("teams", {"id": "before"})
    blocker = _raw(path)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(TemporarilyUnavailable) as raised:
            store.put("teams", {"id": "t1"})
        assert raised.value.retry_after_ms == RETRY_AFTER_MS
        assert raised.value.to_payload()["retry_after_ms"] == RETRY_AFTER_MS
        with pytest.raises(TemporarilyUnavailable), store.transaction():
            store.put("teams", {"id": "t2"})
        # WAL readers are not blocked by a writer.
        assert [r["id"] for r in store.query("teams")] == ["before"]
    finally:
        blocker.execute("ROLLBACK")
    with store.transaction():
        store.put("teams", {"id": "after"})
    assert [r["id"] for r in store.query("teams")] == ["after", "before"]
    store.close()


def test_a_writer_waits_for_the_lock_within_busy_timeout(store: SQLiteStore, path: Path) -> None:
    blocker = _raw(path)
    blocker.execute("BEGIN IMMEDIATE")
    blocker.execute("INSERT INTO teams (id, data) VALUES ('first', '{\"id\": \"first\"}')")
    releaser = threading.Timer(0.2, lambda: blocker.execute("COMMIT"))
    releaser.start()
    started = time.monotonic()
    _increment(store, "second")
    assert time.monotonic() - started >= 0.15
    releaser.join()
    assert [r["id"] for r in store.query("teams")] == ["counter", "first", "second"]


def test_other_driver_errors_are_not_translated(store: SQLiteStore, path: Path) -> None:
    _raw(path).execute("DROP TABLE teams")
    with pytest.raises(sqlite3.OperationalError, match="no such table"):
        store.get("teams", "t1")


# -- concurrency ------------------------------------------------------------------------------
def test_threads_writing_through_one_store_lose_nothing(store: SQLiteStore) -> None:
    _run_threads(4, lambda n: _increments(store, str(n), 100))
    assert store.get("teams", "counter") == {"id": "counter", "value": 400}
    assert store.count("teams") == 401


@pytest.mark.parametrize("where", ["memory", "file"])
def test_other_threads_never_see_uncommitted_writes(where: str, path: Path) -> None:
    store = SQLiteStore(":memory:" if where == "memory" else path)
    written, seen = threading.Event(), []

    def write_then_fail(n: int) -> None:
        if n == 0:
            with pytest.raises(RuntimeError), store.transaction():
                store.put("teams", {"id": "doomed"})
                written.set()
                time.sleep(0.1)
                raise RuntimeError("roll back")
        else:
            written.wait()
            seen.append(store.get("teams", "doomed"))

    _run_threads(2, write_then_fail)
    assert seen == [None]
    assert store.count("teams") == 0
    store.close()


def _open_file_descriptors() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs /proc")
def test_connections_of_ended_threads_are_closed(store: SQLiteStore) -> None:
    store.put("teams", {"id": "warm"})
    before = _open_file_descriptors()
    for n in range(40):
        thread = threading.Thread(target=store.put, args=("teams", {"id": f"t{n}"}))
        thread.start()
        thread.join()
    assert _open_file_descriptors() - before <= 4
    assert store.count("teams") == 41


def test_two_stores_on_one_file_interleave_without_loss(path: Path) -> None:
    first, second = SQLiteStore(path, busy_timeout_ms=50), SQLiteStore(path, busy_timeout_ms=50)
    with first.transaction():
        first.put("teams", {"id": "a1"})
        with pytest.raises(TemporarilyUnavailable):
            second.put("teams", {"id": "b1"})
        assert second.get("teams", "a1") is None
    assert second.get("teams", "a1") == {"id": "a1"}
    with second.transaction():
        second.put("teams", {"id": "b1"})
        assert first.get("teams", "b1") is None
    assert [r["id"] for r in first.query("teams")] == ["a1", "b1"]
    first.close()
    second.close()

    stores = [SQLiteStore(path), SQLiteStore(path)]
    _run_threads(2, lambda n: _increments(stores[n], str(n), 100))
    for opened in stores:
        assert opened.get("teams", "counter") == {"id": "counter", "value": 200}
        assert opened.count("teams") == 203
        opened.close()


def _write_until_killed(path: str, acks: Connection) -> None:
    """Commit numbered pairs of records, acknowledging each commit, until killed."""
    store = SQLiteStore(path)
    number = 0
    while True:
        with store.transaction():
            store.put("teams", {"id": f"{number:06d}-a", "name": "pair"})
            store.put("teams", {"id": f"{number:06d}-b", "name": "pair", "pad": "x" * 2000})
        acks.send(number)
        number += 1


def test_a_killed_writer_loses_no_committed_row(path: Path) -> None:
    context = multiprocessing.get_context("spawn")
    for trial in range(3):
        trial_path = path.with_name(f"killed-{trial}.db")
        receiver, sender = context.Pipe(duplex=False)
        writer = context.Process(target=_write_until_killed, args=(str(trial_path), sender))
        writer.start()
        acknowledged = -1
        while acknowledged < 20 * (trial + 1):
            assert receiver.poll(30), "the writer stopped acknowledging"
            acknowledged = receiver.recv()
        assert writer.pid is not None
        os.kill(writer.pid, signal.SIGKILL)
        writer.join()
        assert writer.exitcode == -signal.SIGKILL

        store = SQLiteStore(trial_path)
        ids = [r["id"] for r in store.iterate("teams")]
        numbers = sorted({int(i.split("-")[0]) for i in ids})
        assert numbers == list(range(len(numbers)))
        assert len(numbers) > acknowledged
        assert ids == [f"{n:06d}-{half}" for n in numbers for half in "ab"]
        store.close()
        assert _raw(trial_path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_indexes_no_longer_declared_are_dropped(path: Path) -> None:
    SQLiteStore(path).close()
    raw = _raw(path)
    raw.execute("CREATE INDEX idx_agent_spans_schema_name ON agent_spans (schema_name)")
    raw.close()
    SQLiteStore(path).close()
    names = {row[1] for row in _raw(path).execute("PRAGMA index_list([agent_spans])")}
    assert "idx_agent_spans_schema_name" not in names
    assert "idx_agent_spans_agent_instance_id_started_at" in names


@pytest.mark.parametrize("table", ["agents", "agent_instances"])
def test_a_rewrite_that_moves_only_a_last_activity_writes_one_page(
    store: SQLiteStore, path: Path, table: str
) -> None:
    # Every span that moves its run's last activity rewrites the run and its agent: an index
    # on the moved field (or on every field) would be a page more, each, in every commit.
    record = {
        "id": "r1", "account_id": "a1", "agent_id": "g1", "status": "active", "name": "n",
        "external_identifier": "x", "last_activity_span_at": "2026-11-21T16:42:00.000000Z",
    }
    store.put(table, record)
    raw = _raw(path)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with store.transaction():
        store.put(table, {**record, "last_activity_span_at": "2026-11-21T16:42:01.000000Z"})
    frames = raw.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchone()[1]
    assert frames == 1


def _temporary_files() -> list[str]:
    """The temporary files SQLite holds open in this process (made and unlinked at once)."""
    found = []
    for number in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{number}")
        except OSError:
            continue
        if "etilqs_" in target:
            found.append(target)
    return found


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="needs Linux's /proc")
def test_a_long_transaction_keeps_its_statements_undo_pages_in_memory(store: SQLiteStore) -> None:
    # A statement of a transaction keeps the pages it changes as they were, to take it back
    # alone: past 64 KiB, SQLite's default moves them to a temporary file, which then takes
    # every later statement's for the rest of the transaction (a bulk request, an OTLP step).
    seen: list[str] = []
    with store.transaction():
        for number in range(400):
            store.put("agent_spans", {
                "id": f"span-{number:06d}", "account_id": "a1", "agent_id": "g1",
                "agent_instance_id": "r1", "status": "complete",
                "started_at": f"2026-11-21T16:42:00.{number:06d}Z", "payload": "x" * 1500,
            })
            seen += _temporary_files()
    assert seen == []


def test_a_migration_keeps_its_undo_pages_in_files(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A migration's statements may change every row of a table, more than memory holds.
    _old_file(path)
    seen: list[int] = []
    migrate_table = sqlite_adapter._migrate_table

    def watched(db: Any, table: Any, *, upgrading: bool) -> None:
        seen.append(db.conn.execute("PRAGMA temp_store").fetchone()[0])
        migrate_table(db, table, upgrading=upgrading)

    monkeypatch.setattr(sqlite_adapter, "_migrate_table", watched)
    store = SQLiteStore(path)
    try:
        # SQLite's default as it was built (0) while migrating, memory (2) for the writes after.
        assert seen and set(seen) == {0}
        with store._use() as link:
            assert link.conn.execute("PRAGMA temp_store").fetchone() == (2,)
    finally:
        store.close()


def _checkpointers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "governance-sqlite-checkpoint"]


def test_the_wal_is_checkpointed_by_the_stores_thread_not_by_commits(path: Path) -> None:
    store = SQLiteStore(path)
    try:
        with store._use() as link:
            (pages,) = link.conn.execute("PRAGMA wal_autocheckpoint").fetchone()
        # Commits leave checkpoints to the thread (their fallback is far above one commit).
        assert pages >= 10_000
        with store.transaction():
            for number in range(500):
                store.put("agents", {"id": f"agent-{number:04d}", "name": "x" * 500})
        deadline = time.monotonic() + 10
        while True:
            # An immutable reader sees the database file only, never the WAL: the rows are
            # there once a checkpoint has copied them.
            probe = sqlite3.connect(f"file:{path}?immutable=1", uri=True)
            try:
                (in_file,) = probe.execute("SELECT count(*) FROM agents").fetchone()
            # Not even the table is in the file yet, or a checkpoint is writing the pages read
            # (an immutable reader takes no lock, so it may see them half written).
            except sqlite3.DatabaseError:
                in_file = 0
            probe.close()
            if in_file == 500 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert in_file == 500
    finally:
        store.close()


def test_closing_a_file_store_ends_its_checkpointer(path: Path) -> None:
    before = len(_checkpointers())
    store = SQLiteStore(path)
    assert len(_checkpointers()) == before + 1
    store.close()
    assert len(_checkpointers()) == before


def test_a_memory_store_has_no_checkpointer() -> None:
    before = len(_checkpointers())
    store = SQLiteStore(":memory:")
    assert len(_checkpointers()) == before
    store.close()


def test_a_busy_database_is_tried_again_within_milliseconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from governance_core.storage import sqlite as adapter

    pauses: list[float] = []
    monkeypatch.setattr(adapter.time, "sleep", pauses.append)
    busy = sqlite3.OperationalError("database is locked")
    busy.sqlite_errorcode = sqlite3.SQLITE_BUSY
    tries = iter([busy] * 12 + [None])

    def attempt() -> str:
        error = next(tries)
        if error is not None:
            raise error
        return "done"

    assert adapter._patiently(attempt, timeout_s=5) == "done"
    # SQLite's own busy handler would have slept 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100 ms.
    assert len(pauses) == 12
    assert max(pauses) <= 0.004
    assert sum(pauses) < 0.05


def test_an_agents_runs_of_a_day_are_read_from_their_own_index(
    store: SQLiteStore, path: Path
) -> None:
    # A daily budget sums the cost of the agent's runs started today: with thousands of runs
    # behind it, a decide must not read them all.
    for day in range(1, 29):
        store.put("agent_instances", {
            "id": f"r{day}", "account_id": "a", "agent_id": "g", "status": "completed",
            "started_at": f"2026-02-{day:02d}T10:00:00.000000Z", "total_cost": 1.0,
        })
    plan = " ".join(str(row) for row in _raw(path).execute(
        "EXPLAIN QUERY PLAN SELECT count(*), sum(total_cost) FROM agent_instances"
        " WHERE agent_id = 'g' AND started_at >= '2026-02-28T00:00:00.000000Z'"
    ))
    assert "idx_agent_instances_agent_id_started_at" in plan, plan
    rows = store.aggregate("agent_instances", sums=["total_cost"], filters=[
        Filter("agent_id", "eq", "g"), Filter("started_at", "ge", "2026-02-28T00:00:00.000000Z"),
    ])
    assert [(row.count, row.sums) for row in rows] == [(1, (1.0,))]


def test_many_records_are_read_together_past_sqlites_limit_of_one_compound_select(
    store: SQLiteStore,
) -> None:
    # SQLite refuses a UNION ALL of more than 500 selects: get_many reads in several.
    for number in range(0, 1200, 2):
        store.put("teams", {"id": f"t{number:04d}", "name": str(number)})
    keys = [("teams", f"t{number:04d}") for number in range(1200)]
    keys.insert(700, ("people", "nobody"))
    found = store.get_many(keys)
    assert found == [store.get(table, record_id) for table, record_id in keys]
    assert sum(record is not None for record in found) == 600
