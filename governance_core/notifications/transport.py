"""Sending one webhook request with the standard library, under the address rules.

The host is resolved once; every address it resolves to is checked
(:func:`~governance_core.notifications.addresses.check_address`) and the connection is made
to the first checked address, so a DNS answer cannot change between the check and the
connection. Connecting and each read have their own timeouts, a redirect is an answer like
any other (never followed), and at most :data:`RESPONSE_PREFIX` bytes of the body are read.
"""

from __future__ import annotations

import http.client
import ipaddress
import socket
import ssl
import time
from collections.abc import Callable, Mapping, Sequence

import attrs

from governance_core.notifications.addresses import (
    IPAddress,
    IPNetwork,
    TargetUrl,
    UnsafeDestination,
    check_address,
)

__all__ = [
    "RESPONSE_PREFIX",
    "Resolver",
    "SendFailed",
    "Sent",
    "Timeouts",
    "post",
    "system_resolver",
]

RESPONSE_PREFIX = 512
"""How many bytes of a response body are read and kept in the delivery log."""

Resolver = Callable[[str, int], list[IPAddress]]
"""Resolves a host name and port to addresses."""


def system_resolver(host: str, port: int) -> list[IPAddress]:
    """The addresses ``host`` resolves to (``getaddrinfo``), in the order it answers."""
    found: list[IPAddress] = []
    for _family, _type, _proto, _name, sockaddr in socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM
    ):
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if address not in found:
            found.append(address)
    return found


@attrs.frozen
class Timeouts:
    """Seconds allowed to connect (TLS handshake included) and for each read."""

    connect: float = 3.0
    read: float = 10.0


@attrs.frozen
class Sent:
    """An answered request: its status, the start of its body and how long it took."""

    status: int
    body_prefix: str
    latency_ms: float


class SendFailed(Exception):
    """No answer: the address was refused, DNS failed, or the connection failed or timed out.

    ``unsafe`` marks a refusal by the address rules.
    """

    def __init__(self, message: str, *, latency_ms: float, unsafe: bool = False) -> None:
        super().__init__(message)
        self.latency_ms = latency_ms
        self.unsafe = unsafe


class _PinnedConnection(http.client.HTTPConnection):
    """A plain connection to one chosen address, with separate connect and read timeouts."""

    def __init__(self, address: IPAddress, port: int, timeouts: Timeouts) -> None:
        super().__init__(str(address), port, timeout=timeouts.connect)
        self._read_timeout = timeouts.read

    def connect(self) -> None:
        """Connect within the connect timeout, then wait at most the read timeout per read."""
        super().connect()
        self.sock.settimeout(self._read_timeout)


class _PinnedTLSConnection(http.client.HTTPSConnection):
    """A TLS connection to one chosen address, verified against the URL's host name."""

    def __init__(
        self, address: IPAddress, port: int, hostname: str, timeouts: Timeouts,
        context: ssl.SSLContext,
    ) -> None:
        super().__init__(str(address), port, timeout=timeouts.connect, context=context)
        self._hostname = hostname
        self._read_timeout = timeouts.read
        self._tls = context

    def connect(self) -> None:
        """Connect to the address, handshake for the host name, then use the read timeout."""
        raw = socket.create_connection((self.host, self.port), self.timeout)
        self.sock = self._tls.wrap_socket(raw, server_hostname=self._hostname)
        self.sock.settimeout(self._read_timeout)


def post(
    url: TargetUrl,
    body: bytes,
    headers: Mapping[str, str],
    *,
    allowed: Sequence[IPNetwork] = (),
    timeouts: Timeouts = Timeouts(),
    resolver: Resolver = system_resolver,
    tls: ssl.SSLContext | None = None,
) -> Sent:
    """POST ``body`` to ``url``; :class:`Sent` for any answer, :class:`SendFailed` for none."""
    started = time.perf_counter()

    def elapsed() -> float:
        return round((time.perf_counter() - started) * 1000, 3)

    try:
        addresses = resolver(url.host, url.port)
    except (OSError, ValueError) as error:
        raise SendFailed(f"could not resolve {url.host}: {error}", latency_ms=elapsed()) from None
    if not addresses:
        raise SendFailed(f"{url.host} resolves to no address", latency_ms=elapsed())
    try:
        for address in addresses:
            check_address(address, allowed)
    except UnsafeDestination as error:
        raise SendFailed(str(error), latency_ms=elapsed(), unsafe=True) from None
    connection: http.client.HTTPConnection
    if url.scheme == "https":
        connection = _PinnedTLSConnection(
            addresses[0], url.port, url.host, timeouts, tls or ssl.create_default_context()
        )
    else:
        connection = _PinnedConnection(addresses[0], url.port, timeouts)
    try:
        connection.putrequest("POST", url.target, skip_host=True, skip_accept_encoding=True)
        connection.putheader("Host", url.host_header)
        for name, value in headers.items():
            connection.putheader(name, value)
        connection.putheader("Content-Length", str(len(body)))
        connection.endheaders(body)
        response = connection.getresponse()
        prefix = response.read(RESPONSE_PREFIX)
        return Sent(response.status, prefix.decode("utf-8", "replace"), elapsed())
    except (OSError, http.client.HTTPException) as error:
        reason = "timed out" if isinstance(error, TimeoutError) else str(error) or type(
            error
        ).__name__
        raise SendFailed(f"request failed: {reason}", latency_ms=elapsed()) from None
    finally:
        connection.close()
