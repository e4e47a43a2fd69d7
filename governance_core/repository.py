"""Typed access to stored records: the only place outside storage that names a table.

``Tables(store).decisions.get(id)`` answers a decision's record (or None), and each table
of the schema is an attribute of :class:`Tables` (``ctx.tables`` in a handler), so a table
name is checked where it is written rather than found wrong by the store at run time; the
layering test forbids naming a table to the store anywhere else. ``tables.of_kind(kind)`` is
the table of a resource kind (its ``type``), declared in the schema only
(:data:`KIND_TABLES`); ``tables.ids`` holds every resource's id and kind, and
``tables.agent_day_costs`` each agent's cost per day (:func:`day_cost`).

``Repository(store).instances.get(id)`` answers an :class:`AgentInstance` (or None) and
``put(model)`` stores one: the run family read and written as models. Handlers take
:class:`Filter` and :class:`Record` from here, so no handler imports the storage package.
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs

from governance_core.converter import from_record, to_record
from governance_core.models.agents import (
    Agent,
    AgentInstance,
    AgentSchemaVersion,
    AgentSpan,
)
from governance_core.models.records import Record
from governance_core.storage.protocol import (
    AggregateRow,
    ChangeMarks,
    Filter,
    GroupBy,
    Query,
    ReadAhead,
    SortKey,
    Store,
)
from governance_core.storage.schema import IDS, TABLES, day_cost_id, kinded_tables

__all__ = [
    "IDS",
    "KIND_TABLES",
    "Filter",
    "FirstReads",
    "GroupBy",
    "ModelTable",
    "Query",
    "Record",
    "RecordTable",
    "Repository",
    "SortKey",
    "Tables",
    "day_cost",
    "tenant_filter",
]

M = TypeVar("M")

KIND_TABLES: dict[str, str] = {
    table.kind: table.name for table in kinded_tables() if table.kind is not None
}
"""Each resource kind (its ``type``) and the table that holds it (declared in the schema)."""


def tenant_filter(account_id: str) -> Filter:
    """The filter that keeps a query inside one account."""
    return Filter("account_id", "eq", account_id)


class RecordTable:
    """The records of one table of the schema: the store's calls, with the table named once."""

    __slots__ = ("name", "store")

    def __init__(self, store: Store, name: str) -> None:
        self.store = store
        self.name = name

    @property
    def kind(self) -> str | None:
        """The resource kind (its ``type``) the table holds, or None for a table of no kind."""
        return TABLES[self.name].kind

    def get(self, record_id: str) -> Record | None:
        """The record stored under ``record_id``, or None."""
        return self.store.get(self.name, record_id)

    def put(self, record: Record) -> None:
        """Insert ``record``, or replace the stored record with its id."""
        self.store.put(self.name, record)

    def delete(self, record_id: str) -> bool:
        """Delete the record under ``record_id``; whether there was one."""
        return self.store.delete(self.name, record_id)

    def query(
        self,
        filters: Sequence[Filter] = (),
        sort: Sequence[SortKey] = (),
        offset: int = 0,
        limit: int | None = None,
    ) -> list[Record]:
        """The records matching every filter, in ``sort`` order, one page of them."""
        return self.store.query(self.name, filters, sort, offset, limit)

    def count(self, filters: Sequence[Filter] = ()) -> int:
        """How many records match every filter."""
        return self.store.count(self.name, filters)

    def iterate(self, filters: Sequence[Filter] = ()) -> Iterator[Record]:
        """Every matching record in id order, streamed."""
        return self.store.iterate(self.name, filters)

    def aggregate(
        self,
        group_by: Sequence[GroupBy] = (),
        sums: Sequence[str] = (),
        filters: Sequence[Filter] = (),
    ) -> list[AggregateRow]:
        """The matching records counted, and ``sums`` summed, per group of ``group_by``."""
        return self.store.aggregate(self.name, group_by, sums, filters)

    def read_ahead(self, record_ids: Collection[str]) -> bool:
        """Read the records under ``record_ids`` at once for later gets; whether the store could.

        A store without :class:`~governance_core.storage.protocol.ReadAhead` reads nothing.
        """
        if not isinstance(self.store, ReadAhead):
            return False
        self.store.read_ahead(self.name, record_ids)
        return True

    def know_absent(self, record_ids: Collection[str]) -> bool:
        """Take the records under ``record_ids`` as missing for later gets; whether the store could.

        Only for ids no one outside the transaction can know yet. A store without
        :class:`~governance_core.storage.protocol.ReadAhead` keeps reading them.
        """
        if not isinstance(self.store, ReadAhead):
            return False
        self.store.know_absent(self.name, record_ids)
        return True


_UNASKED: Any = object()


