"""The address rules: checked when a destination is saved and again, after DNS, when sent."""

from __future__ import annotations

import ipaddress
import time

import pytest

from governance_core.errors import ValidationErrors
from governance_core.notifications.addresses import (
    UnsafeDestination,
    check_address,
    check_url,
    parse_networks,
)
from governance_core.notifications.sender import Sender
from governance_core.notifications.transport import SendFailed, Timeouts, post
from governance_core.service import Governance
from tests.core.runs import Caller
from tests.notifications.conftest import Received, Receiver, quick_settings
from tests.notifications.world import deliveries, destination, new_run, raise_alert

REFUSED = [
    "http://127.0.0.1/hook", "http://127.1.2.3/", "http://[::1]/", "http://localhost/",
    "http://api.localhost/", "http://10.0.0.1/", "http://172.16.5.4/", "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/",
    "http://[fd00:ec2::254]/", "http://[::ffff:127.0.0.1]/", "http://0.0.0.0/",
    "http://100.64.0.1/", "http://224.0.0.1/", "http://[fe80::1]/",
]


@pytest.mark.parametrize("url", REFUSED)
def test_internal_addresses_are_refused(url: str) -> None:
    with pytest.raises(UnsafeDestination, match="not public"):
        check_url(url)


@pytest.mark.parametrize("url", [
    "ftp://example.com/", "http://user:pw@example.com/", "http:///x", "https://example.com/#f",
    "http://example.com:99999/", "http://exa mple.com/", "file:///etc/passwd",
])
def test_malformed_urls_are_refused(url: str) -> None:
    with pytest.raises(UnsafeDestination):
        check_url(url)


def test_a_public_url_passes_and_keeps_its_target() -> None:
    target = check_url("https://hooks.example.com/a/b?x=1")
    assert (target.scheme, target.host, target.port, target.target) == (
        "https", "hooks.example.com", 443, "/a/b?x=1")
    assert check_url("http://8.8.8.8:8080").host_header == "8.8.8.8:8080"


def test_an_operator_allows_a_network_and_nothing_more() -> None:
    allowed = parse_networks("127.0.0.1/32, 10.1.0.0/16")
    check_url("http://127.0.0.1:9/", allowed)
    check_url("http://10.1.2.3/", allowed)
    for url in ("http://127.0.0.2/", "http://10.2.0.1/", "http://[::1]/"):
        with pytest.raises(UnsafeDestination):
            check_url(url, allowed)
    check_address(ipaddress.ip_address("::ffff:127.0.0.1"), allowed)


def test_an_operator_setting_that_is_not_a_network_is_named() -> None:
    with pytest.raises(ValueError, match=r"'10\.0\.0\.300/8' is not an IP network"):
        parse_networks("10.0.0.300/8")


def test_a_destination_is_checked_when_saved(ngov: Governance, caller: Caller) -> None:
    with pytest.raises(ValidationErrors) as raised:
        caller.call("destinations/create", name="meta", url="http://169.254.169.254/")
    assert "url" in raised.value.errors and "not public" in raised.value.errors["url"].message
    created, _ = destination(caller, "https://hooks.example.com/x")
    with pytest.raises(ValidationErrors) as raised:
        caller.call("destinations/update", destination_id=created["id"], url="http://10.0.0.1/")
    assert list(raised.value.errors) == ["url"]


def test_a_name_resolving_to_an_internal_address_is_refused_when_sent(
    receiver: Receiver,
) -> None:
    port = receiver.server.server_port
    target = check_url(f"http://hooks.example.com:{port}/hook")
    with pytest.raises(SendFailed) as failed:
        post(target, b"{}", {}, resolver=lambda host, _port: [ipaddress.ip_address("127.0.0.1")])
    assert failed.value.unsafe and receiver.received == []
    # One internal address among public ones is enough to refuse the name.
    with pytest.raises(SendFailed):
        post(target, b"{}", {}, resolver=lambda host, _port: [
            ipaddress.ip_address("8.8.8.8"), ipaddress.ip_address("127.0.0.1")])


def test_the_connection_goes_to_the_checked_address_with_the_name_as_host(
    receiver: Receiver,
) -> None:
    port = receiver.server.server_port
    target = check_url(f"http://hooks.example.com:{port}/hook")
    sent = post(target, b"{}", {"X-Test": "1"}, allowed=parse_networks("127.0.0.1/32"),
                resolver=lambda host, _port: [ipaddress.ip_address("127.0.0.1")])
    assert sent.status == 200
    assert receiver.received[0].headers["Host"] == f"hooks.example.com:{port}"


def test_a_receiver_that_does_not_answer_times_out(receiver: Receiver) -> None:
    def slow(request: Received) -> tuple[int, bytes, dict[str, str]]:
        time.sleep(1.5)
        return 200, b"", {}

    receiver.answer = slow
    target = check_url(receiver.url, parse_networks("127.0.0.1/32"))
    with pytest.raises(SendFailed, match="timed out"):
        post(target, b"{}", {}, allowed=parse_networks("127.0.0.1/32"),
             timeouts=Timeouts(connect=1, read=0.2))


def test_the_sender_refuses_a_stored_url_the_rules_now_refuse(
    ngov: Governance, caller: Caller, receiver: Receiver
) -> None:
    destination(caller, receiver.url)
    raise_alert(caller, new_run(caller))
    # Sent by a sender whose operator no longer allows 127.0.0.1.
    sender = Sender(ngov, quick_settings(allowed_networks=()))
    sender.run_once()
    sender.close()
    assert receiver.received == []
    assert "not public" in deliveries(caller)[0]["last_error"]


def test_a_number_standing_for_a_loopback_address_is_refused_after_resolving(
    receiver: Receiver,
) -> None:
    target = check_url(f"http://2130706433:{receiver.server.server_port}/hook")
    with pytest.raises(SendFailed, match=r"127\.0\.0\.1 is not public"):
        post(target, b"{}", {})
    assert receiver.received == []
