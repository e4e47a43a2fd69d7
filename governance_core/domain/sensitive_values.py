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

:func:`rekey` encrypts again, under the first configured key, every value kept here and
every webhook signing secret (the same cipher keeps them): those stored in plain before a key
was configured and those under a key being rotated out.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import attrs

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.converter import json_ready
from governance_core.encryption import FernetCipher
from governance_core.errors import InvalidValue, ValidationErrors, WriteConflict
from governance_core.fields import Fields
from governance_core.repository import Filter, Record, RecordTable, Tables, tenant_filter
from governance_core.rules.sensitive import restore_sensitive, split_sensitive
from governance_core.storage.protocol import SortKey, Store

__all__ = [
    "REKEY_BATCH",
    "Rekeyed",
    "keep_values",
    "load_values",
    "may_reveal",
    "quality_member",
    "rekey",
    "reveal",
    "reveal_quality",
    "split_member",
]

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
    found = ctx.tables.sensitive_values.query(
        [tenant_filter(ctx.account_id), Filter("owner_id", "eq", owner_id)], limit=1
    )
    return found[0] if found else None


def _decrypt(ctx: Context, record: Record) -> dict[str, SplitValues]:
    plaintext = ctx.config.cipher.decrypt(base64.b64decode(record["ciphertext"]))
    members: dict[str, SplitValues] = json.loads(plaintext)
    return members


def _encrypt(ctx: Context, members: Mapping[str, SplitValues]) -> str:
    plaintext = json.dumps(json_ready(dict(members)), separators=(",", ":"), ensure_ascii=False)
    return base64.b64encode(ctx.config.cipher.encrypt(plaintext.encode())).decode("ascii")


def keep_values(
    ctx: Context, owner_id: str, changes: Mapping[str, SplitValues], *, new_owner: bool = False
) -> None:
    """Store the values split from members of ``owner_id``'s payloads, in the caller's write.

    ``changes`` maps a member name (``payload``, ``result_payload``) to its values; a member
    given replaces what was kept for it (an empty map forgets it), others are left alone.
    ``new_owner``: the owner is created by this very write (its id just claimed, and owners
    are never deleted), so nothing is kept for it yet and nothing is looked up.
    """
    record = None if new_owner else _find(ctx, owner_id)
    members = {} if record is None else _decrypt(ctx, record)
    updated = {**members, **changes}
    updated = {member: values for member, values in updated.items() if values}
    if updated == members:
        return
    if not updated:
        assert record is not None
        ctx.tables.sensitive_values.delete(record["id"])
        return
    stamp = format_timestamp(ctx.now)
    ctx.tables.sensitive_values.put({
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


REKEY_BATCH = 500
"""Records :func:`rekey` rewrites in one transaction unless told otherwise."""

_REKEY_ATTEMPTS = 8


@attrs.frozen
class Rekeyed:
    """What :func:`rekey` did: records read, and records written again under the first key."""

    values_read: int = 0
    values_rewritten: int = 0
    destinations_read: int = 0
    destinations_rewritten: int = 0


def _rekey_value(record: Record, cipher: FernetCipher) -> Record | None:
    token = base64.b64decode(record["ciphertext"])
    if cipher.is_current(token):
        return None
    fresh = base64.b64encode(cipher.reencrypt(token)).decode("ascii")
    return {**record, "ciphertext": fresh}


def _rekey_secrets(record: Record, cipher: FernetCipher) -> Record | None:
    # An entry is {"value", "sealed", "expires_at"}: "sealed": false marks a secret stored
    # in plain for want of a key (entries from before that mark have none).
    entries = record.get("secrets") or []
    if all(
        entry.get("sealed", True) and cipher.is_current(entry["value"].encode("ascii"))
        for entry in entries
    ):
        return None
    rewritten = [
        {**entry, "sealed": True,
         "value": cipher.reencrypt(entry["value"].encode("ascii")).decode("ascii")}
        for entry in entries
    ]
    return {**record, "secrets": rewritten}


def _rekey_table(
    store: Store,
    table: RecordTable,
    rewrite: Callable[[Record, FernetCipher], Record | None],
    cipher: FernetCipher,
    batch_size: int,
    progress: Callable[[str, int, int], None] | None,
) -> tuple[int, int]:
    read = rewritten = 0
    after = ""
    while True:
        for attempt in range(_REKEY_ATTEMPTS):
            try:
                # One bounded transaction a batch, the batch read inside it: a value a
                # server rewrites meanwhile makes the batch conflict and run again, never
                # lose the newer value.
                with store.transaction():
                    batch = table.query(
                        [Filter("id", "gt", after)], [SortKey("id")], limit=batch_size
                    )
                    changed = 0
                    for record in batch:
                        fresh = rewrite(record, cipher)
                        if fresh is not None:
                            table.put(fresh)
                            changed += 1
                break
            except WriteConflict:
                if attempt == _REKEY_ATTEMPTS - 1:
                    raise
        if not batch:
            return read, rewritten
        read += len(batch)
        rewritten += changed
        after = batch[-1]["id"]
        if progress is not None:
            progress(table.name, read, rewritten)


def rekey(
    store: Store,
    cipher: FernetCipher,
    *,
    batch_size: int = REKEY_BATCH,
    progress: Callable[[str, int, int], None] | None = None,
) -> Rekeyed:
    """Encrypt every kept value and webhook secret under ``cipher``'s first key.

    Values stored in plain and values under any of ``cipher``'s other keys are rewritten;
    values already under the first key are left alone, so running it again (after an
    interruption, say) only finishes what is left. Each batch of ``batch_size`` records is
    one transaction; ``progress(table, read, rewritten)`` is called after each. A value no
    configured key opens stops it with :class:`~governance_core.errors.UnexpectedError`,
    its batch rolled back.
    """
    if batch_size < 1:
        raise InvalidValue("batch_size must be at least 1")
    tables = Tables(store)
    values = _rekey_table(
        store, tables.sensitive_values, _rekey_value, cipher, batch_size, progress
    )
    secrets = _rekey_table(store, tables.destinations, _rekey_secrets, cipher, batch_size, progress)
    return Rekeyed(*values, *secrets)
