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

import rapidjson

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.credentials import ShownOnce, withhold_secrets
from governance_core.errors import FieldErrors, IdempotencyKeyAlreadyUsed
from governance_core.fields import flatten_params
from governance_core.storage.protocol import ReadAhead

__all__ = [
    "KEY_MAX",
    "KEY_MIN",
    "IdempotentRequest",
    "fingerprint",
    "read_ahead",
    "record_id",
    "resolve_key",
]

KEY_MIN, KEY_MAX = 8, 128
FIELD = "idempotency_key"
_VERSION = "2:"


class _Canonical(rapidjson.Encoder):
    """Sorted keys, so that the same members in any order are the same request."""

    def default(self, value: object) -> str:
        return str(value)


_CANONICAL = _Canonical(
    sort_keys=True, ensure_ascii=False, mapping_mode=rapidjson.MM_COERCE_KEYS_TO_STRINGS
)


def resolve_key(params: Mapping[str, Any] | None, extra: Iterable[str | None] = ()) -> str | None:
    """The request's key, from the body or ``details`` or the extra sources (header, query).

    Sources that disagree, or a key outside 8..128 characters, are ``validation_errors`` on
    ``idempotency_key``.
    """
    found: list[Any] = []
    params = params or {}
    details = params.get("details")
    inner: Mapping[str, Any] = (
        details if type(details) is dict or isinstance(details, Mapping) else {}
    )
    for source in (params, inner):
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
    """A digest of what the request asks for, whatever envelope form it came in.

    Versioned (``2:`` and the digest): records stored before hold the digest of
    :func:`_legacy_fingerprint`, which a replay compares against instead.
    """
    asked = [operation, _asked(params)]
    try:
        text = _CANONICAL(asked)
    except ValueError:
        # A lone surrogate, which only the standard library writes (escaped).
        text = _standard_text(asked)
    assert text is not None
    return _VERSION + hashlib.sha256(text.encode()).hexdigest()


def _asked(params: Mapping[str, Any] | None) -> dict[str, Any]:
    return {k: v for k, v in flatten_params(params).items() if k != FIELD}


def _standard_text(asked: list[Any]) -> str:
    return json.dumps(asked, sort_keys=True, separators=(",", ":"), default=str)


def _legacy_fingerprint(operation: str, params: Mapping[str, Any] | None) -> str:
    text = _standard_text([operation, _asked(params)])
    return hashlib.sha256(text.encode()).hexdigest()


def record_id(account_id: str, operation: str, key: str) -> str:
    """The id of the stored record of ``key`` (its scope is the account and the operation)."""
    return hashlib.sha256(f"{account_id}\x00{operation}\x00{key}".encode()).hexdigest()


def read_ahead(ctx: Context, keys: Iterable[tuple[str, str]]) -> None:
    """Read the stored records of several (operation, key) pairs at once, when the store can.

    A bulk request does, so that each item's look-up is answered without a query of its own.
    """
    if isinstance(ctx.store, ReadAhead):
        ids = [record_id(ctx.account_id, operation, key) for operation, key in keys]
        ctx.store.read_ahead("idempotency_keys", ids)


class IdempotentRequest:
    """A write sent with an idempotency key: its stored record's id and its fingerprint."""

    __slots__ = ("_params", "digest", "key", "operation", "record_id")

    def __init__(
        self, account_id: str, operation: str, key: str, params: Mapping[str, Any] | None
    ) -> None:
        self.operation = operation
        self.key = key
        self.record_id = record_id(account_id, operation, key)
        self.digest = fingerprint(operation, params)
        self._params = params

    def replay(self, ctx: Context) -> dict[str, Any] | None:
        """The stored response for this key, None when unused; a different request is refused."""
        stored = ctx.store.get("idempotency_keys", self.record_id)
        if stored is None:
            return None
        digest = stored["fingerprint"]
        same = (
            digest == self.digest if digest.startswith(_VERSION)
            else digest == _legacy_fingerprint(self.operation, self._params)
        )
        if not same:
            raise IdempotencyKeyAlreadyUsed(
                f"idempotency key {self.key!r} was already used with a different"
                f" {self.operation} request"
            )
        response: dict[str, Any] = stored["response"]
        return response

    def remember(self, ctx: Context, response: dict[str, Any]) -> None:
        """Store a successful response under the key, without the secrets it shows once."""
        ctx.store.put(
            "idempotency_keys",
            {
                "id": self.record_id,
                "account_id": ctx.account_id,
                "operation": self.operation,
                "fingerprint": self.digest,
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
        # By exact type, in C: ShownOnce has no subclasses.
        if type(value) is ShownOnce or (
            type(value) is dict and ShownOnce in map(type, value.values())
        ):
            withheld: dict[str, Any] = withhold_secrets(response)
            return withheld
    return response
