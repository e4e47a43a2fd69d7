"""Which webhook URLs and addresses a destination may use (server-side request forgery rules).

A destination's URL is checked when it is saved (its form, and its host when that is an
address or a well-known internal name) and again on every send, after the one DNS look-up the
sender makes: every address the name resolves to must be public. Loopback, link-local
(cloud metadata lives there), private, shared, reserved, multicast and unspecified addresses
are refused unless an operator lists their network in ``allowed``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Sequence
from urllib.parse import urlsplit

import attrs

__all__ = [
    "IPAddress",
    "IPNetwork",
    "TargetUrl",
    "UnsafeDestination",
    "check_address",
    "check_url",
    "parse_networks",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network

URL_MAX = 2000

# Names that stand for internal addresses whatever DNS says: checked as those addresses.
_KNOWN_NAMES: dict[str, tuple[str, ...]] = {
    "localhost": ("127.0.0.1", "::1"),
    "metadata.google.internal": ("169.254.169.254",),
    "metadata": ("169.254.169.254",),
    "instance-data": ("169.254.169.254",),
}


class UnsafeDestination(ValueError):
    """A URL or address a webhook may not be sent to; the message says why."""


@attrs.frozen
class TargetUrl:
    """A checked URL: its scheme, host (no brackets), port and the path with its query."""

    scheme: str
    host: str
    port: int
    target: str

    @property
    def host_header(self) -> str:
        """The ``Host`` header's value: the host, and the port when not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        default = 443 if self.scheme == "https" else 80
        return host if self.port == default else f"{host}:{self.port}"


def parse_networks(values: Iterable[str] | str | None) -> tuple[IPNetwork, ...]:
    """Parse networks (``127.0.0.1/32``, ``10.0.0.0/8``; a bare address is one address).

    A text holds them separated by commas. ValueError names the value that is not a network.
    """
    if values is None:
        return ()
    items = values.split(",") if isinstance(values, str) else list(values)
    networks: list[IPNetwork] = []
    for item in items:
        text = item.strip()
        if not text:
            continue
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise ValueError(f"{text!r} is not an IP network (such as 10.0.0.0/8)") from None
    return tuple(networks)


def check_address(address: IPAddress, allowed: Sequence[IPNetwork] = ()) -> None:
    """Raise :class:`UnsafeDestination` unless ``address`` is public or in ``allowed``."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if any(address.version == network.version and address in network for network in allowed):
        return
    if address.is_multicast or not address.is_global:
        raise UnsafeDestination(
            f"the address {address} is not public (loopback, private, link-local, reserved "
            "or multicast); an operator may allow its network"
        )


def check_url(url: str, allowed: Sequence[IPNetwork] = ()) -> TargetUrl:
    """Check the form of a webhook URL and any host that needs no DNS; the checked URL.

    ``http`` or ``https`` only, a host, no user name or password, no fragment. A host that
    is an address (or a name in the well-known internal list, such as ``localhost``) must
    pass :func:`check_address`; other names are checked on each send, after resolving them.
    """
    if len(url) > URL_MAX:
        raise UnsafeDestination(f"the URL is longer than {URL_MAX} characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:
        raise UnsafeDestination(f"the URL is malformed: {error}") from None
    if parts.scheme not in ("http", "https"):
        raise UnsafeDestination("the URL must start with http:// or https://")
    host = (parts.hostname or "").rstrip(".")
    if not host:
        raise UnsafeDestination("the URL has no host")
    if parts.username is not None or parts.password is not None:
        raise UnsafeDestination("the URL may not hold a user name or password")
    if parts.fragment:
        raise UnsafeDestination("the URL may not hold a fragment (#...)")
    if any(ord(character) <= 32 for character in url):
        raise UnsafeDestination("the URL may not hold spaces or control characters")
    for address in _literal_addresses(host):
        check_address(address, allowed)
    target = parts.path or "/"
    if parts.query:
        target += "?" + parts.query
    default = 443 if parts.scheme == "https" else 80
    return TargetUrl(parts.scheme, host, port or default, target)


def _literal_addresses(host: str) -> list[IPAddress]:
    """The addresses a host stands for without DNS: itself, or a well-known name's."""
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    lowered = host.lower()
    if lowered.endswith(".localhost"):
        lowered = "localhost"
    return [ipaddress.ip_address(text) for text in _KNOWN_NAMES.get(lowered, ())]
