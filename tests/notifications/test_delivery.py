"""Signed delivery to a real receiver: verification, order, retries, dead letters, re-send,
secret rotation, body formats, the delivery log and per-destination concurrency."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from governance_core.errors import InvalidAction
from governance_core.notifications.sender import RetryPolicy, Sender
from governance_core.repository import Filter
from governance_core.service import Governance
from tests.core.runs import Caller
from tests.notifications.conftest import Received, Receiver, quick_settings
from tests.notifications.world import (
    body_of,
    deliveries,
    destination,
    new_run,
    raise_alert,
    verified,
)


def drain(sender: Sender, passes: int = 400) -> int:
    """Run passes until no delivery is pending; the deliveries attempted in all."""
    total = 0
    for _ in range(passes):
        total += sender.run_once()
        if not sender.store.count("deliveries", [Filter("status", "eq", "pending")]):
            return total
        time.sleep(0.002)
    raise AssertionError("deliveries are still pending")


def test_an_alert_raise_and_clear_arrive_signed_and_verifiable(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    _, secret = destination(caller, receiver.url)
    run_id = new_run(caller)
    alert = raise_alert(caller, run_id)
    caller.call("alerts/clear", agent_instance_id=run_id, name="slow")
    assert drain(sender) == 2
    payloads = [verified(secret, request) for request in receiver.received]
    assert [payload["type"] for payload in payloads] == ["alert.raised", "alert.cleared"]
    assert payloads[0]["data"]["alert"]["id"] == alert["id"]
    assert payloads[1]["data"]["alert"]["status"] == "cleared"
    ids = [request.headers["webhook-id"] for request in receiver.received]
    events = caller.call("notification_events/list", sorting="id")["summaries"]
    assert ids == [event["id"] for event in events]
    assert receiver.received[0].path == "/hook"


def test_a_wrong_secret_or_a_changed_body_fails_verification(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    _, secret = destination(caller, receiver.url)
    raise_alert(caller, new_run(caller))
    drain(sender)
    request = receiver.received[0]
    with pytest.raises(WebhookVerificationError):
        Webhook("whsec_" + "A" * 44).verify(request.body, request.headers)
    with pytest.raises(WebhookVerificationError):
        Webhook(secret).verify(request.body + b" ", request.headers)


def test_failures_are_retried_in_order_until_the_receiver_recovers(
    ngov: Governance, caller: Caller, receiver: Receiver
) -> None:
    failures = {"left": 5}

    def flaky(request: Received) -> tuple[int, bytes, dict[str, str]]:
        if failures["left"] > 0:
            failures["left"] -= 1
            return 500, b"down", {}
        return 200, b"ok", {}

    receiver.answer = flaky
    sender = Sender(ngov, quick_settings(retry=RetryPolicy(max_attempts=10, base_seconds=0.001,
                                                           cap_seconds=0.002)))
    _, secret = destination(caller, receiver.url)
    run_id = new_run(caller)
    for index in range(4):
        raise_alert(caller, run_id, name=f"a{index}")
    for _ in range(200):
        sender.run_once()
        if all(row["status"] == "delivered" for row in deliveries(caller)):
            break
    sender.close()
    assert [row["status"] for row in deliveries(caller)] == ["delivered"] * 4
    first = [verified(secret, request)["data"]["alert"]["name"] for request in receiver.received]
    # The first event was tried until the receiver recovered; nothing overtook it.
    assert first == ["a0"] * 6 + ["a1", "a2", "a3"]
    assert len({request.headers["webhook-id"] for request in receiver.received}) == 4
    bodies = {request.body for request in receiver.received[:6]}
    assert len(bodies) == 1, "every attempt of one event sends the same body"
    head = caller.details("deliveries/show", delivery_id=deliveries(caller)[0]["id"])
    codes = [attempt["status_code"] for attempt in reversed(head["attempts"])]
    assert codes == [500] * 5 + [200]
    assert head["attempts"][-1]["response_prefix"] == "down"
    assert head["attempt_count"] == 6 and head["last_status_code"] == 200


def test_the_backoff_grows_with_jitter_up_to_its_cap() -> None:
    policy = RetryPolicy(base_seconds=2, cap_seconds=20)
    assert policy.delay(1, lambda: 0.0) == timedelta(seconds=1)
    assert policy.delay(1, lambda: 0.999999) < timedelta(seconds=2)
    assert policy.delay(3, lambda: 0.0) == timedelta(seconds=4)
    assert policy.delay(10, lambda: 0.0) == timedelta(seconds=10)


def test_a_failed_attempt_waits_for_its_backoff(
    ngov: Governance, caller: Caller, receiver: Receiver
) -> None:
    receiver.answer = lambda request: (503, b"", {})
    sender = Sender(ngov, quick_settings(retry=RetryPolicy(base_seconds=3600)))
    destination(caller, receiver.url)
    raise_alert(caller, new_run(caller))
    assert sender.run_once() == 1
    assert sender.run_once() == 0, "the retry is an hour away"
    sender.close()
    row = deliveries(caller)[0]
    assert row["status"] == "pending" and row["last_error"] == "answered 503"
    assert row["next_attempt_at"] > row["last_attempt_at"]


def test_the_last_attempt_makes_a_dead_letter_and_the_next_event_goes(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    receiver.answer = lambda request: (
        (500, b"no", {}) if body_of(request)["data"]["alert"]["name"] == "bad" else (200, b"", {})
    )
    destination(caller, receiver.url)
    run_id = new_run(caller)
    raise_alert(caller, run_id, name="bad")
    raise_alert(caller, run_id, name="good")
    drain(sender)
    rows = deliveries(caller)
    assert [row["status"] for row in rows] == ["dead", "delivered"]
    assert rows[0]["attempt_count"] == 4
    assert caller.call("deliveries/list", status="dead")["pagination"]["item_count"] == 1


def test_a_dead_letter_is_sent_again_on_resend_with_the_same_id(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    receiver.answer = lambda request: (500, b"", {})
    _, secret = destination(caller, receiver.url)
    raise_alert(caller, new_run(caller))
    drain(sender)
    dead = deliveries(caller)[0]
    assert dead["status"] == "dead"
    receiver.answer = lambda request: (200, b"", {})
    resent = caller.details("deliveries/resend", delivery_id=dead["id"])
    assert resent["status"] == "pending" and resent["round_attempts"] == 0
    with pytest.raises(InvalidAction):
        caller.call("deliveries/resend", delivery_id=dead["id"])
    drain(sender)
    assert deliveries(caller)[0]["status"] == "delivered"
    assert receiver.received[-1].headers["webhook-id"] == receiver.received[0].headers[
        "webhook-id"]
    verified(secret, receiver.received[-1])


def test_a_rotated_secret_signs_beside_the_old_one_during_the_grace(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    details, old = destination(caller, receiver.url)
    rotated = caller.call("destinations/rotate_secret", destination_id=details["id"],
                          grace_seconds=3600)
    new = rotated["secret"]
    assert new != old and "secrets" not in rotated["details"]
    raise_alert(caller, new_run(caller))
    drain(sender)
    request = receiver.received[-1]
    assert len(request.headers["webhook-signature"].split(" ")) == 2
    verified(old, request)
    verified(new, request)
    caller.call("destinations/rotate_secret", destination_id=details["id"], grace_seconds=0)
    raise_alert(caller, new_run(caller), name="later")
    drain(sender)
    request = receiver.received[-1]
    assert len(request.headers["webhook-signature"].split(" ")) == 1
    with pytest.raises(WebhookVerificationError):
        verified(new, request)


def test_the_secret_is_shown_once_and_never_in_views(caller: Caller, receiver: Receiver) -> None:
    envelope = caller.call("destinations/create", name="h", url=receiver.url,
                           idempotency_key="create-hook-1")
    assert envelope["secret"].startswith("whsec_")
    replay = caller.call("destinations/create", name="h", url=receiver.url,
                         idempotency_key="create-hook-1")
    assert replay["secret"] is None
    shown = caller.details("destinations/show", destination_id=envelope["details"]["id"])
    assert "secrets" not in shown and envelope["secret"] not in str(shown)


def test_a_slack_destination_gets_a_text_body(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    _, secret = destination(caller, receiver.url, body_format="slack")
    raise_alert(caller, new_run(caller), severity="critical")
    drain(sender)
    payload = verified(secret, receiver.received[0])
    assert set(payload) == {"text"}
    assert payload["text"].startswith("[critical] Alert raised: slow")


def test_a_redirect_is_not_followed(caller: Caller, sender: Sender, receiver: Receiver,
                                    other_receiver: Receiver) -> None:
    receiver.answer = lambda request: (302, b"", {"Location": other_receiver.url})
    destination(caller, receiver.url)
    raise_alert(caller, new_run(caller))
    sender.run_once()
    assert other_receiver.received == []
    row = deliveries(caller)[0]
    assert row["status"] == "pending" and "redirects are not followed" in row["last_error"]


def test_only_a_prefix_of_the_response_is_kept(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    receiver.answer = lambda request: (200, b"x" * 100_000, {})
    destination(caller, receiver.url)
    raise_alert(caller, new_run(caller))
    drain(sender)
    shown = caller.details("deliveries/show", delivery_id=deliveries(caller)[0]["id"])
    assert shown["attempts"][0]["response_prefix"] == "x" * 512


def test_a_hanging_destination_does_not_hold_up_another(
    ngov: Governance, caller: Caller, receiver: Receiver, other_receiver: Receiver
) -> None:
    release = threading.Event()

    def hang(request: Received) -> tuple[int, bytes, dict[str, str]]:
        release.wait(20)
        return 200, b"", {}

    receiver.answer = hang
    destination(caller, receiver.url, name="slow")
    destination(caller, other_receiver.url, name="fast")
    raise_alert(caller, new_run(caller))
    sender = Sender(ngov, quick_settings())
    stop = threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    try:
        assert receiver.wait_for(1)
        # The first destination holds its request open; the second gets its event meanwhile.
        assert other_receiver.wait_for(1)
        assert not release.is_set()
    finally:
        release.set()
        stop.set()
        thread.join(30)
    assert not thread.is_alive()


def test_a_disabled_destination_gets_nothing_and_a_deleted_ones_deliveries_die(
    caller: Caller, sender: Sender, receiver: Receiver
) -> None:
    details, _ = destination(caller, receiver.url)
    caller.call("destinations/update", destination_id=details["id"], status="disabled")
    raise_alert(caller, new_run(caller))
    assert deliveries(caller) == []
    caller.call("destinations/update", destination_id=details["id"], status="active")
    raise_alert(caller, new_run(caller), name="second")
    caller.call("destinations/delete", destination_id=details["id"])
    drain(sender)
    assert receiver.received == []
    row = deliveries(caller)[0]
    assert row["status"] == "dead" and row["last_error"] == "the destination was deleted"


def test_a_test_event_goes_to_that_destination_only(
    caller: Caller, sender: Sender, receiver: Receiver, other_receiver: Receiver
) -> None:
    details, secret = destination(caller, receiver.url, event_types=["alert.cleared"])
    destination(caller, other_receiver.url)
    caller.call("destinations/test", destination_id=details["id"])
    drain(sender)
    assert verified(secret, receiver.received[0])["type"] == "destination.test"
    assert other_receiver.received == []


def test_a_disabled_destination_cannot_be_tested(caller: Caller, receiver: Receiver) -> None:
    details, _ = destination(caller, receiver.url)
    caller.call("destinations/update", destination_id=details["id"], status="disabled")
    with pytest.raises(InvalidAction, match="disabled"):
        caller.call("destinations/test", destination_id=details["id"])
