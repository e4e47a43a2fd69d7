"""Success envelopes, shared by the HTTP endpoints, bulk outputs and embedders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from governance_core.converter import json_ready
from governance_core.pagination import PageRequest, Sorting, pagination_output

__all__ = ["details_envelope", "list_envelope", "ready_envelope", "success"]


def success(**members: Any) -> dict[str, Any]:
    """``{"status": "success", ...members}``, JSON-ready."""
    return {"status": "success", **json_ready(members)}


def ready_envelope(details: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The one-resource envelope of a ``details`` (and ``extra``) already JSON-ready.

    Views made from stored records (:mod:`governance_core.views`) are; this skips the walk
    :func:`success` makes over every value.
    """
    return {"status": "success", "details": details, **extra}


def details_envelope(details: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """The one-resource envelope: ``{status, details}`` plus any extra members."""
    return success(details=details, **extra)


def list_envelope(
    summaries: Sequence[dict[str, Any]],
    page: PageRequest,
    item_count: int,
    sorting: Sorting | None,
) -> dict[str, Any]:
    """The list envelope: ``{status, summaries, pagination, sorting}``."""
    return success(
        summaries=list(summaries),
        pagination=pagination_output(page, item_count, len(summaries)),
        sorting=None if sorting is None else sorting.to_json(),
    )
