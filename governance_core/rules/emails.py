"""Email addresses: the one check every operation that takes an address applies."""

from __future__ import annotations

import re

__all__ = ["MAX_EMAIL_LENGTH", "is_email"]

MAX_EMAIL_LENGTH = 320
"""RFC 5321's limit: 64 characters of local part, @, 255 of domain."""

# Deliberately loose: one @ with a non-empty local part and a dotted domain, no spaces. Whether
# an address really receives mail is only known by sending to it.
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


def is_email(value: str) -> bool:
    """Whether ``value`` looks like an email address (``name@example.com``)."""
    return len(value) <= MAX_EMAIL_LENGTH and _EMAIL.fullmatch(value) is not None
