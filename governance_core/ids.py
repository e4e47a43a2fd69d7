"""Identifiers: PFIDs (time-ordered, partitioned), made by an injectable factory."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime

import pfid

__all__ = ["IdFactory", "SeededIds", "extract_partition", "is_pfid", "new_partition"]

MAX_PARTITION = 2**30 - 1


def is_pfid(value: object) -> bool:
    """Whether ``value`` is a well-formed PFID string."""
    return isinstance(value, str) and pfid.is_pfid(value)


def extract_partition(value: str) -> int:
    """The partition encoded in a PFID."""
    return int(pfid.extract_partition(value))


class IdFactory:
    """Makes PFIDs from a clock time and random bytes; inject a seeded one in tests."""

    def __init__(self, random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self._random_bytes = random_bytes

    def new(self, partition: int, at: datetime) -> str:
        """A new PFID in ``partition`` stamped with ``at``."""
        millis = int(at.timestamp() * 1000)
        raw = millis.to_bytes(6, "big") + partition.to_bytes(4, "big") + self._random_bytes(10)
        return str(pfid.encode(pfid.BinaryPfid(raw)))

    def new_partition(self) -> int:
        """A random partition, for a new account."""
        return int.from_bytes(self._random_bytes(4), "big") & MAX_PARTITION

    def token_secret(self) -> str:
        """The random part of an API or invite token (url-safe, 32 random bytes or more)."""
        return secrets.token_urlsafe(32) if self._random_bytes is secrets.token_bytes else (
            self._random_bytes(32).hex()
        )


class SeededIds(IdFactory):
    """A deterministic factory for tests: the same seed gives the same ids."""

    def __init__(self, seed: int = 0) -> None:
        import random

        generator = random.Random(seed)
        super().__init__(lambda n: generator.randbytes(n))


def new_partition() -> int:
    """A random partition from the system's randomness."""
    return IdFactory().new_partition()
