"""The storage port's contract as tests, for every adapter: :class:`StoreContract`.

Subclass it, return a fresh, empty store from :meth:`StoreContract.make_store`, and let pytest
collect the subclass (its name must start with ``Test``)::

    class TestMyStore(StoreContract):
        def make_store(self) -> Store:
            return MyStore(dsn="...")

The suite needs no pytest import: it is a plain class with ``setup_method``/``teardown_method``
and raises ``AssertionError`` with a message, so it also runs under ``python -O``. It speaks to
the port itself, naming tables as the port does; :mod:`governance_core.testing` exports it.
"""

from __future__ import annotations

import functools
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from governance_core.storage.protocol import (
    AggregateRow,
    ChangeMarks,
    Filter,
    GetsMany,
    GroupBy,
    NullsOrder,
    PreparedWrites,
    Query,
    ReadsTogether,
    Record,
    SortKey,
    Store,
    TakesTurns,
)

__all__ = ["StoreContract"]


class _Boom(Exception):
    """The failure tests raise inside transactions."""


class _Abort(BaseException):
    """A failure that is not an ``Exception`` (as ``KeyboardInterrupt`` is not)."""


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise AssertionError(message)


def _equal(actual: object, expected: object, what: str) -> None:
    _check(actual == expected, f"{what}: expected {expected!r}, got {actual!r}")


def _raises(kind: type[BaseException], action: Callable[[], object], what: str) -> None:
    try:
        action()
    except kind:
        return
    raise AssertionError(f"{what}: expected {kind.__name__}")


def _ids(records: Iterable[Record]) -> list[str]:
    return [record["id"] for record in records]


