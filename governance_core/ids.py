"""Identifiers: PFIDs (time-ordered, partitioned), made by an injectable factory."""

from __future__ import annotations

import functools
import re
import secrets
import threading
from collections.abc import Callable
from datetime import datetime

import pfid

__all__ = [
    "IdFactory",
    "SeededIds",
    "encode_pfid",
    "encode_random_part",
    "extract_partition",
    "is_pfid",
    "time_and_partition_text",
]

MAX_PARTITION = 2**30 - 1
_RANDOM_LIMIT = 2**80
_CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
# Two characters a lookup: 16 characters of 5 bits are 8 lookups of 10 bits, written out
# in one f-string below (a loop and a join cost twice as much).
_PAIRS = [first + second for first in _CROCKFORD for second in _CROCKFORD]
# The text pfid.encode writes, lower case: what the id factory makes and the store keeps.
_CANONICAL = re.compile(r"[0-7][0-9abcdefghjkmnpqrstvwxyz]{31}")


def is_pfid(value: object) -> bool:
    """Whether ``value`` is a well-formed PFID string."""
    return isinstance(value, str) and pfid.is_pfid(value)


def extract_partition(value: str) -> int:
    """The partition encoded in a PFID."""
    return int(pfid.extract_partition(value))


def encode_pfid(millis: int, partition: int, random_part: int) -> str:
    """The PFID of a 48-bit millisecond time, a 30-bit partition and an 80-bit random part.

    The same text as ``pfid.encode`` of the 20-byte binary form (10 characters of time,
    6 of partition, 16 of randomness, Crockford base32), made with table lookups of two
    characters.
    """
    return _sixteen((millis << 30) | partition) + _sixteen(random_part)


def encode_random_part(random_part: int) -> str:
    """The last 16 characters of a PFID whose 80-bit random part is ``random_part``."""
    return _sixteen(random_part)


@functools.lru_cache(maxsize=256)
def time_and_partition_text(value: str) -> str:
    """The first 16 characters of PFID ``value`` (time and partition) as ``pfid.encode`` writes.

    ``value`` in the id factory's form is its own prefix; any other form ``pfid.decode``
    reads (upper case) is written again, and what it refuses raises its ``PfidError``.
    """
    if _CANONICAL.fullmatch(value):
        return value[:16]
    head: bytes = pfid.decode(value)[:10]
    return str(pfid.encode(pfid.BinaryPfid(head + bytes(10))))[:16]


def _sixteen(value: int) -> str:
    """16 Crockford base32 characters of the low 80 bits of ``value``, most significant first."""
    pairs = _PAIRS
    return (
        f"{pairs[(value >> 70) & 1023]}{pairs[(value >> 60) & 1023]}"
        f"{pairs[(value >> 50) & 1023]}{pairs[(value >> 40) & 1023]}"
        f"{pairs[(value >> 30) & 1023]}{pairs[(value >> 20) & 1023]}"
        f"{pairs[(value >> 10) & 1023]}{pairs[value & 1023]}"
    )


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

