"""Pieces every adapter shares: field checks and the JSON encoding of records."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from governance_core.storage.protocol import Filter, Record, SortKey
from governance_core.storage.schema import TABLES, column_names

__all__ = ["check_fields", "decode", "encode"]


def check_fields(table: str, filters: Sequence[Filter], sort: Sequence[SortKey]) -> None:
    """Raise ValueError for an unknown table or a field it does not declare."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}")
    allowed = column_names(table)
    for name in [f.field for f in filters] + [s.field for s in sort]:
        if name not in allowed:
            raise ValueError(f"{table}.{name} is not a declared field")


def encode(record: Record) -> str:
    """The stored text of a record: compact JSON, refusing anything JSON cannot hold."""
    if not isinstance(record.get("id"), str):
        raise ValueError("a record needs a string id")
    return json.dumps(record, separators=(",", ":"), allow_nan=False)


def decode(text: str) -> Record:
    """A record from its stored text."""
    value: dict[str, Any] = json.loads(text)
    return value
