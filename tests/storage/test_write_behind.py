"""What the write-behind store keeps, and that keeping it changes nothing a caller sees."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from governance_core.storage import SQLiteStore
from governance_core.storage.memory import MemoryStore
from governance_core.storage.protocol import Filter, Query, SortKey
from governance_core.storage.write_behind import WriteBehindStore


class CountingStore(SQLiteStore):
    """An in-memory SQLite store that counts its gets and the records it writes."""

    def __init__(self) -> None:
        super().__init__(":memory:")
        self.gets = 0
        self.puts = 0
        self.queries = 0

    def query(self, table: str, *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
        self.queries += 1
        return super().query(table, *args, **kwargs)

    def get(self, table: str, record_id: str) -> dict[str, object] | None:
        self.gets += 1
        return super().get(table, record_id)

    def write_prepared(self, table: str, prepared: Sequence[list[Any]]) -> None:
        # Every write ends here: a put, and the write-behind store's writes at commit.
        self.puts += len(prepared)
        super().write_prepared(table, prepared)


@pytest.fixture
def inner() -> Iterator[CountingStore]:
    store = CountingStore()
    store.put("agents", {"id": "a1", "name": "first", "account_id": "acc"})
    store.gets = store.puts = 0
    yield store
    store.close()


def test_a_record_rewritten_in_one_transaction_is_read_once_and_written_once(
    inner: CountingStore,
) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        for number in range(50):
            record = store.get("agents", "a1")
            assert record is not None
            store.put("agents", {**record, "name": f"name {number}"})
    assert (inner.gets, inner.puts) == (1, 1)
    assert inner.get("agents", "a1") == {"id": "a1", "name": "name 49", "account_id": "acc"}


def test_a_failed_savepoint_takes_back_what_it_kept(inner: CountingStore) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        store.put("agents", {"id": "a1", "name": "kept", "account_id": "acc"})
        with pytest.raises(RuntimeError), store.transaction():
            store.put("agents", {"id": "a1", "name": "taken back", "account_id": "acc"})
            store.put("agents", {"id": "a2", "name": "never", "account_id": "acc"})
            raise RuntimeError
        assert store.get("agents", "a1") == {"id": "a1", "name": "kept", "account_id": "acc"}
        assert store.get("agents", "a2") is None
    assert inner.get("agents", "a1") == {"id": "a1", "name": "kept", "account_id": "acc"}
    assert inner.get("agents", "a2") is None


def test_a_savepoint_that_wrote_its_changes_and_failed_leaves_them_to_the_commit(
    inner: CountingStore,
) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        store.put("agents", {"id": "a1", "name": "kept", "account_id": "acc"})
        with pytest.raises(RuntimeError), store.transaction():
            # The query writes the kept change inside the savepoint, whose failure undoes it.
            assert [r["name"] for r in store.query("agents", [])] == ["kept"]
            raise RuntimeError
    assert inner.get("agents", "a1") == {"id": "a1", "name": "kept", "account_id": "acc"}


def test_queries_counts_and_iterations_see_kept_changes(inner: CountingStore) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        store.put("agents", {"id": "a2", "name": "second", "account_id": "acc"})
        by_account = [Filter("account_id", "eq", "acc")]
        assert store.count("agents", by_account) == 2
        store.put("agents", {"id": "a3", "name": "third", "account_id": "acc"})
        assert [r["id"] for r in store.iterate("agents", by_account)] == ["a1", "a2", "a3"]
        store.put("agents", {"id": "a3", "name": "third", "account_id": "other"})
        assert [r["id"] for r in store.query("agents", by_account)] == ["a1", "a2"]


def test_a_failed_transaction_writes_nothing(inner: CountingStore) -> None:
    store = WriteBehindStore(inner)
    with pytest.raises(RuntimeError), store.transaction():
        store.put("agents", {"id": "a1", "name": "lost", "account_id": "acc"})
        raise RuntimeError
    assert inner.puts == 0
    with store.transaction():
        # Nothing of the failed transaction is kept for the next one.
        assert store.get("agents", "a1") == {"id": "a1", "name": "first", "account_id": "acc"}


def test_a_delete_of_a_record_not_yet_written_is_a_delete(inner: CountingStore) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        store.put("agents", {"id": "a2", "name": "new", "account_id": "acc"})
        assert store.delete("agents", "a2") is True
        assert store.get("agents", "a2") is None
        assert store.delete("agents", "a2") is False
    assert inner.get("agents", "a2") is None


def test_outside_a_transaction_everything_passes_through(inner: CountingStore) -> None:
    store = WriteBehindStore(inner)
    store.put("agents", {"id": "a1", "name": "direct", "account_id": "acc"})
    assert inner.puts == 1
    assert store.get("agents", "a1") == {"id": "a1", "name": "direct", "account_id": "acc"}
    assert store.get("agents", "a1") == {"id": "a1", "name": "direct", "account_id": "acc"}
    assert inner.gets == 2


def test_each_thread_keeps_its_own_transaction(tmp_path: object) -> None:
    inner = SQLiteStore(f"{tmp_path}/threads.db")
    store = WriteBehindStore(inner)
    inner.put("agents", {"id": "a1", "name": "stored", "account_id": "acc"})
    seen: list[object] = []
    kept = threading.Event()
    looked = threading.Event()

    def writer() -> None:
        with store.transaction():
            store.put("agents", {"id": "a1", "name": "unwritten", "account_id": "acc"})
            kept.set()
            looked.wait(5)

    thread = threading.Thread(target=writer)
    thread.start()
    kept.wait(5)
    # Another thread, outside any transaction, sees only what is stored.
    seen.append(store.get("agents", "a1"))
    looked.set()
    thread.join()
    assert seen == [{"id": "a1", "name": "stored", "account_id": "acc"}]
    assert inner.get("agents", "a1") == {"id": "a1", "name": "unwritten", "account_id": "acc"}
    inner.close()


@pytest.mark.parametrize(
    "record",
    [{"name": "no id"}, {"id": 5}, ["not", "a", "dict"], {"id": "t1", "name": 5},
     {"id": "t1", "score": float("nan")}],
)
def test_a_record_the_store_would_refuse_fails_its_put_inside_a_transaction(
    inner: CountingStore, record: object
) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        with pytest.raises(ValueError):
            store.put("teams", record)  # type: ignore[arg-type]
        store.put("teams", {"id": "t2", "name": "kept"})
    assert [r["id"] for r in inner.query("teams")] == ["t2"]


# -- keeping only batches -----------------------------------------------------------------------
def test_a_plain_transaction_is_the_inner_stores_own_when_only_batches_keep(
    inner: CountingStore,
) -> None:
    store = WriteBehindStore(inner, every_transaction=False)
    with store.transaction():
        record = store.get("agents", "a1")
        assert record is not None
        store.put("agents", {**record, "name": "at once"})
        # Written at once, not kept: the inner store holds it inside the transaction.
        assert inner.puts == 1
        assert inner.get("agents", "a1") == {"id": "a1", "name": "at once", "account_id": "acc"}
        with pytest.raises(RuntimeError), store.transaction():
            store.put("agents", {"id": "a2", "name": "never", "account_id": "acc"})
            raise RuntimeError
    assert inner.get("agents", "a2") is None
    assert [r["name"] for r in inner.query("agents")] == ["at once"]


def test_a_batch_keeps_its_records_when_only_batches_keep(inner: CountingStore) -> None:
    store = WriteBehindStore(inner, every_transaction=False)
    with store.batch():
        for number in range(50):
            record = store.get("agents", "a1")
            assert record is not None
            with store.transaction():
                store.put("agents", {**record, "name": f"name {number}"})
        with pytest.raises(RuntimeError), store.transaction():
            store.put("agents", {"id": "a2", "name": "taken back", "account_id": "acc"})
            raise RuntimeError
    assert (inner.gets, inner.puts) == (1, 1)
    assert inner.get("agents", "a1") == {"id": "a1", "name": "name 49", "account_id": "acc"}
    assert inner.get("agents", "a2") is None


def test_a_batch_inside_a_plain_transaction_is_a_savepoint_of_it(inner: CountingStore) -> None:
    store = WriteBehindStore(inner, every_transaction=False)
    with store.transaction():
        store.put("agents", {"id": "a2", "name": "plain", "account_id": "acc"})
        with pytest.raises(RuntimeError), store.batch():
            store.put("agents", {"id": "a3", "name": "taken back", "account_id": "acc"})
            raise RuntimeError
        with store.batch():
            store.put("agents", {"id": "a4", "name": "batched", "account_id": "acc"})
            assert inner.get("agents", "a4") is None
        # Passed on as the batch ended, inside the transaction.
        assert inner.get("agents", "a4") == {"id": "a4", "name": "batched", "account_id": "acc"}
    assert [r["id"] for r in inner.query("agents")] == ["a1", "a2", "a4"]


def test_a_look_up_by_equality_matches_kept_records_without_writing_them(
    inner: CountingStore,
) -> None:
    inner.put("agents", {"id": "a2", "name": "stored", "account_id": "acc"})
    inner.put("agents", {"id": "a4", "name": "other", "account_id": "acc"})
    inner.puts = 0
    store = WriteBehindStore(inner)
    with store.transaction():
        # a1 is rewritten away from the filter, a3 and a5 are new: only memory knows.
        store.put("agents", {"id": "a1", "name": "renamed", "account_id": "acc"})
        store.put("agents", {"id": "a3", "name": "stored", "account_id": "acc"})
        store.put("agents", {"id": "a5", "name": "stored", "account_id": "other"})
        named = [Filter("name", "eq", "stored")]
        assert [r["id"] for r in store.query("agents", named)] == ["a2", "a3", "a5"]
        assert [r["id"] for r in store.query("agents", named, limit=2)] == ["a2", "a3"]
        assert [r["id"] for r in store.query(
            "agents", [*named, Filter("account_id", "ne", "other")]
        )] == ["a2", "a3"]
        assert [r["id"] for r in store.query(
            "agents", [Filter("name", "in", ["first", "renamed"])]
        )] == ["a1"]
        assert inner.puts == 0
        # A sorted query sees them too: the kept records are passed on first.
        sorted_ = store.query("agents", named, sort=[SortKey("account_id", descending=True)])
        assert [r["id"] for r in sorted_] == ["a5", "a2", "a3"]
        assert inner.puts == 3
    assert [r["id"] for r in inner.query("agents", [Filter("name", "eq", "stored")])] == [
        "a2", "a3", "a5",
    ]


def test_records_known_absent_are_not_read_and_a_put_of_one_is_found(
    inner: CountingStore,
) -> None:
    store = WriteBehindStore(inner)
    store.know_absent("agents", ["a2"])  # outside a transaction: nothing to keep it in
    assert store.get("agents", "a2") is None and inner.gets == 1
    with store.transaction():
        assert store.get("agents", "a1") is not None and inner.gets == 2
        store.know_absent("agents", ["a1", "a3", "a4"])
        # A record the transaction holds already stays as it was read.
        assert store.get("agents", "a1") is not None
        assert store.get("agents", "a3") is None and store.get("agents", "a4") is None
        assert inner.gets == 2
        store.put("agents", {"id": "a3", "name": "third", "account_id": "acc"})
        assert store.get("agents", "a3") == {"id": "a3", "name": "third", "account_id": "acc"}
    assert inner.get("agents", "a3") is not None
    with store.transaction():
        # What was known absent lasts for its transaction only.
        assert store.get("agents", "a4") is None and inner.gets == 4


class ManyGettingStore(CountingStore):
    """A :class:`CountingStore` that also reads several records at once, noting each call."""

    def __init__(self) -> None:
        super().__init__()
        self.many: list[list[tuple[str, str]]] = []

    def get_many(self, keys: Sequence[tuple[str, str]]) -> list[dict[str, object] | None]:
        self.many.append(list(keys))
        return [SQLiteStore.get(self, table, record_id) for table, record_id in keys]


def test_records_read_ahead_together_are_answered_from_memory() -> None:
    inner = ManyGettingStore()
    inner.put("agents", {"id": "a1", "name": "first", "account_id": "acc"})
    store = WriteBehindStore(inner)
    store.read_ahead_records([("agents", "a1")])  # outside a transaction: nothing kept
    assert inner.many == []
    with store.transaction():
        assert store.get("agents", "a1") is not None and inner.gets == 1
        store.read_ahead_records([
            ("agents", "a1"), ("agents", "a9"), ("teams", "t1"), ("agents", "a9"),
        ])
        # Each key once, and none the transaction holds already.
        assert inner.many == [[("agents", "a9"), ("teams", "t1")]]
        assert store.get("agents", "a1") == {"id": "a1", "name": "first", "account_id": "acc"}
        assert store.get("agents", "a9") is None and store.get("teams", "t1") is None
        assert inner.gets == 1
        # What was read, found or not, is not read again.
        store.read_ahead_records([("agents", "a1"), ("agents", "a9"), ("teams", "t1")])
        assert len(inner.many) == 1
    inner.close()


class TogetherReadingStore(ManyGettingStore):
    """An in-memory SQLite store that answers gets and queries together, counting each."""

    def __init__(self) -> None:
        super().__init__()
        self.together: list[tuple[list[tuple[str, str]], list[Query]]] = []

    def read_together(
        self, keys: Sequence[tuple[str, str]], queries: Sequence[Query]
    ) -> tuple[list[dict[str, object] | None], list[list[dict[str, Any]]]]:
        self.together.append((list(keys), list(queries)))
        return (
            [SQLiteStore.get(self, table, record_id) for table, record_id in keys],
            [SQLiteStore.query(self, q.table, q.filters, q.sort, q.offset, q.limit)
             for q in queries],
        )


def _run(run_id: str, cost: float) -> dict[str, object]:
    return {"id": run_id, "account_id": "acc", "agent_id": "g1", "status": "running",
            "started_at": "2026-01-02T03:04:05Z", "total_cost": cost}


def test_queries_and_day_costs_read_ahead_together_are_answered_from_memory() -> None:
    inner = TogetherReadingStore()
    inner.put("agents", {"id": "a1", "name": "first", "account_id": "acc"})
    inner.put("agent_instances", _run("r1", 2.5))
    store = WriteBehindStore(inner)
    named = Query("agents", (Filter("name", "eq", "first"),), (SortKey("id"),), limit=5)
    day = ("agent_day_costs", "g1/2026-01-02")
    with store.transaction():
        store.read_ahead_records([("agents", "a1"), day], [named])
        assert inner.together == [([("agents", "a1"), day], [named])]
        inner.queries = inner.gets = 0
        assert [r["id"] for r in store.query("agents", list(named.filters), [SortKey("id")],
                                            limit=5)] == ["a1"]
        assert store.get("agents", "a1") == {"id": "a1", "name": "first", "account_id": "acc"}
        assert (store.get(*day) or {})["total_cost"] == 2.5
        assert (inner.queries, inner.gets) == (0, 0)
        # Another query of the table is the store's to answer.
        assert store.query("agents", list(named.filters)) != [] and inner.queries == 1
        # What is known is not read again.
        store.read_ahead_records([("agents", "a1"), day], [named])
        assert len(inner.together) == 1
        # A write to the table: the query is asked again; a run written: the day cost too,
        # which the store's triggers moved.
        store.put("agents", {"id": "a0", "name": "first", "account_id": "acc"})
        store.put("agent_instances", _run("r2", 1.0))
        assert [r["id"] for r in store.query("agents", list(named.filters), [SortKey("id")],
                                            limit=5)] == ["a0", "a1"]
        assert (store.get(*day) or {})["total_cost"] == 3.5
        assert inner.queries == 2
        # With a run kept unwritten, a day cost is not read ahead: the store would not count
        # the run in it yet.
        store.put("agent_instances", _run("r3", 1.0))
        store.read_ahead_records([day], [])
        assert len(inner.together) == 1 and len(inner.many) == 0
        assert (store.get(*day) or {})["total_cost"] == 4.5
    with store.transaction():
        # Nothing is kept for the next transaction.
        store.read_ahead_records([day], [named])
        assert len(inner.together) == 2
        with pytest.raises(RuntimeError), store.transaction():
            store.put("agent_instances", _run("r4", 10.0))
            assert (store.get(*day) or {})["total_cost"] == 14.5
            # Read ahead once the run is written: the savepoint's failure takes it back.
            store.read_ahead_records([day], [named])
            assert len(inner.together) == 2 and inner.many == [[day]]
            raise RuntimeError("the savepoint fails")
        assert (store.get(*day) or {})["total_cost"] == 4.5
    inner.close()


class CountingMemoryStore(MemoryStore):
    """A memory store (it reads one record at a time) that counts its gets."""

    def __init__(self) -> None:
        super().__init__()
        self.gets = 0

    def get(self, table: str, record_id: str) -> dict[str, object] | None:
        self.gets += 1
        return super().get(table, record_id)


def test_a_store_that_reads_one_record_at_a_time_reads_nothing_ahead() -> None:
    inner = CountingMemoryStore()
    inner.put("agents", {"id": "a1", "name": "first", "account_id": "acc"})
    store = WriteBehindStore(inner)
    with store.transaction():
        store.read_ahead_records([("agents", "a1"), ("agents", "a2")])
        assert inner.gets == 0
        assert store.get("agents", "a1") is not None and inner.gets == 1


def test_sqlite_reads_a_transactions_first_records_together_for_its_next_gets(
    inner: CountingStore,
) -> None:
    # Not kept by the wrapper (a single write on SQLite): SQLite reads them itself.
    store = WriteBehindStore(inner, every_transaction=False)
    inner.put("agents", {"id": "a3", "name": "third", "account_id": "acc"})
    reads: list[str] = []
    with inner._use() as link:
        link.conn.set_trace_callback(
            lambda sql: reads.append(sql) if sql.startswith("SELECT") else None
        )
    with store.transaction():
        store.read_ahead_records([("agents", "a1"), ("agents", "a2"), ("agents", "a3")])
        assert len(reads) == 1
        assert store.get("agents", "a1") == {"id": "a1", "name": "first", "account_id": "acc"}
        assert store.get("agents", "a2") is None
        assert len(reads) == 1
        # A record the transaction writes is read as written, not as it was read ahead.
        store.put("agents", {"id": "a3", "name": "renamed", "account_id": "acc"})
        assert store.get("agents", "a3") == {"id": "a3", "name": "renamed", "account_id": "acc"}
        # Each read ahead answers one get: the next reads the store.
        assert store.get("agents", "a1") is not None and len(reads) == 3
    with store.transaction():
        # Outside a transaction nothing was kept: read again, as it stands.
        assert store.get("agents", "a1") is not None
    with store.transaction():
        store.read_ahead_records([("agents", "a1")])
        inner.put("agents", {"id": "a1", "name": "moved", "account_id": "acc"})
        assert store.get("agents", "a1") == {"id": "a1", "name": "moved", "account_id": "acc"}


def test_a_query_asked_again_in_a_transaction_is_answered_from_memory_until_a_write(
    inner: CountingStore,
) -> None:
    store = WriteBehindStore(inner)
    named = [Filter("account_id", "eq", "acc"), Filter("name", "eq", "first")]
    with store.transaction():
        for _ in range(3):
            assert [r["id"] for r in store.query("agents", named, limit=1)] == ["a1"]
        assert inner.queries == 1
        # A write to the table: asked again, the store answers (with the kept write).
        store.put("agents", {"id": "a0", "name": "first", "account_id": "acc"})
        assert [r["id"] for r in store.query("agents", named)] == ["a0", "a1"]
        assert inner.queries == 2
        # A write to another table leaves the answer standing.
        store.put("teams", {"id": "t1"})
        assert [r["id"] for r in store.query("agents", named)] == ["a0", "a1"]
        assert inner.queries == 2
        store.delete("agents", "a0")
        assert [r["id"] for r in store.query("agents", named)] == ["a1"]
        assert inner.queries == 3
    # The next transaction asks the store again: another writer may have written since.
    inner.put("agents", {"id": "a2", "name": "first", "account_id": "acc"})
    with store.transaction():
        assert [r["id"] for r in store.query("agents", named)] == ["a1", "a2"]


def test_a_savepoint_taken_back_takes_back_the_answers_given_in_it(
    inner: CountingStore,
) -> None:
    store = WriteBehindStore(inner)
    named = [Filter("name", "eq", "first")]
    with store.transaction():
        with pytest.raises(RuntimeError), store.transaction():
            store.put("agents", {"id": "a0", "name": "first", "account_id": "acc"})
            assert [r["id"] for r in store.query("agents", named)] == ["a0", "a1"]
            raise RuntimeError("the savepoint fails")
        assert [r["id"] for r in store.query("agents", named)] == ["a1"]


def test_an_answer_is_a_copy_a_caller_may_change(inner: CountingStore) -> None:
    store = WriteBehindStore(inner)
    with store.transaction():
        found = store.query("agents")
        found.clear()
        assert [r["id"] for r in store.query("agents")] == ["a1"]
