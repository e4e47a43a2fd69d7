"""Sensitive values (decisions 11): kept apart from payloads, encrypted, shown to few reads.

When a span or an alert is written with sensitive encoding, :func:`split_member` takes the
value out of every ``$sensitive`` marker of a payload member; the record keeps the markers
without ``value`` and :func:`keep_values` stores the values in the ``sensitive_values`` table,
one record per owner (the span or alert), encrypted with ``ctx.config.cipher`` as base64 text.
Everything computed from a payload (checks, summaries, token usage) sees the stored form, so
no value reaches them.

Only single-resource reads by account tokens without ``redacted=true`` put the values back
(:func:`may_reveal`, :func:`reveal`); lists, write responses (and so stored idempotent
replays) and ingestion-token reads show the markers without ``value``.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.converter import json_ready
from governance_core.errors import ValidationErrors
from governance_core.fields import Fields
from governance_core.repository import Filter, Record, tenant_filter
from governance_core.rules.sensitive import restore_sensitive, split_sensitive

__all__ = [
    "TABLE",
    "keep_values",
    "load_values",
    "may_reveal",
    "quality_member",
    "reveal",
    "reveal_quality",
    "split_member",
]

TABLE = "sensitive_values"
"""The table holding sensitive values apart from the records they belong to."""

T = TypeVar("T")

SplitValues = dict[str, object]
"""The values split out of one payload member, by JSON Pointer."""


def split_member(fields: Fields, name: str, value: T) -> tuple[T, SplitValues]:
    """Split the markers' values out of the payload member ``name``.

    Returns the member with every marker's ``value`` removed and the values by pointer. A
    malformed marker (its type does not match its value, no value, bad labels) is a field
    error at its path (``payload -> customer -> ssn``), collected in ``fields.errors``.
    """
    if value is None:
        return value, {}
    try:
        redacted, values = split_sensitive(value, name)
    except ValidationErrors as error:
        for field, problem in error.errors.items():
            fields.errors.add(field, problem)
        return value, {}
    return cast(T, redacted), values


def _find(ctx: Context, owner_id: str) -> Record | None:
    found = ctx.store.query(
        TABLE, [tenant_filter(ctx.account_id), Filter("owner_id", "eq", owner_id)], limit=1
    )
    return found[0] if found else None


def _decrypt(ctx: Context, record: Record) -> dict[str, SplitValues]:
    plaintext = ctx.config.cipher.decrypt(base64.b64decode(record["ciphertext"]))
    members: dict[str, SplitValues] = json.loads(plaintext)
    return members


def _encrypt(ctx: Context, members: Mapping[str, SplitValues]) -> str:
    plaintext = json.dumps(json_ready(dict(members)), separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(ctx.config.cipher.encrypt(plaintext.encode())).decode("ascii")


def keep_values(ctx: Context, owner_id: str, changes: Mapping[str, SplitValues]) -> None:
    """Store the values split from members of ``owner_id``'s payloads, in the caller's write.

    ``changes`` maps a member name (``payload``, ``result_payload``) to its values; a member
    given replaces what was kept for it (an empty map forgets it), others are left alone.
    """
    record = _find(ctx, owner_id)
    members = {} if record is None else _decrypt(ctx, record)
    updated = {**members, **changes}
    updated = {member: values for member, values in updated.items() if values}
    if updated == members:
        return
    if not updated:
        assert record is not None
        ctx.store.delete(TABLE, record["id"])
        return
    stamp = format_timestamp(ctx.now)
    ctx.store.put(TABLE, {
        "id": ctx.new_id() if record is None else record["id"],
        "account_id": ctx.account_id,
        "owner_id": owner_id,
        "inserted_at": stamp if record is None else record["inserted_at"],
        "updated_at": stamp,
        "ciphertext": _encrypt(ctx, updated),
    })


def load_values(ctx: Context, owner_id: str) -> dict[str, SplitValues]:
    """Return the values kept for ``owner_id``, by member name then pointer."""
    record = _find(ctx, owner_id)
    return {} if record is None else _decrypt(ctx, record)


def may_reveal(ctx: Context, redacted: bool) -> bool:
    """Tell whether a single-resource read shows values: account tokens, unless ``redacted``."""
    principal = ctx.principal
    return not redacted and principal is not None and not principal.is_ingestion


def reveal(ctx: Context, owner_id: str, members: Mapping[str, Any]) -> dict[str, Any]:
    """Return ``members`` (payloads by member name) with their kept values put back."""
    kept = load_values(ctx, owner_id)
    return {
        name: restore_sensitive(value, kept[name]) if name in kept else value
        for name, value in members.items()
    }


def quality_member(name: str) -> str:
    """The member under which the values of a run's quality payload ``name`` are kept."""
    return f"quality_payloads/{name}"


def reveal_quality(ctx: Context, instance_id: str, payloads: Mapping[str, Any]) -> dict[str, Any]:
    """Return a run's quality payloads with their kept values put back."""
    kept = load_values(ctx, instance_id)
    return {
        name: restore_sensitive(payload, kept[quality_member(name)])
        if quality_member(name) in kept else payload
        for name, payload in payloads.items()
    }