class _TableOf:
    """A :class:`Tables` attribute: the table of its own name, made on first use."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    @overload
    def __get__(self, tables: None, owner: type) -> _TableOf: ...

    @overload
    def __get__(self, tables: Tables, owner: type) -> RecordTable: ...

    def __get__(self, tables: Tables | None, owner: type) -> RecordTable | _TableOf:
        if tables is None:
            return self
        table = tables.__dict__[self.name] = RecordTable(tables.store, self.name)
        return table


@attrs.frozen
class FirstReads:
    """What a write will read first, for the store to read together as its transaction opens.

    ``records`` by table and id, and ``queries`` as the write will ask them: an operation's
    ``prepare`` answers them, and where the store reaches the database over the network
    (:class:`~governance_core.storage.protocol.ReadsTogether`) they cost one round trip
    with the transaction's ``BEGIN``, not one each.
    """

    records: tuple[tuple[str, str], ...] = ()
    queries: tuple[Query, ...] = ()


class Tables:
    """Every table of the schema over one store, each a :class:`RecordTable` attribute."""

    accounts = _TableOf()
    admin_users = _TableOf()
    admin_user_invites = _TableOf()
    api_tokens = _TableOf()
    people = _TableOf()
    teams = _TableOf()
    team_memberships = _TableOf()
    environments = _TableOf()
    risk_profiles = _TableOf()
    agents = _TableOf()
    agent_versions = _TableOf()
    agent_schema_versions = _TableOf()
    agent_deployments = _TableOf()
    agent_instances = _TableOf()
    agent_spans = _TableOf()
    alerts = _TableOf()
    run_models = _TableOf()
    sensitive_values = _TableOf()
    idempotency_keys = _TableOf()
    console_sessions = _TableOf()
    console_secrets = _TableOf()
    sensitive_reveals = _TableOf()
    destinations = _TableOf()
    notification_events = _TableOf()
    deliveries = _TableOf()
    delivery_attempts = _TableOf()
    monitors = _TableOf()
    sender_leases = _TableOf()
    policies = _TableOf()
    decisions = _TableOf()
    approvals = _TableOf()
    ids = _TableOf()
    agent_day_costs = _TableOf()

    def __init__(self, store: Store) -> None:
        self.store = store

    def of_kind(self, kind: str) -> RecordTable:
        """The table holding resources of ``kind`` (a resource ``type``)."""
        table: RecordTable = getattr(self, KIND_TABLES[kind])
        return table

    def change_mark(self, *tables: RecordTable) -> Hashable | None:
        """The store's mark of ``tables`` as they stand now, or None where it keeps none.

        Two equal marks promise that no record of ``tables`` changed in between
        (:class:`~governance_core.storage.protocol.ChangeMarks`).
        """
        marks = self.__dict__.get("_marks", _UNASKED)
        if marks is _UNASKED:
            # Asked once: an isinstance check of a runtime protocol inspects the class each time.
            marks = self.__dict__["_marks"] = (
                self.store if isinstance(self.store, ChangeMarks) else None
            )
        if marks is None:
            return None
        mark: Hashable = marks.change_mark([table.name for table in tables])
        return mark


def day_cost(tables: Tables, agent_id: str, day: str) -> float:
    """The stored cost of the runs ``agent_id`` started on the UTC ``day`` (``YYYY-MM-DD``).

    One read by primary key of what the store keeps as it writes runs
    (:data:`~governance_core.storage.schema.DAY_COSTS`), however many runs that day had.
    """
    record = tables.agent_day_costs.get(day_cost_id(agent_id, day))
    return 0.0 if record is None else float(record["total_cost"] or 0)


class ModelTable(Generic[M]):
    """One table of ``model`` records."""

    def __init__(self, store: Store, kind: str, model: type[M]) -> None:
        self.store = store
        self.kind = kind
        self.name = KIND_TABLES[kind]
        self.model = model

    def get(self, record_id: str) -> M | None:
        """The model stored under ``record_id``, or None."""
        record = self.store.get(self.name, record_id)
        return None if record is None else from_record(self.model, record)

    def get_record(self, record_id: str) -> Record | None:
        """The stored record under ``record_id``, or None."""
        return self.store.get(self.name, record_id)

    def put(self, model: M) -> Record:
        """Store ``model``; its stored record."""
        record = to_record(model)
        self.store.put(self.name, record)
        return record

    def put_record(self, record: Record) -> None:
        """Store a record of this table as it is."""
        self.store.put(self.name, record)

    def query(self, filters: list[Filter], **page: Any) -> list[M]:
        """The models matching ``filters`` (``sort``, ``offset``, ``limit`` as the port's)."""
        return [from_record(self.model, r) for r in self.store.query(self.name, filters, **page)]


class Repository:
    """The typed tables of the run family over one store."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.agents = ModelTable(store, "agent", Agent)
        self.instances = ModelTable(store, "agent_instance", AgentInstance)
        self.spans = ModelTable(store, "agent_span", AgentSpan)
        self.schema_versions = ModelTable(store, "agent_schema_version", AgentSchemaVersion)
