"""Typed access to stored records: table names and the record mapping in one place.

``Repository(store).instances.get(id)`` answers an :class:`AgentInstance` (or None);
``put(model)`` stores one and answers its record. Each resource kind (its ``type``) and its
table are declared in the schema only, and named here (:data:`KIND_TABLES`); :data:`IDS` is
the table of every resource's id and kind. Handlers take :class:`Filter` and :class:`Record`
from here, so no handler imports the storage package.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from governance_core.converter import from_record, to_record
from governance_core.models.agents import (
    Agent,
    AgentInstance,
    AgentSchemaVersion,
    AgentSpan,
)
from governance_core.storage.protocol import Filter, Record, SortKey, Store
from governance_core.storage.schema import IDS, kinded_tables

__all__ = [
    "IDS",
    "KIND_TABLES",
    "Filter",
    "ModelTable",
    "Record",
    "Repository",
    "SortKey",
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
