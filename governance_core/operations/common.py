"""Helpers every operation module shares: loading within the tenant, references, lists."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.converter import from_record, to_record
from governance_core.domain.runs import in_reach
from governance_core.domain.supplied_ids import resolve_reference
from governance_core.envelopes import list_envelope
from governance_core.errors import NotFound
from governance_core.fields import Fields
from governance_core.ids import is_pfid
from governance_core.pagination import parse_page_request, parse_sorting
from governance_core.repository import Filter, Record, RecordTable, tenant_filter

__all__ = [
    "equality_filters",
    "list_response",
    "load",
    "load_record",
    "read_instance_ref",
    "reach_filters",
    "resolve_ref",
    "save",
    "started_between",
    "tenant",
]

T = TypeVar("T")



def tenant(ctx: Context) -> Filter:
    """The filter that keeps a query inside the caller's account."""
    return tenant_filter(ctx.account_id)


def load_record(ctx: Context, table: RecordTable, record_id: object) -> Record:
    """The caller's record of ``table``; a malformed, missing or foreign id is ``not_found``.

    The error names the table's resource kind.
    """
    if not is_pfid(record_id):
        raise NotFound(f"{table.kind} not found")
    record = table.get(str(record_id))
    if record is None or record.get("account_id") != ctx.account_id:
        raise NotFound(f"{table.kind} not found")
    return record


def load(ctx: Context, cls: type[T], table: RecordTable, record_id: object) -> T:
    """The caller's resource of ``table`` as a ``cls`` model (see :func:`load_record`)."""
    return from_record(cls, load_record(ctx, table, record_id))


def save(ctx: Context, table: RecordTable, model: Any) -> Record:
    """Store a model in ``table``; the stored record is returned."""
    record = to_record(model)
    table.put(record)
    return record


def resolve_ref(
    ctx: Context, fields: Fields, name: str, kind: str, value: str | None
) -> Record | None:
    """The record a body member refers to, or an error on that member.

    See :func:`~governance_core.domain.supplied_ids.resolve_reference`.
    """
    return resolve_reference(ctx, fields.errors, name, kind, value)


def started_between(fields: Fields) -> list[Filter]:
    """Filters for ``start_time`` and ``end_time``: ``started_at`` within them, both inclusive."""
    filters = []
    start, end = fields.timestamp("start_time"), fields.timestamp("end_time")
    if start is not None:
        filters.append(Filter("started_at", "ge", format_timestamp(start)))
    if end is not None:
        filters.append(Filter("started_at", "le", format_timestamp(end)))
    return filters


def equality_filters(
    fields: Fields,
    ids: Iterable[str] = (),
    choices: Mapping[str, Collection[str]] | None = None,
) -> list[Filter]:
    """Filters for the list members that were sent: ids by value, enumerations by choice.

    A malformed id or a value outside its choices is an error on that member.
    """
    filters: list[Filter] = []
    for name in ids:
        value = fields.id(name)
        if value is not None:
            filters.append(Filter(name, "eq", value))
    for name, allowed in (choices or {}).items():
        chosen = fields.str(name, choices=allowed)
        if chosen is not None:
            filters.append(Filter(name, "eq", chosen))
    return filters


def reach_filters(ctx: Context) -> list[Filter]:
    """What an ingestion token may see: its own agent in its own environment; else no limit."""
    principal = ctx.principal
    assert principal is not None
    if not principal.is_ingestion:
        return []
    return [
        Filter("agent_id", "eq", principal.agent_id),
        Filter("environment_id", "eq", principal.environment_id),
    ]


def list_response(
    ctx: Context,
    fields: Fields,
    table: RecordTable,
    *,
    sortable: Collection[str],
    summarize: Callable[[Record], dict[str, Any]],
    filters: Sequence[Filter] = (),
    scoped: bool = True,
) -> dict[str, Any]:
    """The common list operation: parse page and sorting, count, fetch a page, summarize it.

    Raises the collected field errors (including any the caller gathered before) first.
    """
    page = parse_page_request(fields.data, fields.errors)
    sorting = parse_sorting(fields.data, sortable, fields.errors)
    fields.done()
    conditions = [tenant(ctx), *filters] if scoped else list(filters)
    total = table.count(conditions)
    records = table.query(
        conditions,
        sort=[] if sorting is None else sorting.sort_keys(),
        offset=page.offset,
        limit=page.page_size,
    )
    return list_envelope([summarize(r) for r in records], page, total, sorting)


def read_instance_ref(
    ctx: Context, fields: Fields, name: str = "agent_instance_id"
) -> Record | None:
    """Read the instance a body member names (required).

    A malformed or unknown id is a field error on ``name`` (``invalid_value``; another kind
    of resource: ``unexpected_ref_type``); an instance outside an ingestion token's reach is
    ``not_found``, as if it did not exist.
    """
    instance_id = fields.id(name, required=True)
    instance = resolve_ref(ctx, fields, name, "agent_instance", instance_id)
    if instance is not None and not in_reach(ctx, instance):
        raise NotFound("agent_instance not found")
    return instance
