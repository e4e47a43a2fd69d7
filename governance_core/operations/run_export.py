"""A whole run in one read: the run's details and its spans, page by page after a cursor.

``agent_instances/export`` answers the run (as ``agent_instances/show`` does) and up to
``page_size`` of its spans (default and most :data:`EXPORT_PAGE_MAX`) in a stable order,
``started_at`` then ``id`` (the order of ``agent_spans/list`` sorted by ``started_at``), with
``next_cursor`` naming where the next page starts (null after the last span). The spans are
read with one keyset query a page (:func:`spans_after`), never with an offset, so a page of a
100,000-span run costs what the first does, and a reader that walks the pages (the HTTP JSON
Lines export) holds one page at a time.

Spans are shown as lists show them, redacted (sensitive markers without ``value``) unless the
caller asks ``redacted=false`` and may see values (an account token, decisions 11); then the
run's quality payloads show their values too. An ingestion token exports its own runs only;
any other run, and another account's, is ``not_found``. Spans written while a reader walks
the pages appear when they sort after its cursor.
"""

from __future__ import annotations

import re
from typing import Any, Final

import attrs

from governance_core.context import Context
from governance_core.domain.sensitive_values import may_reveal, reveal_quality
from governance_core.envelopes import ready_envelope
from governance_core.fields import Fields
from governance_core.ids import is_pfid
from governance_core.operations.agent_instances import instance_details, load_instance
from governance_core.operations.agent_spans import SpanTypes, SpanView, span_details
from governance_core.operations.common import tenant
from governance_core.registry import ANY_SCOPE, operation
from governance_core.repository import Filter, Record, SortKey

__all__ = [
    "CURSOR_PATTERN",
    "EXPORT_PAGE_MAX",
    "SpanPosition",
    "export_run",
    "spans_after",
]

EXPORT_PAGE_MAX: Final = 1000
"""The most spans one page of an export holds, and the number a page holds by default."""

_TIMESTAMP = r"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]{6}Z"
CURSOR_PATTERN: Final = rf"^{_TIMESTAMP}_[0-7][0-9a-hjkmnp-tv-z]{{31}}$"
"""What a cursor looks like: the last span's ``started_at``, ``_``, and its id."""

_CURSOR = re.compile(CURSOR_PATTERN)
_ORDER = (SortKey("started_at"), SortKey("id"))


@attrs.frozen
class SpanPosition:
    """A place in a run's span order: after the span started at ``started_at`` with ``id``."""

    started_at: str
    id: str

    @classmethod
    def of(cls, record: Record) -> SpanPosition:
        """The position of a stored span."""
        return cls(record["started_at"], record["id"])

    @classmethod
    def parse(cls, cursor: str) -> SpanPosition | None:
        """The position a cursor names; None when it is not one."""
        if not _CURSOR.fullmatch(cursor):
            return None
        started_at, _, span_id = cursor.rpartition("_")
        return cls(started_at, span_id) if is_pfid(span_id) else None

    @property
    def cursor(self) -> str:
        """The cursor text of this position (see :data:`CURSOR_PATTERN`)."""
        return f"{self.started_at}_{self.id}"


def spans_after(
    ctx: Context, instance_id: str, after: SpanPosition | None, limit: int
) -> list[Record]:
    """Up to ``limit`` stored spans of a run, in (``started_at``, ``id``) order, after ``after``.

    The store's filters are all conjunctive, so the keyset condition ``(started_at, id) >
    after`` is asked in two indexed queries: the spans that share ``after``'s start time with
    a greater id, then those that start later. Neither reads a span before the position.
    """
    run = [tenant(ctx), Filter("agent_instance_id", "eq", instance_id)]
    if after is None:
        return ctx.tables.agent_spans.query(run, sort=_ORDER, limit=limit)
    same_start = ctx.tables.agent_spans.query([
        *run, Filter("started_at", "eq", after.started_at), Filter("id", "gt", after.id),
    ], sort=_ORDER, limit=limit)
    if len(same_start) == limit:
        return same_start
    later = ctx.tables.agent_spans.query(
        [*run, Filter("started_at", "gt", after.started_at)],
        sort=_ORDER, limit=limit - len(same_start),
    )
    return same_start + later


@operation("agent_instances/export", write=False, scopes=ANY_SCOPE)
def export_run(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Export a run: its details and a page of its spans, in start order, after ``cursor``.

    ``page_size`` (1 to 1000, default 1000) spans follow the ``cursor`` a previous page
    answered as ``next_cursor`` (none: the first spans); ``next_cursor`` is null after the
    last span. Spans are redacted unless ``redacted=false`` is asked by an account token.
    """
    record = load_instance(ctx, fields.raw("agent_instance_id"))
    # Read as sent, not stripped: a cursor is only ever one an export answered.
    cursor = fields.raw("cursor")
    after = SpanPosition.parse(cursor) if isinstance(cursor, str) else None
    if cursor is not None and after is None:
        fields.errors.invalid("cursor", "cursor must be a next_cursor an export answered")
    page_size = fields.int(
        "page_size", minimum=1, maximum=EXPORT_PAGE_MAX, default=EXPORT_PAGE_MAX
    )
    revealed = may_reveal(ctx, fields.bool("redacted", default=True))
    fields.done()
    assert page_size is not None
    details = instance_details(ctx, record)
    if revealed:
        details["quality_payloads"] = reveal_quality(ctx, record["id"], details["quality_payloads"])
    # One more than the page tells whether another page follows without a count.
    records = spans_after(ctx, record["id"], after, page_size + 1)
    page = records[:page_size]
    view = SpanView(redacted=not revealed)
    span_types = SpanTypes(ctx)
    spans = [span_details(ctx, span, view, span_types.entry(span)) for span in page]
    next_cursor = SpanPosition.of(page[-1]).cursor if len(records) > page_size else None
    return ready_envelope(details, spans=spans, next_cursor=next_cursor)
