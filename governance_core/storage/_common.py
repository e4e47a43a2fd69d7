"""Pieces every adapter shares: argument checks, declared-field values and the JSON of records.

The checks make the adapters agree on what they refuse: every one raises ``ValueError`` for an
unknown table, an undeclared field, a malformed filter, sort key or page, and a record whose
declared fields hold values of another type than the schema declares.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from typing import Any, get_args

from governance_core import jsontext
from governance_core.storage.protocol import (
    AggregateRow,
    Filter,
    FilterOp,
    GroupBy,
    NullsOrder,
    Record,
    SortKey,
)
from governance_core.storage.schema import TABLES, Column, ColumnType

__all__ = [
    "DAY_LENGTH",
    "PageQuery",
    "check_aggregate",
    "check_integer_sum",
    "check_key",
    "fold_groups",
    "check_marked",
    "check_page",
    "check_query",
    "column_values",
    "decode",
    "encode",
    "matches",
    "pages_by_id",
    "sorted_groups",
]

_FILTER_OPS = frozenset(get_args(FilterOp))
_NULLS_ORDERS = frozenset(get_args(NullsOrder))
_COLLECTIONS = (list, tuple, set, frozenset)
_ID = Column("id")
_DECLARED: dict[str, dict[str, Column]] = {
    name: {"id": _ID, **{column.name: column for column in table.columns}}
    for name, table in TABLES.items()
}
# Each table's declared fields, in order: name, whether it holds text, and the column.
_TYPED: dict[str, tuple[tuple[str, bool, Column], ...]] = {
    name: tuple((column.name, column.type == "text", column) for column in columns.values())
    for name, columns in _DECLARED.items()
}
# A signed 64-bit integer is what SQL databases index; a double holds integers exactly to 2**53.
_INTEGER_RANGE = range(-(2**63), 2**63)
_EXACT_REAL = 2**53


def _columns(table: str) -> dict[str, Column]:
    try:
        return _DECLARED[table]
    except (KeyError, TypeError):
        raise ValueError(f"unknown table {table!r}") from None


def check_marked(tables: Collection[str]) -> list[str]:
    """Return ``tables`` as a list; ValueError for one the schema does not mark (change_mark)."""
    for table in tables:
        _columns(table)
        if not TABLES[table].marked:
            raise ValueError(f"{table} is not a marked table")
    return list(tables)


def check_key(table: str, record_id: str) -> None:
    """Raise ValueError for an unknown table or an id that is not a string."""
    _columns(table)
    if not isinstance(record_id, str):
        raise ValueError(f"an id is a string, not {record_id!r}")


def _fits(kind: ColumnType, value: Any) -> bool:
    if kind == "text":
        return isinstance(value, str) and (value.isascii() or _utf8(value))
    if kind == "integer":
        return isinstance(value, int) and value in _INTEGER_RANGE
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return -_EXACT_REAL <= value <= _EXACT_REAL
    return isinstance(value, float) and math.isfinite(value)


def _utf8(value: str) -> bool:
    # Lone surrogates survive JSON's escapes but no database's text type.
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _check_value(table: str, column: Column, value: Any) -> None:
    if value is not None and not _fits(column.type, value):
        raise ValueError(f"{table}.{column.name} holds {column.type}, not {value!r}")


def column_values(table: str, record: Record) -> list[Any]:
    """Return the record's declared fields in declaration order (``id`` first), checked by type.

    Booleans count as integers; a missing field is ``None``.
    """
    if not isinstance(record, dict):
        raise ValueError(f"a record is a dict, not {type(record).__name__}")
    try:
        columns = _TYPED[table]
    except (KeyError, TypeError):
        raise ValueError(f"unknown table {table!r}") from None
    if not isinstance(record.get("id"), str):
        raise ValueError("a record needs a string id")
    values = [record.get(name) for name, _, _ in columns]
    for value, (_, is_text, column) in zip(values, columns, strict=True):
        # Inline for the common case (runs on every column of every write): an ASCII text.
        if value is not None and not (is_text and type(value) is str and value.isascii()):
            _check_value(table, column, value)
    return values


def check_page(offset: int, limit: int | None) -> None:
    """Raise ValueError unless ``offset`` is an integer >= 0 and ``limit`` None or one >= 0."""
    for name, value in (("offset", offset), ("limit", 0 if limit is None else limit)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an integer of 0 or more, not {value!r}")


def check_query(table: str, filters: Sequence[Filter], sort: Sequence[SortKey] = ()) -> None:
    """Raise ValueError for an unknown table, an undeclared field or a malformed condition."""
    columns = _columns(table)
    for condition in filters:
        column = columns.get(condition.field)
        if column is None:
            raise ValueError(f"{table}.{condition.field} is not a declared field")
        if condition.op not in _FILTER_OPS:
            raise ValueError(f"unknown filter operator {condition.op!r}")
        if condition.op != "in":
            _check_value(table, column, condition.value)
            continue
        if not isinstance(condition.value, _COLLECTIONS):
            raise ValueError(f"'in' takes a list of values, not {condition.value!r}")
        for item in condition.value:
            _check_value(table, column, item)
    for key in sort:
        if key.field not in columns:
            raise ValueError(f"{table}.{key.field} is not a declared field")
        if key.nulls not in _NULLS_ORDERS:
            raise ValueError(f"nulls must be first, last or auto, not {key.nulls!r}")


DAY_LENGTH = 10
"""How many leading characters of a stored timestamp name its UTC date (``YYYY-MM-DD``)."""


def check_aggregate(
    table: str, group_by: Sequence[GroupBy], sums: Sequence[str], filters: Sequence[Filter]
) -> list[Column]:
    """Check an aggregate's arguments (see :meth:`Store.aggregate`); return the summed columns.

    ValueError for what :func:`check_query` refuses, a key or sum on an undeclared field, a
    ``day`` key on a field that is not text, a sum over text, or a field summed twice.
    """
    check_query(table, filters)
    columns = _columns(table)
    for key in group_by:
        if not isinstance(key, GroupBy):
            raise ValueError(f"group_by takes GroupBy keys, not {key!r}")
        column = columns.get(key.field)
        if column is None:
            raise ValueError(f"{table}.{key.field} is not a declared field")
        if key.day and column.type != "text":
            raise ValueError(f"{table}.{key.field} is not text: it has no day to group by")
    summed: list[Column] = []
    for name in sums:
        column = columns.get(name) if isinstance(name, str) else None
        if column is None:
            raise ValueError(f"{table}.{name} is not a declared field")
        if column.type == "text":
            raise ValueError(f"{table}.{name} holds text: it cannot be summed")
        if column in summed:
            raise ValueError(f"{table}.{name} is summed twice")
        summed.append(column)
    return summed


def check_integer_sum(total: int) -> int:
    """Return ``total``; ValueError when it leaves a signed 64-bit integer (as SQLite's sum)."""
    if total not in _INTEGER_RANGE:
        raise ValueError("an integer sum is outside a signed 64-bit integer")
    return total


def fold_groups(
    rows: Iterable[Sequence[Any]], width: int, summed: Sequence[Column]
) -> list[AggregateRow]:
    """Group rows of ``width`` key values then one value per summed column, in Python.

    The aggregate of records read one by one (the memory adapter; SQLite after its own sum
    overflowed part way although the total may fit), with the port's meaning of every sum.
    """
    groups: dict[tuple[Any, ...], list[Any]] = {}
    for row in rows:
        key = tuple(row[:width])
        group = groups.setdefault(key, [0, *([None] * len(summed))])
        group[0] += 1
        for index, value in enumerate(row[width:], start=1):
            if value is not None:
                group[index] = (group[index] or 0) + value
    return sorted_groups(
        AggregateRow(key, group[0], tuple(
            None if total is None
            else check_integer_sum(int(total)) if column.type == "integer"
            else float(total)
            for total, column in zip(group[1:], summed, strict=True)
        ))
        for key, group in groups.items()
    )


def sorted_groups(rows: Iterable[AggregateRow]) -> list[AggregateRow]:
    """Return aggregate rows ordered by key, nulls first (every adapter answers in this order).

    Sorting here rather than in SQL keeps one order on every database: text by code point
    whatever the collation, nulls first whatever the engine's default.
    """
    return sorted(rows, key=lambda row: tuple((v is not None, v) for v in row.key))


def encode(record: Record) -> str:
    """Return the stored text of a record: compact JSON, refusing anything JSON cannot hold."""
    try:
        return jsontext.dumps(record)
    except ValueError as error:
        raise ValueError(f"a record must hold JSON values only: {error}") from None


def decode(text: str) -> Record:
    """Return the record a stored text holds."""
    value: dict[str, Any] = jsontext.loads(text)
    return value


PageQuery = Callable[[str, list[Filter], int], list[Record]]
"""``query(table, filters, limit)``: one page of matching records in id order."""


def pages_by_id(
    query: PageQuery, table: str, filters: list[Filter], size: int = 500
) -> Iterator[Record]:
    """Yield every matching record in id order, ``size`` at a time, each page after the last id.

    Paging by key rather than by offset keeps each page as cheap as the first.
    """
    page = query(table, filters, size)
    while True:
        yield from page
        if len(page) < size:
            return
        page = query(table, [*filters, Filter("id", "gt", page[-1]["id"])], size)


def matches(record: Record, filters: Sequence[Filter]) -> bool:
    """Whether ``record`` meets every filter, as the SQL adapters' ``WHERE`` decides it.

    A missing or null field equals only None and differs only from a value; ``in`` never
    matches a null; an order comparison with a null is false.
    """
    return all(_meets(record.get(condition.field), condition) for condition in filters)


def _meets(value: Any, condition: Filter) -> bool:
    op, expected = condition.op, condition.value
    if op == "eq":
        return value is None if expected is None else value is not None and value == expected
    if op == "ne":
        return value is not None if expected is None else value is not None and value != expected
    if op == "in":
        return value is not None and any(item is not None and value == item for item in expected)
    if value is None or expected is None:
        return False
    if op == "lt":
        return bool(value < expected)
    if op == "le":
        return bool(value <= expected)
    if op == "gt":
        return bool(value > expected)
    return bool(value >= expected)
