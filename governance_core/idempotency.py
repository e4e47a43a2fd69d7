"""Idempotency keys: a replayed write answers its stored response; a changed one is refused.

Scope is (account, operation, key). Only successes are stored, inside the same transaction as
the write, so a key is stored if and only if its write is. A secret a response shows once (a
new token) is not stored with it: its replay answers the form without the secret (decisions 4:
only hashes of secrets are stored).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from typing import Any

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.credentials import ShownOnce, withhold_secrets
from governance_core.errors import FieldErrors, IdempotencyKeyAlreadyUsed
from governance_core.fields import flatten_params

__all__ = ["KEY_MAX", "KEY_MIN", "fingerprint", "find_replay", "remember", "resolve_key"]

KEY_MIN, KEY_MAX = 8, 128
FIELD = "idempotency_key"


def resolve_key(params: Mapping[str, Any] | None, extra: Iterable[str | None] = ()) -> str | None:
    """The request's key, from the body or ``details`` or the extra sources (header, query).

    Sources that disagree, or a key outside 8..128 characters, are ``validation_errors`` on
    ``idempotency_key``.
    """
    found: list[Any] = []
    params = params or {}
    details = params.get("details")
    for source in (params, details if isinstance(details, Mapping) else {}):
        if source.get(FIELD) is not None:
            found.append(source[FIELD])
    found.extend(value for value in extra if value is not None)
    if not found:
        return None
    errors = FieldErrors()
    if any(not isinstance(value, str) for value in found):
        errors.invalid(FIELD, "idempotency_key must be a string")
    elif len(set(found)) > 1:
        errors.invalid(FIELD, "the idempotency keys given in this request disagree")
    elif not KEY_MIN <= len(found[0]) <= KEY_MAX:
        errors.invalid(FIELD, f"idempotency_key must be {KEY_MIN} to {KEY_MAX} characters long")
    errors.raise_if_any()
    key: str = found[0]
    return key


def fingerprint(operation: str, params: Mapping[str, Any] | None) -> str:
    """A digest of what the request asks for, whatever envelope form it came in."""
    flat = {k: v for k, v in flatten_params(params).items() if k != FIELD}
    text = json.dumps([operation, flat], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _record_id(account_id: str, operation: str, key: str) -> str:
    return hashlib.sha256(f"{account_id}\x00{operation}\x00{key}".encode()).hexdigest()


def find_replay(ctx: Context, operation: str, key: str, digest: str) -> dict[str, Any] | None:
    """The stored response for this key, None when unused; a different request is refused."""
    stored = ctx.store.get("idempotency_keys", _record_id(ctx.account_id, operation, key))
    if stored is None:
        return None
    if stored["fingerprint"] != digest:
        raise IdempotencyKeyAlreadyUsed(
            f"idempotency key {key!r} was already used with a different {operation} request"
        )
    response: dict[str, Any] = stored["response"]
    return response


def remember(
    ctx: Context, operation: str, key: str, digest: str, response: dict[str, Any]
) -> None:
    """Store a successful response under its key, without the secrets it shows once."""
    ctx.store.put(
        "idempotency_keys",
        {
            "id": _record_id(ctx.account_id, operation, key),
            "account_id": ctx.account_id,
            "operation": operation,
            "fingerprint": digest,
            "response": _without_secrets(response),
            "inserted_at": format_timestamp(ctx.now),
        },
    )


def _without_secrets(response: dict[str, Any]) -> dict[str, Any]:
    """``response`` with its :class:`ShownOnce` secrets withheld.

    A secret stands beside ``details`` or among its members, so only those two levels are
    looked at, and nothing is copied when there is none (the common case).
    """
    for value in response.values():
        if isinstance(value, ShownOnce) or (
            isinstance(value, dict)
            and any(isinstance(member, ShownOnce) for member in value.values())
        ):
            withheld: dict[str, Any] = withhold_secrets(response)
            return withheld
    return response
