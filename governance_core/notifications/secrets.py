"""Webhook signing secrets: made here, kept encrypted by the cipher, rotated with grace."""

from __future__ import annotations

import base64
import secrets
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.encryption import ValueCipher
from governance_core.errors import GovernanceError

__all__ = ["SECRET_PREFIX", "active_secrets", "new_webhook_secret", "rotated", "sealed"]

SECRET_PREFIX = "whsec_"
"""The Standard Webhooks form of a symmetric secret: this prefix, then base64 bytes."""


def new_webhook_secret() -> str:
    """A new secret: ``whsec_`` and 32 random bytes in base64."""
    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(32)).decode("ascii")


def sealed(secret: str, cipher: ValueCipher) -> dict[str, Any]:
    """The stored entry of a new secret, never expiring: encrypted when the cipher can.

    A cipher that refuses to encrypt (no key is configured) leaves it in plain, marked so:
    a receiver's secret must stay readable for signing, where a token can be kept as a hash.
    """
    try:
        return {"value": cipher.encrypt(secret.encode()).decode("ascii"), "sealed": True,
                "expires_at": None}
    except GovernanceError:
        return {"value": secret, "sealed": False, "expires_at": None}


def rotated(
    entries: Sequence[dict[str, Any]], secret: str, cipher: ValueCipher, now: datetime,
    grace: timedelta,
) -> list[dict[str, Any]]:
    """The entries after a rotation: the new secret first, the others expiring after ``grace``.

    Entries that have expired by ``now`` are dropped; an entry already expiring earlier than
    the grace period keeps its earlier time.
    """
    until = now + grace
    kept: list[dict[str, Any]] = [sealed(secret, cipher)]
    for entry in entries:
        expires = parse_timestamp(entry["expires_at"]) if entry.get("expires_at") else None
        if expires is not None and expires <= now:
            continue
        if grace <= timedelta(0):
            continue
        ends = until if expires is None else min(expires, until)
        kept.append({**entry, "expires_at": format_timestamp(ends)})
    return kept


def active_secrets(
    entries: Sequence[dict[str, Any]], cipher: ValueCipher, now: datetime
) -> list[str]:
    """The secrets that sign a message sent at ``now``: every entry not yet expired."""
    found = []
    for entry in entries:
        expires = entry.get("expires_at")
        if expires and parse_timestamp(expires) <= now:
            continue
        if entry.get("sealed", True):
            found.append(cipher.decrypt(entry["value"].encode("ascii")).decode())
        else:
            found.append(entry["value"])
    return found
