"""What an instance keeps about its spans, updated on every span write (pure).

An instance record carries ``span_counts``, ``span_schema_counts``,
``last_activity_span_at`` and ``token_groups`` so that reading a run costs the same at 10 or
100,000 spans. Every write of a span (create, finish, cancel by termination) passes the span's
record before and after the change through :func:`apply_span`, in the transaction that stores
the span. Only activity spans count: quality and alert spans are the system's own records.

Stored timestamps are all in the library's one fixed-width UTC form, so they order as text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from governance_core.models.agents import empty_span_counts
from governance_core.models.records import Record
from governance_core.rules.token_groups import token_groups

__all__ = [
    "ACTIVITY",
    "SPAN_AGGREGATES",
    "SpanAggregate",
    "apply_span",
    "last_activity_span_at",
    "latest",
    "span_counts",
    "span_schema_counts",
]

ACTIVITY = "activity"
"""The purpose of spans an agent writes; the only spans the aggregates count."""

SpanAggregate = Callable[[Record, Record | None, Record], dict[str, Any]]
"""One aggregate: ``(instance, span before or None when new, span after) -> changed fields``."""


def span_counts(instance: Record, before: Record | None, after: Record) -> dict[str, Any]:
    """Count spans by status (``total`` counts each span once)."""
    counts = dict(instance.get("span_counts") or empty_span_counts())
    if before is None:
        counts["total"] = counts.get("total", 0) + 1
    else:
        counts[before["status"]] = counts.get(before["status"], 0) - 1
    counts[after["status"]] = counts.get(after["status"], 0) + 1
    return {"span_counts": counts}


def span_schema_counts(instance: Record, before: Record | None, after: Record) -> dict[str, Any]:
    """Count invocations by span schema name (a span counts once, when it is created)."""
    if before is not None:
        return {}
    counts = dict(instance.get("span_schema_counts") or {})
    counts[after["schema_name"]] = counts.get(after["schema_name"], 0) + 1
    return {"span_schema_counts": counts}


def last_activity_span_at(
    instance: Record, before: Record | None, after: Record
) -> dict[str, Any]:
    """Keep the latest moment any span started or finished.

    A span that arrives late with earlier times never moves it back.
    """
    current = instance.get("last_activity_span_at")
    newest = latest(current, after.get("started_at"), after.get("finished_at"))
    return {} if newest == current else {"last_activity_span_at": newest}


SPAN_AGGREGATES: tuple[SpanAggregate, ...] = (
    span_counts,
    span_schema_counts,
    last_activity_span_at,
    token_groups,
)
"""Every span-derived aggregate of an instance, applied in this order."""


def apply_span(instance: Record, before: Record | None, after: Record) -> Record:
    """Return ``instance`` with its aggregates moved by one span write.

    ``before`` is None for a new span. Quality and alert spans leave the instance unchanged.
    """
    if after.get("purpose", ACTIVITY) != ACTIVITY:
        return instance
    updated = dict(instance)
    for aggregate in SPAN_AGGREGATES:
        updated.update(aggregate(updated, before, after))
    return updated


def latest(*stamps: str | None) -> str | None:
    """Return the latest of stored timestamps, ignoring nulls (None when all are null)."""
    present = [stamp for stamp in stamps if stamp is not None]
    return max(present) if present else None

