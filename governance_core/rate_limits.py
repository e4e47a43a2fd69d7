"""Failed attempts to present a credential, counted so that guessing is refused early.

A credential (an access token, an invite token) that fails is counted under keys: the
client's address (given by the HTTP layer), the credential itself (by its SHA-256, the only
form the store looks a token up by: tokens have no lookup prefix, and their one non-secret
prefix, ``pf_``, is shared by every token) and, for an invite accepted in a bulk request, the
caller's token. A key with ``max_failures`` failures within the last ``window`` is refused
``temporarily_unavailable`` (HTTP 429, ``retry_after_ms``) until its oldest counted failure
leaves the window; a refused attempt is not tried and not counted.

Only failures are counted: a success writes nothing and checking a key with no failures is a
dictionary lookup. A success does not clear a key either, so an attacker who holds one valid
token cannot interleave it with guesses to keep their address's count down. An address counts
each distinct credential once within the window: a client repeating one bad token (a revoked
token left in a deployment) does not lock out the other clients behind its address, while
that token's own key refuses it after ``max_failures`` tries.

Counts live in the memory of one process (:class:`FailedAttempts`, held by
:class:`~governance_core.caches.Caches`): with several server processes an attacker spread
over them gets up to that many times the limit. At most ``max_keys`` keys are kept; past that
the key that failed least recently is forgotten.
"""

from __future__ import annotations

import ipaddress
import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import datetime, timedelta

import attrs

from governance_core.credentials import hash_secret
from governance_core.errors import TemporarilyUnavailable

__all__ = [
    "DEFAULT_MAX_FAILURES",
    "DEFAULT_WINDOW",
    "MAX_KEYS",
    "AttemptKey",
    "FailedAttempts",
    "FailureLimit",
    "IPNetwork",
    "client_address",
    "credential_mark",
]

DEFAULT_MAX_FAILURES = 10
"""Failed attempts a key may make within :data:`DEFAULT_WINDOW` before it is refused."""

DEFAULT_WINDOW = timedelta(minutes=1)
"""The sliding window failures are counted in."""

MAX_KEYS = 10_000
"""Keys kept at most; each holds at most ``max_failures`` failures."""

AttemptKey = tuple[str, str]
"""What failures are counted under: a kind (``address``, ``token``, ``invite``, ``caller``)
and a value (an address, a credential's SHA-256, a token id)."""

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
"""A network of addresses, such as the reverse proxies trusted to name the client."""

_WHERE = {
    "address": "from this address",
    "token": "with this token",
    "invite": "with this invite token",
    "caller": "by this caller",
}
_MAX_ADDRESS_TEXT = 64


def _positive(instance: object, attribute: attrs.Attribute[timedelta], value: timedelta) -> None:
    if value <= timedelta(0):
        raise ValueError(f"{attribute.name} must be longer than 0, not {value}")


@attrs.frozen
class FailureLimit:
    """How many failed attempts a key may make within ``window``; ``max_failures=0`` is off.

    ``trusted_proxies`` are the reverse proxies whose ``X-Forwarded-For`` names the client
    (see :func:`client_address`); none by default.
    """

    max_failures: int = attrs.field(default=DEFAULT_MAX_FAILURES,
                                    validator=attrs.validators.ge(0))
    window: timedelta = attrs.field(default=DEFAULT_WINDOW, validator=_positive)
    max_keys: int = attrs.field(default=MAX_KEYS, validator=attrs.validators.ge(1))
    trusted_proxies: tuple[IPNetwork, ...] = ()


