"""Token secrets: made once, shown once, stored only as a SHA-256 hash."""

from __future__ import annotations

import hashlib
import secrets

__all__ = ["TOKEN_PREFIX", "hash_secret", "new_secret"]

TOKEN_PREFIX = "pf_"


def new_secret(prefix: str = TOKEN_PREFIX) -> str:
    """A new secret: the prefix and 32 random url-safe bytes."""
    return prefix + secrets.token_urlsafe(32)


def hash_secret(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode()).hexdigest()
