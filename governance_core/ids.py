"""Identifiers: PFIDs (time-ordered, partitioned), made by an injectable factory."""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable
from datetime import datetime

import pfid

__all__ = ["IdFactory", "SeededIds", "encode_pfid", "extract_partition", "is_pfid"]

MAX_PARTITION = 2**30 - 1
_RANDOM_LIMIT = 2**80
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
# Two characters a lookup: 32 characters of 5 bits are 16 lookups of 10 bits.
_PAIRS = [first + second for first in _CROCKFORD for second in _CROCKFORD]
_SHIFTS = range(150, -1, -10)


def is_pfid(value: object) -> bool:
    """Whether ``value`` is a well-formed PFID string."""
    return isinstance(value, str) and pfid.is_pfid(value)


def extract_partition(value: str) -> int:
    """The partition encoded in a PFID."""
    return int(pfid.extract_partition(value))


def encode_pfid(millis: int, partition: int, random_part: int) -> str:
    """The PFID of a 48-bit millisecond time, a 30-bit partition and an 80-bit random part.

    The same text as ``pfid.encode`` of the 20-byte binary form (10 characters of time,
    6 of partition, 16 of randomness, Crockford base32), made with table lookups.
    """
    value = (millis << 110) | (partition << 80) | random_part
    return "".join([_PAIRS[(value >> shift) & 1023] for shift in _SHIFTS])


class IdFactory:
    """Makes PFIDs from a clock time and random bytes; inject a seeded one in tests.

    Ids are monotonic per partition: within one millisecond (or when the clock steps back)
    the next id continues from the last one's random part plus one, as monotonic ULIDs do, so
    id order is creation order.
    """

    def __init__(self, random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> None:
        self._random_bytes = random_bytes
        self._last: dict[int, tuple[int, int]] = {}
        self._lock = threading.Lock()

    def new(self, partition: int, at: datetime) -> str:
        """A new PFID in ``partition`` stamped with ``at``."""
        millis = int(at.timestamp() * 1000)
        with self._lock:
            last = self._last.get(partition)
            if last is not None and millis <= last[0]:
                millis, random_part = last[0], last[1] + 1
                if random_part >= _RANDOM_LIMIT:
                    millis, random_part = millis + 1, 0
            else:
                random_part = int.from_bytes(self._random_bytes(10), "big")
            self._last[partition] = (millis, random_part)
        return encode_pfid(millis, partition, random_part)

    def new_partition(self) -> int:
        """A random partition, for a new account."""
        return int.from_bytes(self._random_bytes(4), "big") & MAX_PARTITION


class SeededIds(IdFactory):
    """A deterministic factory for tests: the same seed gives the same ids."""

    def __init__(self, seed: int = 0) -> None:
        import random

        generator = random.Random(seed)
        super().__init__(lambda n: generator.randbytes(n))

