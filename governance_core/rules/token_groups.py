"""An instance's token usage per (model, provider), kept on every span write (pure).

Each activity span contributes the usage :func:`governance_core.rules.cost.extract_usage`
reads from its latest payloads. A write passes the span before and after the change: the
span's previous contribution is taken out and its new one put in, so a span created without
usage and finished with it, or written twice, counts once. Groups also count the spans that
contribute to them, and a group no span contributes to any more is dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from governance_core.models.records import Record
from governance_core.rules.cost import UNKNOWN_MODEL, TokenGroup, Usage, extract_usage

__all__ = ["apply_usage", "span_usage", "stored_token_groups", "token_groups"]

_COUNTS = ("input", "output", "cache_read", "spans")
_NO_COUNTS = dict.fromkeys(_COUNTS, 0)


def span_usage(span: Record | None) -> Usage | None:
    """Return the usage an activity span reports in its payloads, or None."""
    if span is None:
        return None
    return extract_usage(span.get("payload"), span.get("result_payload"))


def _key(group: Mapping[str, Any]) -> tuple[str, str | None]:
    return (group["model_name"], group.get("provider"))


def _sort_key(key: tuple[str, str | None]) -> tuple[str, bool, str]:
    return (key[0], key[1] is not None, key[1] or "")


def apply_usage(
    groups: Iterable[Mapping[str, Any]], removed: Usage | None, added: Usage | None
) -> list[dict[str, Any]]:
    """Return stored groups with one span's old usage taken out and its new usage put in.

    Groups are ``{model_name, provider, input, output, cache_read, spans}``, sorted by model
    name then provider (no provider first); a group whose ``spans`` reaches 0 is dropped.
    """
    merged: dict[tuple[str, str | None], dict[str, Any]] = {
        _key(group): {**_NO_COUNTS, **group} for group in groups
    }
    for usage, sign in ((removed, -1), (added, 1)):
        if usage is None:
            continue
        model_name = usage.model or UNKNOWN_MODEL
        entry = merged.get((model_name, usage.provider))
        if entry is None:
            entry = {"model_name": model_name, "provider": usage.provider, **_NO_COUNTS}
            merged[(model_name, usage.provider)] = entry
        entry["input"] += sign * usage.input
        entry["output"] += sign * usage.output
        entry["cache_read"] += sign * usage.cache_read
        entry["spans"] += sign
    return [merged[key] for key in sorted(merged, key=_sort_key) if merged[key]["spans"] > 0]


def token_groups(instance: Record, before: Record | None, after: Record) -> dict[str, Any]:
    """The span aggregate of token usage (see :data:`governance_core.rules.aggregates`)."""
    removed, added = span_usage(before), span_usage(after)
    if removed == added:
        return {}
    return {"token_groups": apply_usage(instance.get("token_groups") or [], removed, added)}


def stored_token_groups(instance: Record) -> list[TokenGroup]:
    """Return an instance record's stored groups as :class:`TokenGroup` values to price."""
    return [
        TokenGroup(
            model_name=group["model_name"], provider=group.get("provider"),
            input=group["input"], output=group["output"], cache_read=group["cache_read"],
        )
        for group in instance.get("token_groups") or []
    ]