class StoreContract:
    """The storage contract as tests; subclasses say how to make a store.

    The tests use the library's own tables (``accounts``, ``teams``, ``environments``), so an
    adapter runs them on the schema it has to serve.
    """

    store: Store

    def make_store(self) -> Store:
        """Return a new, empty store of the adapter under test."""
        raise NotImplementedError("a StoreContract subclass must define make_store()")

    def setup_method(self, method: object = None) -> None:
        """Give each test a fresh store."""
        self.store = self.make_store()

    def teardown_method(self, method: object = None) -> None:
        """Close the test's store."""
        self.store.close()

    def put_all(self, table: str, *records: Record) -> None:
        """Store ``records`` in ``table``, one put each."""
        for record in records:
            self.store.put(table, record)

    def query_ids(self, table: str, filters: list[Filter] | None = None, **page: Any) -> list[str]:
        """Return the ids a query answers, in its order."""
        return _ids(self.store.query(table, filters or [], **page))

    # -- records ---------------------------------------------------------------------------
    def test_satisfies_protocol(self) -> None:
        """The store has every method of the port."""
        _check(isinstance(self.store, Store), f"{type(self.store).__name__} is not a Store")

    def test_put_get_roundtrip(self) -> None:
        """A stored record comes back equal; an unknown id is None."""
        record = {"id": "t1", "account_id": "acc", "name": "Platform", "extra": [1, "two"]}
        self.store.put("teams", record)
        _equal(self.store.get("teams", "t1"), record, "get after put")
        _equal(self.store.get("teams", "missing"), None, "get of an unknown id")

    def test_put_replaces(self) -> None:
        """A put with a known id replaces the whole record, declared fields included."""
        self.store.put("accounts", {"id": "a1", "name": "Old", "website": "old.example", "x": 1})
        self.store.put("accounts", {"id": "a1", "name": "New"})
        _equal(self.store.get("accounts", "a1"), {"id": "a1", "name": "New"}, "replaced record")
        _equal(self.store.count("accounts"), 1, "count after replacing")
        _equal(self.query_ids("accounts", [Filter("name", "eq", "Old")]), [], "old value")
        _equal(self.query_ids("accounts", [Filter("website", "eq", None)]), ["a1"], "dropped field")

    def test_delete(self) -> None:
        """Delete says whether the record existed, and only that record goes."""
        self.put_all("teams", {"id": "t1"}, {"id": "t2"})
        _equal(self.store.delete("teams", "t1"), True, "delete of a stored record")
        _equal(self.store.delete("teams", "t1"), False, "second delete")
        _equal(self.store.delete("teams", "never"), False, "delete of an unknown id")
        _equal(self.store.get("teams", "t1"), None, "get after delete")
        _equal(self.query_ids("teams"), ["t2"], "what is left")

    def test_tables_are_separate(self) -> None:
        """The same id in two tables names two records."""
        self.store.put("teams", {"id": "x", "name": "team"})
        self.store.put("people", {"id": "x", "name": "person"})
        self.store.delete("people", "x")
        _equal(self.store.get("teams", "x"), {"id": "x", "name": "team"}, "the other table")

    def test_ids_hold_each_inserted_resource(self) -> None:
        """Inserting into a resource table records ``{id, kind, account_id}`` in ``ids``.

        A rewrite leaves it as it was, a delete takes it away, and a transaction or savepoint
        that fails takes it back with the record. Tables that hold no resource record nothing.
        """
        store = self.store
        store.put("teams", {"id": "t1", "account_id": "acc", "name": "one"})
        held = {"id": "t1", "kind": "team", "account_id": "acc"}
        _equal(store.get("ids", "t1"), held, "the id of an inserted team")
        store.put("teams", {"id": "t1", "account_id": "acc", "name": "renamed"})
        _equal(store.get("ids", "t1"), held, "the id after a rewrite")
        store.put("accounts", {"id": "a1"})
        _equal(store.get("ids", "a1"), {"id": "a1", "kind": "account", "account_id": None},
               "the id of a resource without an account")
        odd = {"id": "t\x00\x01", "kind": "team", "account_id": "a\x01\x00"}
        store.put("teams", {"id": odd["id"], "account_id": odd["account_id"], "name": "\x00"})
        _equal(store.get("ids", odd["id"]), odd, "the id of a team with unusual text")
        _equal(store.query("ids", [Filter("kind", "eq", "team")]),
               [odd, held], "the ids of teams, as a query answers them")
        store.put("team_memberships", {"id": "m1", "account_id": "acc"})
        _equal(store.get("ids", "m1"), None, "the id of a record that is no resource")
        _equal(store.delete("teams", "t1"), True, "delete of the team")
        _equal(store.get("ids", "t1"), None, "the id after its resource was deleted")

        def failing_insert() -> None:
            with store.transaction():
                store.put("teams", {"id": "t2", "account_id": "acc"})
                _equal(store.get("ids", "t2"), {"id": "t2", "kind": "team", "account_id": "acc"},
                       "the id inside the transaction that inserted it")
                raise _Boom

        _raises(_Boom, failing_insert, "the failing transaction")
        _equal(store.get("ids", "t2"), None, "the id of a rolled back insert")
        with store.transaction():
            store.put("people", {"id": "p1", "account_id": "acc"})
            try:
                with store.transaction():
                    store.put("people", {"id": "p2", "account_id": "acc"})
                    raise _Boom
            except _Boom:
                pass
        _equal(store.get("ids", "p1"), {"id": "p1", "kind": "person", "account_id": "acc"},
               "the id inserted beside a failed savepoint")
        _equal(store.get("ids", "p2"), None, "the id of a savepoint's rolled back insert")

    def test_day_costs_follow_each_write_of_a_run(self) -> None:
        """Each agent's cost per UTC day its runs started is kept as runs are written.

        Inserts, cost changes, a start moved to another day, deletes, runs without a cost or
        a start, and transactions and savepoints that fail: the day's record always holds the
        sum of the costs of the runs counted there (``agent_day_costs``).
        """
        store = self.store

        def run(run_id: str, cost: float | None, started: str | None, agent: str = "g1") -> None:
            store.put("agent_instances", {
                "id": run_id, "account_id": "acc", "agent_id": agent, "status": "running",
                "total_cost": cost, "started_at": started,
            })

        def day(agent: str, date: str) -> float | None:
            record = store.get("agent_day_costs", f"{agent}/{date}")
            if record is None:
                return None
            _equal({key: record[key] for key in ("id", "agent_id", "day")},
                   {"id": f"{agent}/{date}", "agent_id": agent, "day": date}, "a day's record")
            return float(record["total_cost"])

        morning, evening = "2026-11-28T08:00:00.000000Z", "2026-11-28T23:59:59.999999Z"
        run("r1", 0.25, morning)
        run("r2", 1.5, evening)
        run("r3", None, morning)
        run("r4", 4.0, None)
        run("r5", 8.0, morning, agent="g2")
        _equal(day("g1", "2026-11-28"), 1.75, "two runs of the day, one without a cost")
        _equal(day("g2", "2026-11-28"), 8.0, "another agent's day")
        run("r1", 0.75, morning)
        run("r3", 2.0, morning)
        _equal(day("g1", "2026-11-28"), 4.25, "a cost moved, a first cost")
        run("r2", 1.5, "2026-11-29T00:00:00.000000Z")
        _equal(day("g1", "2026-11-28"), 2.75, "the day a run's start left")
        _equal(day("g1", "2026-11-29"), 1.5, "the day it started on instead")
        run("r4", 4.0, evening)
        _equal(day("g1", "2026-11-28"), 6.75, "a run given its start")
        _equal(store.delete("agent_instances", "r3"), True, "delete of a run")
        _equal(day("g1", "2026-11-28"), 4.75, "the day after a run was deleted")

        def failing() -> None:
            with store.transaction():
                run("r6", 16.0, morning)
                _equal(day("g1", "2026-11-28"), 20.75, "inside the transaction that wrote it")
                raise _Boom

        _raises(_Boom, failing, "the failing transaction")
        _equal(day("g1", "2026-11-28"), 4.75, "after a rolled back insert")
        with store.transaction():
            run("r1", 1.75, morning)
            try:
                with store.transaction():
                    run("r4", 5.0, evening)
                    raise _Boom
            except _Boom:
                pass
        _equal(day("g1", "2026-11-28"), 5.75, "beside a savepoint rolled back")
        _equal(day("g1", "2026-11-27"), None, "a day no run started on")

    def test_change_marks_move_with_writes(self) -> None:
        """A store that offers change marks gives a new mark after a write to a marked table.

        Writes to other tables leave it alone (a mark that moved with every write would keep
        nothing), and a mark taken inside a transaction equals no other.
        """
        store = self.store
        if not isinstance(store, ChangeMarks):
            return
        marked = ("api_tokens", "accounts")
        first = store.change_mark(marked)
        _equal(store.change_mark(marked), first, "mark without a write")
        store.put("teams", {"id": "t1"})
        _equal(store.change_mark(marked), first, "mark after a write to another table")
        store.put("api_tokens", {"id": "k1", "status": "active"})
        second = store.change_mark(marked)
        _check(second != first, "the mark did not move with an insert")
        store.put("api_tokens", {"id": "k1", "status": "suspended"})
        third = store.change_mark(marked)
        _check(third not in (first, second), "the mark did not move with an update")
        store.delete("accounts", "a1")
        store.put("accounts", {"id": "a1"})
        fourth = store.change_mark(marked)
        _check(fourth not in (first, second, third), "the mark did not move with an insert")
        store.delete("accounts", "a1")
        _check(store.change_mark(marked) not in (first, second, third, fourth),
               "the mark did not move with a delete")
        with store.transaction():
            inside = store.change_mark(marked)
            _check(inside != store.change_mark(marked), "two marks inside a transaction equal")
        _raises(ValueError, lambda: store.change_mark(("teams",)), "a mark of an unmarked table")

    def test_turns_run_one_at_a_time(self) -> None:
        """A store that offers turns runs the transactions of one turn one at a time.

        The second sees what the first committed (the turn is taken before its snapshot),
        another turn's name does not wait, and a turn inside a transaction waits for nothing.
        """
        store = self.store
        if not isinstance(store, TakesTurns):
            return
        first_in, order = threading.Event(), []

        def first() -> None:
            with store.turn("contract"), store.transaction():
                store.put("teams", {"id": "t1", "name": "first"})
                first_in.set()
                time.sleep(0.2)
                order.append("first")

        thread = threading.Thread(target=first)
        thread.start()
        try:
            _check(first_in.wait(10), "the first turn never began")
            with store.turn("another"), store.transaction():
                store.put("teams", {"id": "t2"})
            order.append("another")
            with store.turn("contract"), store.transaction():
                seen = store.get("teams", "t1")
            order.append("second")
        finally:
            thread.join()
        _equal(order, ["another", "first", "second"], "the order the turns ran in")
        _equal(seen, {"id": "t1", "name": "first"}, "what the second turn saw")
        with store.transaction(), store.turn("contract"):
            store.put("teams", {"id": "t3"})

    def test_a_transaction_opened_alone_runs_beside_no_other(self) -> None:
        """A transaction opened alone waits for one under way, and a later one waits for it.

        It sees what the one before it committed (it waited before its snapshot); opened
        inside a transaction, the block runs as it is.
        """
        store = self.store
        if not isinstance(store, TakesTurns):
            return
        began, order = threading.Event(), []

        def side_by_side(name: str, hold: float) -> None:
            with store.transaction():
                store.put("teams", {"id": name, "name": name})
                began.set()
                time.sleep(hold)
                order.append(name)

        first = threading.Thread(target=side_by_side, args=("first", 0.2))
        first.start()
        try:
            _check(began.wait(10), "the first transaction never began")
            with store.alone(), store.transaction():
                seen = store.get("teams", "first")
                began.clear()
                later = threading.Thread(target=side_by_side, args=("later", 0))
                later.start()
                _check(not began.wait(0.2), "a transaction began beside one opened alone")
                order.append("alone")
            later.join()
        finally:
            first.join()
        _equal(order, ["first", "alone", "later"], "the order the transactions ran in")
        _equal(seen, {"id": "first", "name": "first"}, "what the one opened alone saw")
        with store.transaction(), store.alone():
            store.put("teams", {"id": "t3"})

    def test_records_are_copies(self) -> None:
        """Mutating a record given to put, or one returned, never changes what is stored."""
        stored: Record = {"id": "t1", "name": "Platform", "tags": {"list": [1]}}
        given: Record = {"id": "t1", "name": "Platform", "tags": {"list": [1]}}
        self.store.put("teams", given)
        given["name"] = "changed"
        given["tags"]["list"].append(2)
        readers: list[Callable[[], Record | None]] = [
            lambda: self.store.get("teams", "t1"),
            lambda: self.store.query("teams")[0],
            lambda: next(iter(self.store.iterate("teams"))),
        ]
        for read in readers:
            returned = read() or {}
            returned["name"] = "mutated"
            returned["tags"]["list"].clear()
            _equal(self.store.get("teams", "t1"), stored, "record after mutating a copy")

    def test_json_types_roundtrip(self) -> None:
        """Nested objects and lists, booleans, floats, nulls, large integers and any text."""
        record: Record = {
            "id": "a1",
            "name": "Ünïcødé ☃ 😀 \"quoted\" back\\slash\nnew line \x00 nul",
            "partition": 2**62,
            "nested": {"list": [1, 2.5, True, False, None, "x", {"deep": [[], {}]}], "empty": {}},
            "float": 0.1,
            "tiny": 5e-324,
            "huge": 1.7976931348623157e308,
            "negative": -(2**63),
            "flag": False,
            "nothing": None,
            "": "empty key",
        }
        self.store.put("accounts", record)
        got = self.store.get("accounts", "a1") or {}
        _equal(got, record, "roundtrip")
        for key in ("flag", "partition", "float", "negative"):
            _equal(type(got.get(key)), type(record[key]), f"type of {key}")
        _equal(self.store.query("accounts", [Filter("name", "eq", record["name"])]), [record],
               "query on unusual text")

    def test_booleans_are_integers(self) -> None:
        """A boolean in an integer field comes back a boolean and compares as 0 or 1."""
        self.put_all(
            "environments",
            {"id": "e1", "is_default": True},
            {"id": "e2", "is_default": False},
            {"id": "e3", "is_default": 2},
        )
        _equal(self.store.get("environments", "e1"), {"id": "e1", "is_default": True}, "get")
        for value, expected in ((True, ["e1"]), (1, ["e1"]), (0, ["e2"]), (False, ["e2"])):
            found = self.query_ids("environments", [Filter("is_default", "eq", value)])
            _equal(found, expected, f"is_default eq {value!r}")
        ordered = self.query_ids("environments", sort=[SortKey("is_default", descending=True)])
        _equal(ordered, ["e3", "e1", "e2"], "sorted on booleans and integers")

    # -- queries ---------------------------------------------------------------------------
    def _filter_fixture(self) -> None:
        self.put_all(
            "accounts",
            {"id": "r1", "name": "a", "partition": 1},
            {"id": "r2", "name": "b", "partition": 2},
            {"id": "r3", "name": "c", "partition": 3},
            {"id": "r4", "name": None, "partition": None},
            {"id": "r5"},
        )

    def test_query_filters_each_op(self) -> None:
        """Every operator, with null semantics: only eq/ne None match nulls."""
        self._filter_fixture()
        cases: list[tuple[Filter, list[str]]] = [
            (Filter("name", "eq", "b"), ["r2"]),
            (Filter("name", "eq", None), ["r4", "r5"]),
            (Filter("name", "ne", "b"), ["r1", "r3"]),
            (Filter("name", "ne", None), ["r1", "r2", "r3"]),
            (Filter("partition", "lt", 2), ["r1"]),
            (Filter("partition", "le", 2), ["r1", "r2"]),
            (Filter("partition", "gt", 2), ["r3"]),
            (Filter("partition", "ge", 2), ["r2", "r3"]),
            (Filter("name", "lt", "b"), ["r1"]),
            (Filter("name", "ge", "b"), ["r2", "r3"]),
            (Filter("name", "in", ["a", "c", None]), ["r1", "r3"]),
            (Filter("partition", "in", (3, 1)), ["r1", "r3"]),
            (Filter("name", "in", []), []),
            (Filter("id", "in", ["r5", "r9"]), ["r5"]),
            (Filter("id", "gt", "r3"), ["r4", "r5"]),
        ]
        cases += [(Filter("partition", op, None), []) for op in ("lt", "le", "gt", "ge")]
        for condition, expected in cases:
            _equal(self.query_ids("accounts", [condition]), expected, repr(condition))
            _equal(self.store.count("accounts", [condition]), len(expected), f"count {condition}")

    def test_filters_combine_with_and(self) -> None:
        """Several filters must all hold."""
        self._filter_fixture()
        both = [Filter("partition", "ge", 1), Filter("name", "ne", "c")]
        _equal(self.query_ids("accounts", both), ["r1", "r2"], "two filters")
        _equal(self.store.count("accounts", both), 2, "count with two filters")

    def test_text_orders_by_code_point(self) -> None:
        """Text compares by code point: no collation, no case folding."""
        names = {"t1": "a", "t2": "B", "t3": "é", "t4": "😀", "t5": "z", "t6": "aa"}
        self.put_all("teams", *({"id": key, "name": name} for key, name in names.items()))
        ordered = self.query_ids("teams", sort=[SortKey("name")])
        _equal(ordered, ["t2", "t1", "t6", "t5", "t3", "t4"], "code point order")
        _equal(self.query_ids("teams", [Filter("name", "gt", "z")]), ["t3", "t4"], "gt on text")

    def _sort_fixture(self) -> None:
        names = {"t1": "b", "t2": None, "t3": "a", "t4": None, "t5": "c", "t6": "a"}
        for key in ["t5", "t2", "t6", "t1", "t4", "t3"]:
            self.store.put("teams", {"id": key, "name": names[key]})

    def test_sort_asc_desc_nulls_first_last(self) -> None:
        """Explicit null placement in both directions; ties by id ascending."""
        self._sort_fixture()
        cases: list[tuple[bool, NullsOrder, list[str]]] = [
            (False, "first", ["t2", "t4", "t3", "t6", "t1", "t5"]),
            (False, "last", ["t3", "t6", "t1", "t5", "t2", "t4"]),
            (True, "first", ["t2", "t4", "t5", "t1", "t3", "t6"]),
            (True, "last", ["t5", "t1", "t3", "t6", "t2", "t4"]),
        ]
        for descending, nulls, expected in cases:
            key = SortKey("name", descending, nulls)
            _equal(self.query_ids("teams", sort=[key]), expected, repr(key))

    def test_nulls_auto_not_assumed(self) -> None:
        """Under ``auto`` nulls come together at one end; the rest is in order."""
        self._sort_fixture()
        nulls = ["t2", "t4"]
        ascending = ["t3", "t6", "t1", "t5"]
        for descending, rest in ((False, ascending), (True, ["t5", "t1", "t3", "t6"])):
            got = self.query_ids("teams", sort=[SortKey("name", descending)])
            _check(got in (nulls + rest, rest + nulls), f"auto nulls, desc={descending}: {got}")

    def test_sort_by_several_keys(self) -> None:
        """Later keys order the ties of earlier ones."""
        self.put_all(
            "accounts",
            {"id": "r1", "partition": 2, "name": "a"},
            {"id": "r2", "partition": 1, "name": "a"},
            {"id": "r3", "partition": 2, "name": "b"},
            {"id": "r4", "partition": 1, "name": "c"},
        )
        keys = [SortKey("partition"), SortKey("name", descending=True)]
        _equal(self.query_ids("accounts", sort=keys), ["r4", "r2", "r3", "r1"], "two keys")

    def test_ties_broken_by_id(self) -> None:
        """Equal sort values, and no sort at all, come in id order, whatever the insertion order."""
        for key in ["t3", "t1", "t4", "t2"]:
            self.store.put("teams", {"id": key, "name": "same"})
        _equal(self.query_ids("teams"), ["t1", "t2", "t3", "t4"], "no sort")
        for descending in (False, True):
            got = self.query_ids("teams", sort=[SortKey("name", descending)])
            _equal(got, ["t1", "t2", "t3", "t4"], f"ties, descending={descending}")
        by_id = self.query_ids("teams", sort=[SortKey("id", descending=True)])
        _equal(by_id, ["t4", "t3", "t2", "t1"], "sorted on id descending")

    def test_offset_limit(self) -> None:
        """Pages are slices of the full order."""
        self.put_all("teams", *({"id": f"t{n}", "name": str(9 - n)} for n in range(10)))
        order = [SortKey("name")]
        everything = self.query_ids("teams", sort=order)
        _equal(everything, [f"t{n}" for n in range(9, -1, -1)], "full order")
        for offset, limit in ((0, 3), (3, 3), (9, 3), (10, 3), (15, 3), (4, None), (2, 0)):
            got = self.query_ids("teams", sort=order, offset=offset, limit=limit)
            end = None if limit is None else offset + limit
            _equal(got, everything[offset:end], f"offset={offset} limit={limit}")

    def test_count(self) -> None:
        """Count ignores paging and honours filters."""
        _equal(self.store.count("teams"), 0, "empty table")
        self.put_all(
            "teams", *({"id": f"t{n}", "name": "odd" if n % 2 else None} for n in range(7))
        )
        _equal(self.store.count("teams"), 7, "all")
        _equal(self.store.count("teams", [Filter("name", "eq", None)]), 4, "nulls")

    def test_iterate_in_id_order_across_pages(self) -> None:
        """Iteration yields every match once, in id order, however many there are."""
        keys = [f"{n:05d}" for n in range(1234)] + ["", "a", "a0", "aa", "b"]
        shuffled = list(keys)
        random.Random(0).shuffle(shuffled)
        with self.store.transaction():
            for index, key in enumerate(shuffled):
                self.store.put("accounts", {"id": key, "partition": index % 3})
        _equal(_ids(self.store.iterate("accounts")), sorted(keys), "all records")
        some = [Filter("partition", "eq", 1)]
        expected = _ids(self.store.query("accounts", some))
        _equal(_ids(self.store.iterate("accounts", some)), expected, "filtered")
        _equal(expected, sorted(expected), "filtered query order")
        _equal(len(expected), self.store.count("accounts", some), "filtered count")

    # -- aggregates ------------------------------------------------------------------------
    def _runs_fixture(self) -> None:
        # Costs are multiples of 1/8: every order of adding them gives the same float.
        self.put_all(
            "agent_instances",
            {"id": "i1", "account_id": "a", "started_at": "2026-01-01T23:59:59.999999Z",
             "risk_level": "low", "total_cost": 0.125},
            {"id": "i2", "account_id": "a", "started_at": "2026-01-01T00:00:00.000000Z",
             "risk_level": "low", "total_cost": 2},
            {"id": "i3", "account_id": "a", "started_at": "2026-01-02T08:00:00.000000Z",
             "risk_level": "high", "total_cost": None},
            {"id": "i4", "account_id": "a", "started_at": "2026-01-02T09:00:00.000000Z",
             "risk_level": None, "total_cost": 0.5},
            {"id": "i5", "account_id": "a", "started_at": None, "risk_level": None},
            {"id": "i6", "account_id": "b", "started_at": "2026-01-01T10:00:00.000000Z",
             "risk_level": "low", "total_cost": 64},
        )

    def test_aggregate_groups_by_day_and_field(self) -> None:
        """Counts and sums per (day, value): filters apply first, null keys sort first."""
        self._runs_fixture()
        rows = self.store.aggregate(
            "agent_instances",
            [GroupBy("started_at", day=True), GroupBy("risk_level")],
            ["total_cost"],
            [Filter("account_id", "eq", "a")],
        )
        _equal(rows, [
            AggregateRow((None, None), 1, (None,)),
            AggregateRow(("2026-01-01", "low"), 2, (2.125,)),
            AggregateRow(("2026-01-02", None), 1, (0.5,)),
            AggregateRow(("2026-01-02", "high"), 1, (None,)),
        ], "runs by day and risk level")
        for row in rows:
            for total in row.sums:
                _check(total is None or type(total) is float, f"a real sum is a float: {row}")
        since = self.store.aggregate(
            "agent_instances", [GroupBy("started_at", day=True)], ["total_cost"],
            [Filter("account_id", "eq", "a"),
             Filter("started_at", "ge", "2026-01-01T12:00:00.000000Z")],
        )
        _equal(since, [
            AggregateRow(("2026-01-01",), 1, (0.125,)),
            AggregateRow(("2026-01-02",), 2, (0.5,)),
        ], "runs started since noon, by day")

    def test_aggregate_without_keys(self) -> None:
        """No keys: one row of the totals when something matches, none otherwise."""
        self._runs_fixture()
        _equal(self.store.aggregate("agent_instances", sums=["total_cost"]),
               [AggregateRow((), 6, (66.625,))], "every run")
        _equal(self.store.aggregate("agent_instances", filters=[Filter("account_id", "eq", "z")]),
               [], "nothing matches")
        _equal(self.store.aggregate("teams"), [], "an empty table")

    def test_aggregate_integer_sums_and_keys(self) -> None:
        """Integer sums are ints, booleans count as 1 and 0, text keys order by code point."""
        self.put_all(
            "accounts",
            {"id": "r1", "name": "b", "partition": 3},
            {"id": "r2", "name": "b", "partition": True},
            {"id": "r3", "name": "B", "partition": None},
            {"id": "r4", "name": "\u00e9", "partition": 2**40},
            {"id": "r5", "name": "b", "partition": False},
        )
        rows = self.store.aggregate("accounts", [GroupBy("name")], ["partition"])
        _equal(rows, [
            AggregateRow(("B",), 1, (None,)),
            AggregateRow(("b",), 3, (4,)),
            AggregateRow(("\u00e9",), 1, (2**40,)),
        ], "accounts by name")
        for row in rows:
            _check(row.sums[0] is None or type(row.sums[0]) is int, f"an integer sum: {row}")
        by_partition = self.store.aggregate("accounts", [GroupBy("partition")])
        _equal(by_partition, [
            AggregateRow((None,), 1), AggregateRow((0,), 1), AggregateRow((1,), 1),
            AggregateRow((3,), 1), AggregateRow((2**40,), 1),
        ], "accounts by partition (a boolean key is 0 or 1)")

    def test_aggregate_integer_sums_stay_64_bit(self) -> None:
        """A total that fits is answered however its parts add up; one that does not raises."""
        top = 2**63 - 1
        self.put_all(
            "accounts",
            {"id": "r1", "name": "fits", "partition": top},
            {"id": "r2", "name": "fits", "partition": 1},
            {"id": "r3", "name": "fits", "partition": -5},
            {"id": "r4", "name": "over", "partition": top},
            {"id": "r5", "name": "over", "partition": 1},
        )
        _equal(
            self.store.aggregate("accounts", [GroupBy("name")], ["partition"],
                                 [Filter("name", "eq", "fits")]),
            [AggregateRow(("fits",), 3, (top - 4,))], "a total that fits",
        )
        _raises(ValueError, lambda: self.store.aggregate("accounts", sums=["partition"]),
                "a total beyond a signed 64-bit integer")

    def test_aggregate_day_of_any_text(self) -> None:
        """A day key is a text's first ten characters, cut at a NUL first."""
        self.put_all(
            "teams",
            {"id": "t1", "name": "2026-03-04T05:06:07.000000Z"},
            {"id": "t2", "name": "2026-03-04"},
            {"id": "t3", "name": "ab\x00cdefghijklm"},
            {"id": "t4", "name": "\x01\u00e9\x01\x02bcdefghijkl"},
            {"id": "t5", "name": "short"},
            {"id": "t6", "name": "\x00"},
        )
        _equal(self.store.aggregate("teams", [GroupBy("name", day=True)]), [
            AggregateRow(("",), 1),
            AggregateRow(("\x01\u00e9\x01\x02bcdefg",), 1),
            AggregateRow(("2026-03-04",), 2),
            AggregateRow(("ab",), 1),
            AggregateRow(("short",), 1),
        ], "teams by the day of their name")

    def test_aggregate_sees_the_transaction(self) -> None:
        """Inside a transaction an aggregate counts its writes; a rollback takes them back."""
        self.put_all("teams", {"id": "t1", "name": "x"})
        try:
            with self.store.transaction():
                self.store.put("teams", {"id": "t2", "name": "x"})
                _equal(self.store.aggregate("teams", [GroupBy("name")]),
                       [AggregateRow(("x",), 2)], "inside the transaction")
                raise _Boom
        except _Boom:
            pass
        _equal(self.store.aggregate("teams", [GroupBy("name")]), [AggregateRow(("x",), 1)],
               "after the rollback")

    def test_malformed_aggregates_rejected(self) -> None:
        """ValueError for a day of a non-text field, a sum of text, twice, or undeclared."""
        cases: list[tuple[list[GroupBy], list[str], list[Filter]]] = [
            ([GroupBy("partition", day=True)], [], []),
            ([GroupBy("nope")], [], []),
            ([], ["name"], []),
            ([], ["partition", "partition"], []),
            ([], ["nope"], []),
            ([], [], [Filter("nope", "eq", 1)]),
        ]
        for group_by, sums, filters in cases:
            _raises(
                ValueError,
                functools.partial(self.store.aggregate, "accounts", group_by, sums, filters),
                f"aggregate by {group_by} of {sums} where {filters}",
            )
        _raises(ValueError, lambda: self.store.aggregate("nope"), "aggregate of an unknown table")

    # -- transactions ----------------------------------------------------------------------
    def test_transaction_commits(self) -> None:
        """Writes in a transaction are seen inside it and stay after it."""
        self.store.put("teams", {"id": "old"})
        with self.store.transaction():
            self.store.put("teams", {"id": "t1", "name": "one"})
            self.store.put("teams", {"id": "t2"})
            self.store.delete("teams", "old")
            _equal(self.query_ids("teams"), ["t1", "t2"], "inside the transaction")
            _equal(self.store.count("teams", [Filter("name", "eq", "one")]), 1, "count inside")
        _equal(self.query_ids("teams"), ["t1", "t2"], "after commit")

    def test_transaction_rolls_back_everything_on_error(self) -> None:
        """Inserts, replacements and deletes are all undone, and the error passes through."""
        self.put_all("teams", {"id": "kept", "name": "old"}, {"id": "gone", "name": "g"})
        for failure in (_Boom("boom"), _Abort("abort")):
            try:
                with self.store.transaction():
                    self.store.put("teams", {"id": "new", "name": "n"})
                    self.store.put("teams", {"id": "new", "name": "n2"})
                    self.store.put("teams", {"id": "kept", "name": "new"})
                    self.store.delete("teams", "gone")
                    raise failure
            except (_Boom, _Abort) as raised:
                _check(raised is failure, f"the transaction replaced the error with {raised!r}")
            else:
                raise AssertionError("the transaction swallowed the error")
            _equal(self.store.get("teams", "new"), None, "inserted record")
            _equal(self.store.get("teams", "kept"), {"id": "kept", "name": "old"}, "replaced")
            _equal(self.store.get("teams", "gone"), {"id": "gone", "name": "g"}, "deleted record")
            _equal(self.store.count("teams", [Filter("name", "eq", "new")]), 0, "declared field")
        with self.store.transaction():
            self.store.put("teams", {"id": "after"})
        _equal(self.query_ids("teams"), ["after", "gone", "kept"], "a transaction after")

    def test_a_transaction_may_write_nothing_or_open_a_savepoint_first(self) -> None:
        """A transaction that runs no statement, or a savepoint before anything else, works.

        A store may send a transaction's BEGIN with its first statement (PostgreSQL does).
        """
        with self.store.transaction():
            pass
        with self.store.transaction():
            with self.store.transaction():
                self.store.put("teams", {"id": "inner"})
            self.store.put("teams", {"id": "outer"})
        _equal(self.query_ids("teams"), ["inner", "outer"], "savepoint first, both committed")
        try:
            with self.store.transaction():
                with self.store.transaction():
                    self.store.put("teams", {"id": "undone"})
                raise _Boom()
        except _Boom:
            pass
        _equal(self.query_ids("teams"), ["inner", "outer"], "savepoint first, rolled back")

    def test_records_of_several_tables_are_read_together(self) -> None:
        """A store that reads many records at once answers each as its get would."""
        store = self.store
        if not isinstance(store, GetsMany):
            return
        self.put_all("teams", {"id": "t1", "name": "one"})
        store.put("people", {"id": "p1", "name": "someone"})
        keys = [("teams", "t1"), ("people", "p1"), ("teams", "missing"), ("ids", "t1")]
        expected = [store.get(table, record_id) for table, record_id in keys]
        _equal(store.get_many(keys), expected, "outside a transaction")
        with store.transaction():
            store.put("teams", {"id": "missing", "name": "now"})
            _equal(store.get_many(keys[2:3]), [{"id": "missing", "name": "now"}],
                   "inside a transaction, after its own write")
        with store.transaction():
            _equal(store.get_many(keys), [store.get(t, i) for t, i in keys], "first statement")
        _raises(ValueError, lambda: store.get_many([("nope", "x")]), "an unknown table")

    def test_records_and_queries_read_together_are_answered_as_alone(self) -> None:
        """A store that reads records and answers queries together answers each as alone."""
        store = self.store
        if not isinstance(store, ReadsTogether):
            return
        self.put_all("teams", {"id": "t1", "name": "one"}, {"id": "t2", "name": "two"})
        store.put("people", {"id": "p1", "name": "someone"})
        keys = [("teams", "t1"), ("people", "p1"), ("teams", "missing"), ("ids", "t1")]
        queries = [
            Query("teams", (Filter("name", "in", ["one", "two"]),),
                  (SortKey("name", descending=True),), offset=1, limit=1),
            Query("people"),
            Query("ids", (Filter("kind", "eq", "team"),)),
            Query("teams", (Filter("name", "eq", "none"),)),
        ]

        def alone() -> tuple[list[Record | None], list[list[Record]]]:
            return [store.get(t, i) for t, i in keys], [
                store.query(q.table, q.filters, q.sort, q.offset, q.limit) for q in queries
            ]

        expected = alone()
        _equal(expected[1][0], [{"id": "t1", "name": "one"}], "the first query alone")
        _equal(store.read_together(keys, queries), expected, "outside a transaction")
        _equal(store.read_together(keys, []), (expected[0], []), "records alone")
        _equal(store.read_together([], queries), ([], expected[1]), "queries alone")
        _equal(store.read_together([], []), ([], []), "nothing")
        with store.transaction():
            _equal(store.read_together(keys, queries), expected, "a transaction's first reads")
            store.put("teams", {"id": "missing", "name": "two"})
            _equal(store.read_together(keys, queries), alone(), "after the transaction's write")
        _raises(ValueError, lambda: store.read_together([], [Query("nope")]), "an unknown table")

    def test_prepared_records_are_written_as_their_puts(self) -> None:
        """Records written many at once are stored as one put each, in order, would store them.

        New records and rewrites together, an id given twice (the later record stands),
        every declared column empty in some records and set in others, unusual text, large
        integers and floats: each record, each query on a column, the ids and the runs' day
        costs come out as the puts leave them.
        """
        store = self.store
        if not isinstance(store, PreparedWrites):
            return
        accounts: list[Record] = [
            {"id": "kept", "name": "before", "partition": 7},
            {"id": "a\x00\x01", "name": "nul \x00 and \x01 ☃", "partition": -(2**63),
             "purpose": None, "website": "w", "extra": {"list": [1, 2.5, None]}},
            {"id": "a2", "partition": 2**62, "promo_code": "", "flag": True},
            {"id": "kept", "name": "after", "website": None},
            {"id": "a3"},
        ]
        runs: list[Record] = [
            {"id": "r1", "account_id": "acc", "agent_id": "g1", "status": "running",
             "started_at": "2026-01-02T03:04:05Z", "total_cost": 1, "duration_ms": 5},
            {"id": "r2", "account_id": "acc", "agent_id": "g1", "status": "running",
             "started_at": "2026-01-02T09:00:00Z", "total_cost": 0.25, "quality_score": None},
            {"id": "r3", "account_id": "acc", "agent_id": "g1", "status": "pending"},
        ]
        store.put("accounts", {"id": "kept", "name": "stored first"})
        store.put("agent_instances", {**runs[0], "total_cost": 9.5})
        with store.transaction():
            for table, records in (("accounts", accounts), ("agent_instances", runs)):
                store.write_prepared(table, [store.prepare(table, record) for record in records])
            store.write_prepared("accounts", [store.prepare("accounts", accounts[1])])
        stands = {record["id"]: record for record in accounts}
        for record_id, record in stands.items():
            _equal(store.get("accounts", record_id), record, f"account {record_id!r}")
            _equal(store.get("ids", record_id),
                   {"id": record_id, "kind": "account", "account_id": None},
                   f"the id of account {record_id!r}")
        for run in runs:
            _equal(store.get("agent_instances", run["id"]), run, f"run {run['id']}")
        _equal(store.count("accounts"), len(stands), "accounts stored")
        for field in ("name", "partition", "purpose", "promo_code", "website"):
            for record in stands.values():
                value = record.get(field)
                expected = sorted(i for i, r in stands.items() if r.get(field) == value)
                found = self.query_ids("accounts", [Filter(field, "eq", value)])
                _equal(found, expected, f"accounts whose {field} is {value!r}")
        _equal(self.query_ids("agent_instances", [Filter("total_cost", "gt", 0.5)]), ["r1"],
               "runs costing more than 0.5")
        _equal((store.get("agent_day_costs", "g1/2026-01-02") or {}).get("total_cost"), 1.25,
               "the day cost of the runs written together")

    def test_nested_transactions_are_savepoints(self) -> None:
        """An inner block commits with the outer one; an error leaving it undoes only its own.

        Inserts, replacements and deletes of the inner block are undone, those of the outer
        block before and after it stay, and the outer block goes on to commit.
        """
        with self.store.transaction():
            self.store.put("teams", {"id": "outer"})
            with self.store.transaction():
                self.store.put("teams", {"id": "inner"})
        _equal(self.query_ids("teams"), ["inner", "outer"], "both committed")

        def fail_inside() -> None:
            with self.store.transaction():
                self.store.put("teams", {"id": "outer2"})
                with self.store.transaction():
                    self.store.put("teams", {"id": "inner2"})
                    raise _Boom()

        _raises(_Boom, fail_inside, "an error in the inner transaction")
        _equal(self.query_ids("teams"), ["inner", "outer"], "an inner error leaving both")

        with self.store.transaction():
            self.store.put("teams", {"id": "outer3", "name": "before"})
            try:
                with self.store.transaction():
                    self.store.put("teams", {"id": "inner3"})
                    self.store.put("teams", {"id": "outer3", "name": "changed"})
                    self.store.delete("teams", "inner")
                    with self.store.transaction():
                        self.store.put("teams", {"id": "deepest"})
                    raise _Boom()
            except _Boom:
                pass
            _equal(self.query_ids("teams"), ["inner", "outer", "outer3"], "inside, after undo")
            with self.store.transaction():
                self.store.put("teams", {"id": "inner4"})
            self.store.put("teams", {"id": "outer4"})
        expected = ["inner", "inner4", "outer", "outer3", "outer4"]
        _equal(self.query_ids("teams"), expected, "an inner error caught by the outer block")
        _equal(self.store.get("teams", "outer3"), {"id": "outer3", "name": "before"}, "replaced")
        _equal(self.store.count("teams", [Filter("name", "eq", "changed")]), 0, "declared field")

    # -- refusals --------------------------------------------------------------------------
    def test_unknown_table_rejected(self) -> None:
        """Every method refuses a table the schema does not declare."""
        store = self.store
        actions: dict[str, Callable[[], object]] = {
            "get": lambda: store.get("nope", "x"),
            "put": lambda: store.put("nope", {"id": "x"}),
            "delete": lambda: store.delete("nope", "x"),
            "query": lambda: store.query("nope"),
            "count": lambda: store.count("nope"),
            "iterate": lambda: list(store.iterate("nope")),
        }
        for name, action in actions.items():
            _raises(ValueError, action, f"{name} on an unknown table")

    def test_undeclared_field_rejected(self) -> None:
        """Filtering or sorting on a field the table does not declare is refused, even if stored."""
        store = self.store
        store.put("teams", {"id": "t1", "colour": "red"})
        where = [Filter("colour", "eq", "red")]
        actions: dict[str, Callable[[], object]] = {
            "query filter": lambda: store.query("teams", where),
            "query sort": lambda: store.query("teams", sort=[SortKey("colour")]),
            "count": lambda: store.count("teams", where),
            "iterate": lambda: list(store.iterate("teams", where)),
            "field of another table": lambda: store.query("teams", [Filter("email", "eq", "x")]),
        }
        for name, action in actions.items():
            _raises(ValueError, action, name)

    def test_malformed_queries_rejected(self) -> None:
        """Unknown operators and null orders, bad pages and bad ``in`` values are refused."""
        store = self.store
        actions: dict[str, Callable[[], object]] = {
            "operator": lambda: store.query("teams", [Filter("name", "like", "a")]),  # type: ignore[arg-type]
            "nulls": lambda: store.query("teams", sort=[SortKey("name", False, "middle")]),  # type: ignore[arg-type]
            "negative offset": lambda: store.query("teams", offset=-1),
            "negative limit": lambda: store.query("teams", limit=-1),
            "in with a string": lambda: store.query("teams", [Filter("name", "in", "abc")]),
            "text field, integer value": lambda: store.query("teams", [Filter("name", "eq", 1)]),
            "integer field, text value": lambda: store.count(
                "accounts", [Filter("partition", "lt", "2")]
            ),
            "in with a wrong item": lambda: store.query("teams", [Filter("name", "in", ["a", 1])]),
        }
        for name, action in actions.items():
            _raises(ValueError, action, name)

    def test_malformed_records_rejected(self) -> None:
        """Records without a string id, with non-JSON values or mistyped fields store nothing."""
        bad: dict[str, Record] = {
            "no id": {"name": "x"},
            "integer id": {"id": 5},
            "text field holding a number": {"id": "a", "name": 5},
            "text field holding an object": {"id": "a", "name": {"first": "x"}},
            "integer field holding text": {"id": "a", "partition": "5"},
            "integer field holding a float": {"id": "a", "partition": 1.5},
            "integer beyond 64 bits": {"id": "a", "partition": 2**63},
            "not a number": {"id": "a", "score": float("nan")},
            "infinity": {"id": "a", "nested": [float("inf")]},
            "a set": {"id": "a", "tags": {"x"}},
        }
        for name, record in bad.items():
            _raises(ValueError, functools.partial(self.store.put, "accounts", record), name)
        _equal(self.store.count("accounts"), 0, "records stored despite refusals")
        _raises(ValueError, lambda: self.store.get("accounts", 5), "get with an integer id")  # type: ignore[arg-type]
