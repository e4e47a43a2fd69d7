"""Token secrets: made once, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

__all__ = ["TOKEN_PREFIX", "ShownOnce", "hash_secret", "new_secret", "withhold_secrets"]

TOKEN_PREFIX = "pf_"


def new_secret(prefix: str = TOKEN_PREFIX) -> str:
    """A new secret: the prefix and 32 random url-safe bytes."""
    return prefix + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()


class ShownOnce(str):
    """A secret (or a text holding one) in a response: the caller sees it this once.

    The stored copy of a response, kept for idempotent replays, holds ``later`` in its place
    (see :func:`withhold_secrets`), so no secret outlives the response that shows it.
    """

    later: str | None

    def __new__(cls, value: str, later: str | None = None) -> ShownOnce:
        """Wrap ``value``; ``later`` is what a stored copy holds instead (default null)."""
        shown = super().__new__(cls, value)
        shown.later = later
        return shown


def withhold_secrets(value: Any) -> Any:
    """``value`` with every :class:`ShownOnce` inside replaced by its ``later`` form."""
    if isinstance(value, ShownOnce):
        return value.later
    if isinstance(value, dict):
        return {key: withhold_secrets(item) for key, item in value.items()}
    if isinstance(value, list):
        return [withhold_secrets(item) for item in value]
    return value
