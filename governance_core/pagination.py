"""List requests: page, sorting and the pagination arithmetic of the interface (pure)."""

from __future__ import annotations

import math
import re
from collections.abc import Collection, Mapping
from typing import Any, Literal

import attrs

from governance_core.errors import FieldErrors
from governance_core.storage.protocol import NullsOrder, SortKey

__all__ = [
    "DEFAULT_PAGE_SIZE",
    "MAX_OFFSET",
    "MAX_PAGE_SIZE",
    "PageRequest",
    "Sorting",
    "pagination_output",
    "parse_page_request",
    "parse_sorting",
]

_DIGITS = re.compile(r"-?[0-9]{1,30}")

DEFAULT_PAGE_SIZE = 25
MAX_PAGE_SIZE = 100
MAX_OFFSET = 2**53 - 1
"""The largest offset a list accepts: the largest integer every JSON client reads exactly,
and well inside the 64-bit integers every store takes."""


@attrs.frozen
class PageRequest:
    """Which page a list asks for."""

    offset: int = 0
    page_size: int = DEFAULT_PAGE_SIZE


@attrs.frozen
class Sorting:
    """The order a list asks for."""

    field: str
    direction: Literal["asc", "desc"] = "asc"
    nulls: NullsOrder = "auto"

    def to_json(self) -> dict[str, str]:
        """The interface's sorting object."""
        return {"direction": self.direction, "field": self.field, "nulls": self.nulls}

    def sort_keys(self) -> list[SortKey]:
        """The storage sort keys (ties are broken by id by every adapter)."""
        return [SortKey(self.field, self.direction == "desc", self.nulls)]


def pagination_output(page: PageRequest, item_count: int, page_length: int) -> dict[str, Any]:
    """The interface's pagination object for one page of ``page_length`` items."""
    offset, size = page.offset, page.page_size
    return {
        "item_count": item_count,
        "item_start": offset + 1 if page_length else 0,
        "item_end": offset + page_length if page_length else 0,
        "page_count": math.ceil(item_count / size),
        "page_index": offset // size + 1,
        "page_offset": offset,
        "page_size": size,
        "next_page_offset": offset + size if offset + size < item_count else None,
        "previous_page_offset": max(0, offset - size) if offset > 0 else None,
    }


def _member(params: Mapping[str, Any], group: str, name: str) -> tuple[bool, Any]:
    flat = f"{group}[{name}]"
    if flat in params:
        return True, params[flat]
    nested = params.get(group)
    if isinstance(nested, Mapping) and name in nested:
        return True, nested[name]
    return False, None


def _integer(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
        return int(value.strip())
    return None


def parse_page_request(params: Mapping[str, Any], errors: FieldErrors) -> PageRequest:
    """The page asked for by ``pagination[offset]`` / ``pagination[page_size]`` (or nested)."""
    offset, size = 0, DEFAULT_PAGE_SIZE
    present, raw = _member(params, "pagination", "offset")
    if present and raw is not None:
        value = _integer(raw)
        if value is None or not 0 <= value <= MAX_OFFSET:
            errors.invalid("pagination[offset]", f"must be an integer from 0 to {MAX_OFFSET}")
        else:
            offset = value
    present, raw = _member(params, "pagination", "page_size")
    if present and raw is not None:
        value = _integer(raw)
        if value is None or not 1 <= value <= MAX_PAGE_SIZE:
            errors.invalid("pagination[page_size]", f"must be an integer from 1 to {MAX_PAGE_SIZE}")
        else:
            size = value
    return PageRequest(offset, size)


def parse_sorting(
    params: Mapping[str, Any], sortable: Collection[str], errors: FieldErrors
) -> Sorting | None:
    """The sorting asked for: ``sorting=-name`` or ``sorting[field]`` and its siblings."""
    raw = params.get("sorting")
    field: Any = None
    direction: Any = "asc"
    nulls: Any = "auto"
    if isinstance(raw, str) and raw:
        field, direction = (raw[1:], "desc") if raw.startswith("-") else (raw, "asc")
    else:
        present, field = _member(params, "sorting", "field")
        if not present or field is None:
            if raw not in (None, "") and not isinstance(raw, Mapping):
                errors.invalid("sorting", "must be a field name, optionally prefixed with -")
            return None
        direction = _member(params, "sorting", "direction")[1] or "asc"
        nulls = _member(params, "sorting", "nulls")[1] or "auto"
    label = "sorting" if isinstance(raw, str) else "sorting[field]"
    ok = True
    if not isinstance(field, str) or field not in sortable:
        errors.invalid(label, f"must be one of: {', '.join(sorted(sortable))}")
        ok = False
    if direction not in ("asc", "desc"):
        errors.invalid("sorting[direction]", "must be asc or desc")
        ok = False
    if nulls not in ("first", "last", "auto"):
        errors.invalid("sorting[nulls]", "must be first, last or auto")
        ok = False
    return Sorting(field, direction, nulls) if ok else None
