"""The memory adapter and each other adapter, driven by the same random steps, agree after each.

The pattern of the Hypothesis docs' DatabaseComparison: MemoryStore is the model, SQLiteStore
(and PostgresStore, given a server, and the write-behind store the core works through) the
system under test; every answer and every failure must be the same.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from governance_core.storage import (
    Filter,
    GroupBy,
    MemoryStore,
    Record,
    SortKey,
    SQLiteStore,
    Store,
)
from governance_core.storage.protocol import FilterOp, ReadAhead
from governance_core.storage.write_behind import WriteBehindStore
from tests.stores import server_url, shared_slots

TEXT = st.none() | st.text(st.sampled_from(["a", "b", "B", "é", "😀", "\x00"]), max_size=3)
INTEGER = (
    st.none()
    | st.booleans()
    | st.integers(-3, 3)
    | st.sampled_from([-(2**63), 2**63 - 1])
)
IDS = st.text(st.sampled_from("abé"), max_size=2)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=4)
)
JSON = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=3), inner, max_size=3),
    max_leaves=6,
)

# Two tables and the declared fields the steps use, with what each may hold.
FIELDS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "accounts": {"name": TEXT, "website": TEXT, "partition": INTEGER},
    "environments": {"name": TEXT, "is_default": INTEGER},
}
TABLES = st.sampled_from(sorted(FIELDS))
WRONG_TYPE = {
    "text": st.integers() | st.lists(st.text(), max_size=1),
    "integer": st.text() | st.floats(),
}
OPS: list[FilterOp] = ["eq", "ne", "lt", "le", "gt", "ge", "in"]


@st.composite
def records(draw: st.DrawFn, table: str) -> Record:
    fields = FIELDS[table]
    record: Record = {"id": draw(IDS)}
    for name in draw(st.sets(st.sampled_from(sorted(fields)))):
        record[name] = draw(fields[name])
    record.update(draw(st.dictionaries(st.sampled_from(["extra", "more"]), JSON, max_size=2)))
    return record


@st.composite
def filters(draw: st.DrawFn, table: str) -> Filter:
    name = draw(st.sampled_from(["id", *sorted(FIELDS[table])]))
    values = IDS if name == "id" else FIELDS[table][name]
    op = draw(st.sampled_from(OPS))
    value = draw(st.lists(values, max_size=3) if op == "in" else values)
    return Filter(name, op, value)


@st.composite
def sort_keys(draw: st.DrawFn, table: str) -> SortKey:
    return SortKey(
        draw(st.sampled_from(["id", *sorted(FIELDS[table])])),
        draw(st.booleans()),
        draw(st.sampled_from(["first", "last", "auto"])),
    )


@st.composite
def queries(draw: st.DrawFn) -> dict[str, Any]:
    table = draw(TABLES)
    return {
        "table": table,
        "filters": draw(st.lists(filters(table), max_size=2)),
        "sort": draw(st.lists(sort_keys(table), max_size=2)),
        "offset": draw(st.integers(0, 4)),
        "limit": draw(st.none() | st.integers(0, 4)),
    }


@st.composite
def writes(draw: st.DrawFn) -> tuple[str, str, Any]:
    table = draw(TABLES)
    if draw(st.booleans()):
        return ("put", table, draw(records(table)))
    return ("delete", table, draw(IDS))


@st.composite
def mistyped(draw: st.DrawFn) -> tuple[str, Record]:
    table = draw(TABLES)
    record = draw(records(table))
    name = draw(st.sampled_from(sorted(FIELDS[table])))
    kind = "text" if name in ("name", "website") else "integer"
    record[name] = draw(WRONG_TYPE[kind])
    return table, record


class _Fail(Exception):
    """Raised inside a transaction to make it roll back."""


def _writes(store: Store, steps: list[tuple[str, str, Any]]) -> list[Any]:
    """Run write steps (put or delete) on ``store``; what each answered."""
    return [getattr(store, verb)(table, argument) for verb, table, argument in steps]


def _outcome(action: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("ok", action())
    except (ValueError, _Fail) as error:
        return ("raised", type(error).__name__)


class StoresAgree(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.model: Store = MemoryStore()
        self.real: Store = self.make_real()

    def make_real(self) -> Store:
        return SQLiteStore(":memory:")

    def both(self, action: Callable[[Store], Any]) -> Any:
        expected = _outcome(lambda: action(self.model))
        actual = _outcome(lambda: action(self.real))
        assert actual == expected
        return expected[1]

    @rule(table=TABLES, data=st.data())
    def put(self, table: str, data: st.DataObject) -> None:
        record = data.draw(records(table))
        self.both(lambda store: store.put(table, record))

    @rule(case=mistyped())
    def put_mistyped(self, case: tuple[str, Record]) -> None:
        table, record = case
        assert self.both(lambda store: store.put(table, record)) == "ValueError"

    @rule(table=TABLES, record_id=IDS)
    def delete(self, table: str, record_id: str) -> None:
        self.both(lambda store: store.delete(table, record_id))

    @rule(table=TABLES, record_id=IDS)
    def get(self, table: str, record_id: str) -> None:
        self.both(lambda store: store.get(table, record_id))

    @rule(query=queries())
    def query(self, query: dict[str, Any]) -> None:
        self.both(lambda store: store.query(**query))

    @rule(query=queries())
    def count_and_iterate(self, query: dict[str, Any]) -> None:
        table, where = query["table"], query["filters"]
        self.both(lambda store: store.count(table, where))
        self.both(lambda store: list(store.iterate(table, where)))

    @rule(query=queries(), data=st.data())
    def aggregate(self, query: dict[str, Any], data: st.DataObject) -> None:
        table = query["table"]
        fields = sorted(FIELDS[table])
        group_by = data.draw(st.lists(
            st.builds(GroupBy, st.sampled_from(["id", *fields]), st.booleans()), max_size=2,
        ))
        sums = data.draw(st.lists(st.sampled_from(fields), max_size=2))
        self.both(lambda store: store.aggregate(table, group_by, sums, query["filters"]))

    @rule(steps=st.lists(writes(), min_size=1, max_size=5), fail=st.booleans(), query=queries())
    def transaction(
        self, steps: list[tuple[str, str, Any]], fail: bool, query: dict[str, Any]
    ) -> None:
        def run(store: Store) -> list[Any]:
            answers: list[Any] = []
            with store.transaction():
                answers += _writes(store, steps)
                answers.append(store.query(**query))
                if fail:
                    raise _Fail()
            return answers

        self.both(run)

    @rule(
        ahead=st.lists(st.tuples(TABLES, IDS), max_size=4),
        before=st.lists(writes(), max_size=3),
        inner=st.lists(writes(), min_size=1, max_size=4),
        inner_query=st.none() | queries(),
        inner_ends=st.sampled_from(["commits", "fails", "refused"]),
        refused=mistyped(),
        middle_fails=st.booleans(),
        reads=st.lists(st.tuples(TABLES, IDS), max_size=3),
        after=st.lists(writes(), max_size=3),
        fail=st.booleans(),
        query=queries(),
    )
    def nested_transaction(
        self,
        ahead: list[tuple[str, str]],
        before: list[tuple[str, str, Any]],
        inner: list[tuple[str, str, Any]],
        inner_query: dict[str, Any] | None,
        inner_ends: str,
        refused: tuple[str, Record],
        middle_fails: bool,
        reads: list[tuple[str, str]],
        after: list[tuple[str, str, Any]],
        fail: bool,
        query: dict[str, Any],
    ) -> None:
        """Two nested savepoints in a transaction, each committing or failing.

        The inner one may hold a record the store refuses; reads inside see each outcome.
        A store that reads ahead (the write-behind store) first reads some records ahead.
        """

        def run(store: Store) -> list[Any]:
            answers: list[Any] = []
            with store.transaction():
                if isinstance(store, ReadAhead):
                    for table in FIELDS:
                        store.read_ahead(table, [i for t, i in ahead if t == table])
                answers += _writes(store, before)
                try:
                    with store.transaction():
                        try:
                            with store.transaction():
                                answers += _writes(store, inner)
                                if inner_query is not None:
                                    answers.append(store.query(**inner_query))
                                if inner_ends == "fails":
                                    raise _Fail()
                                if inner_ends == "refused":
                                    store.put(*refused)
                        except (_Fail, ValueError) as error:
                            answers.append(type(error).__name__)
                        for table, record_id in reads:
                            answers.append(store.get(table, record_id))
                        if middle_fails:
                            raise _Fail()
                except _Fail:
                    answers.append("middle failed")
                for table, record_id in reads:
                    answers.append(store.get(table, record_id))
                answers += _writes(store, after)
                answers.append(store.query(**query))
                if fail:
                    raise _Fail()
            return answers

        self.both(run)

    @invariant()
    def same_contents(self) -> None:
        for table in FIELDS:
            assert self.real.query(table) == self.model.query(table)

    def teardown(self) -> None:
        self.model.close()
        self.real.close()


StoresAgree.TestCase.settings = settings(max_examples=50, stateful_step_count=30, deadline=None)
TestStoresAgree = StoresAgree.TestCase


class WriteBehindStoresAgree(StoresAgree):
    """The store operations work through, over SQLite: it keeps every table's writes."""

    def make_real(self) -> Store:
        return WriteBehindStore(SQLiteStore(":memory:"))


WriteBehindStoresAgree.TestCase.settings = StoresAgree.TestCase.settings
TestWriteBehindStoresAgree = WriteBehindStoresAgree.TestCase


class PostgresStoresAgree(StoresAgree):
    def make_real(self) -> Store:
        return shared_slots().store()

    def teardown(self) -> None:
        self.model.close()  # the slot closes the real store when it is handed out again


PostgresStoresAgree.TestCase.settings = StoresAgree.TestCase.settings


class TestPostgresStoresAgree(PostgresStoresAgree.TestCase):  # type: ignore[misc,valid-type]
    def setUp(self) -> None:
        server_url()  # skips, or fails when required, without a server