class FailedAttempts:
    """Recent failed attempts by key, in one process; see the module's description.

    ``limit`` may be replaced at any time (an operator's settings); it applies from the next
    check. Time comes from the clock each call is given, only when a key has failures.
    """

    def __init__(self, limit: FailureLimit | None = None) -> None:
        self.limit = limit or FailureLimit()
        # Per key, its failures within the window, oldest first: (POSIX seconds, credential
        # mark); plain lists and floats keep a full table to about 20 MB. Ordered by the last
        # failure, least recent first, so the first key is forgotten.
        self._failures: OrderedDict[AttemptKey, list[tuple[float, str | None]]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """How many keys have failures kept."""
        return len(self._failures)

    def check(self, clock: Callable[[], datetime], *keys: AttemptKey) -> None:
        """Raise ``temporarily_unavailable`` (rate limited) when any of ``keys`` is refused."""
        if not self._failures:
            return
        for key in keys:
            if key not in self._failures:
                continue
            wait_ms = self.retry_after_ms(clock(), key)
            if wait_ms:
                raise TemporarilyUnavailable(
                    f"too many failed attempts {_WHERE.get(key[0], 'with this key')}; "
                    f"retry in {math.ceil(wait_ms / 1000)} s",
                    retry_after_ms=wait_ms, rate_limited=True,
                )

    def retry_after_ms(self, now: datetime, key: AttemptKey) -> int:
        """Milliseconds until ``key`` may try again (at least 1), or 0 when it may now."""
        limit = self.limit
        if limit.max_failures == 0:
            return 0
        with self._lock:
            failures = self._failures.get(key)
            if failures is None:
                return 0
            _expire(failures, now.timestamp() - limit.window.total_seconds())
            if not failures:
                del self._failures[key]
                return 0
            if len(failures) < limit.max_failures:
                return 0
            free_at = failures[-limit.max_failures][0] + limit.window.total_seconds()
        return max(1, math.ceil((free_at - now.timestamp()) * 1000))

    def fail(
        self, clock: Callable[[], datetime], key: AttemptKey, credential: str | None = None
    ) -> None:
        """Count a failed attempt under ``key``.

        With a ``credential`` mark (:func:`credential_mark`), a credential that failed under
        ``key`` within the window already is counted once, at its latest failure.
        """
        limit = self.limit
        if limit.max_failures == 0:
            return
        now = clock().timestamp()
        with self._lock:
            failures = self._failures.pop(key, None)
            if failures is None:
                failures = []
            _expire(failures, now - limit.window.total_seconds())
            if credential is not None:
                for index, (_, mark) in enumerate(failures):
                    if mark == credential:
                        del failures[index]
                        break
            failures.append((now, credential))
            del failures[:-limit.max_failures]
            self._failures[key] = failures
            while len(self._failures) > limit.max_keys:
                self._failures.popitem(last=False)


def _expire(failures: list[tuple[float, str | None]], before: float) -> None:
    kept = 0
    while kept < len(failures) and failures[kept][0] <= before:
        kept += 1
    del failures[:kept]


def credential_mark(secret: str) -> str:
    """A short, non-reversible mark of a credential, to tell credentials apart in counts."""
    return hash_secret(secret)[:12]


def _parsed(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _key_of(text: str, address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> str:
    if address is None:
        return text.strip()[:_MAX_ADDRESS_TEXT]
    if isinstance(address, ipaddress.IPv6Address):
        # One host is usually given a whole /64, so it is counted as one address.
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


def client_address(
    remote_addr: str, forwarded_for: str | None, trusted_proxies: tuple[IPNetwork, ...] = ()
) -> str:
    """The address failures of a request are counted under.

    ``remote_addr`` is the peer of the connection. When it is one of ``trusted_proxies``,
    ``X-Forwarded-For`` (``forwarded_for``) is read from its right end, where the proxy
    appended the peer it saw, past every trusted proxy; the first other entry is the client
    (entries to its left were sent by the client and are not believed). An IPv6 address is
    counted as its /64 network.
    """
    peer = _parsed(remote_addr)
    if forwarded_for and peer is not None and _trusted(peer, trusted_proxies):
        for entry in reversed(forwarded_for.split(",")):
            if not entry.strip():
                continue
            hop = _parsed(entry)
            if hop is None or not _trusted(hop, trusted_proxies):
                return _key_of(entry, hop)
            peer = hop
    return _key_of(remote_addr, peer)


def _trusted(
    address: ipaddress.IPv4Address | ipaddress.IPv6Address, networks: tuple[IPNetwork, ...]
) -> bool:
    return any(address.version == net.version and address in net for net in networks)
