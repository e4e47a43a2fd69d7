"""Retention: delivered events and deliveries past the window are purged in batches, dead
letters later, and an event with a pending delivery never; on an injected clock."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.ids import SeededIds
from governance_core.notifications.retention import (
    DEAD_RETENTION_VARIABLE,
    RETENTION_VARIABLE,
    Retention,
    purge_batch,
)
from governance_core.notifications.sender import CHANGE_VARIABLE, Sender, SenderSettings
from governance_core.repository import Filter
from governance_core.service import Governance
from governance_core.storage.protocol import Store
from governance_http.cli import main
from tests.core.runs import Caller, account_caller
from tests.notifications.conftest import LOOPBACK_ONLY, Receiver, quick_settings
from tests.notifications.world import destination, new_run, raise_alert
from tests.stores import make_store

STORES = ["memory", "sqlite", "postgres"]
DAY = timedelta(days=1)


@pytest.fixture(params=STORES)
def clocked(request: pytest.FixtureRequest) -> Iterator[tuple[Governance, FixedClock]]:
    clock = FixedClock()
    governance = Governance(make_store(request.param), clock=clock, ids=SeededIds(13),
                            config=Config(webhook_allowed_networks=LOOPBACK_ONLY))
    yield governance, clock
    governance.close()


def counts(store: Store) -> dict[str, int]:
    return {table: store.count(table)
            for table in ("notification_events", "deliveries", "delivery_attempts")}


def statuses(store: Store, event_id: str) -> list[str]:
    return sorted(row["status"] for row in store.query(
        "deliveries", [Filter("event_id", "eq", event_id)]))


def send_all(sender: Sender, clock: FixedClock) -> None:
    """Passes, a second apart, until no delivery to an active destination is due."""
    for _ in range(50):
        sender.run_once()
        clock.advance(timedelta(seconds=1))
        active = {row["id"] for row in sender.store.query(
            "destinations", [Filter("status", "eq", "active")])}
        due = [row for row in sender.store.query("deliveries", [Filter("status", "eq", "pending")])
               if row["destination_id"] in active]
        if not due:
            return
    raise AssertionError("deliveries are still due")


def event_of(caller: Caller, event_type: str) -> str:
    [event] = caller.call("notification_events/list", event_type=event_type)["summaries"]
    event_id: str = event["id"]
    return event_id


def test_delivered_go_after_the_window_dead_letters_later_pending_never(
    clocked: tuple[Governance, FixedClock], receiver: Receiver, other_receiver: Receiver,
) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    other_receiver.answer = lambda request: (500, b"down", {})
    destination(caller, receiver.url, name="good")
    destination(caller, other_receiver.url, name="down", event_types=["alert.cleared"])
    held, _ = destination(caller, receiver.url, name="held", event_types=["alert.updated"])
    run_id = new_run(caller)
    raise_alert(caller, run_id)                       # to good: delivered
    raise_alert(caller, run_id, severity="critical")  # to good and held: held stays pending
    caller.call("alerts/clear", agent_instance_id=run_id, name="slow")  # good; down: dead
    caller.call("destinations/update", destination_id=held["id"], status="disabled")
    raised, updated, cleared = (event_of(caller, f"alert.{change}")
                                for change in ("raised", "updated", "cleared"))
    sender = Sender(gov, quick_settings(), holder="retention")
    try:
        send_all(sender, clock)
        clock.advance(29 * DAY)
        raise_alert(caller, new_run(caller), name="young")
        send_all(sender, clock)
    finally:
        sender.close()
    assert statuses(gov.store, updated) == ["delivered", "pending"]
    assert statuses(gov.store, cleared) == ["dead", "delivered"]
    before = counts(gov.store)
    assert before == {"notification_events": 4, "deliveries": 6, "delivery_attempts": 8}

    assert purge_batch(gov.store, clock(), Retention()).events == 0, "29 days: all kept"
    clock.advance(2 * DAY)
    purged = purge_batch(gov.store, clock(), Retention())
    assert (purged.events, purged.deliveries, purged.attempts) == (1, 2, 2)
    assert gov.store.get("notification_events", raised) is None
    assert statuses(gov.store, updated) == ["delivered", "pending"], "a pending event stays whole"
    assert statuses(gov.store, cleared) == ["dead"], "the dead letter is kept longer"
    [dead] = gov.store.query("deliveries", [Filter("event_id", "eq", cleared)])
    assert gov.store.count("delivery_attempts", [Filter("delivery_id", "eq", dead["id"])]) == 4

    clock.advance(60 * DAY)
    purged = purge_batch(gov.store, clock(), Retention())
    assert (purged.events, purged.deliveries, purged.attempts) == (2, 2, 5)
    assert gov.store.get("notification_events", cleared) is None
    assert statuses(gov.store, updated) == ["delivered", "pending"]
    assert counts(gov.store) == {"notification_events": 1, "deliveries": 2,
                                 "delivery_attempts": 1}


def test_a_dead_letter_sent_again_is_kept_until_delivered(
    clocked: tuple[Governance, FixedClock], receiver: Receiver,
) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    destination(caller, receiver.url)
    receiver.answer = lambda request: (500, b"down", {})
    raise_alert(caller, new_run(caller))
    # The purges asserted are the test's own: the sender's purge runs beside its drains, and
    # would purge the event itself whenever the delivery lands before the purge reads it.
    sender = Sender(gov, quick_settings(purge_seconds=10**9), holder="retention")
    try:
        send_all(sender, clock)
        [dead] = gov.store.query("deliveries")
        assert dead["status"] == "dead"
        clock.advance(100 * DAY)
        caller.call("deliveries/resend", delivery_id=dead["id"])
        assert purge_batch(gov.store, clock(), Retention()).events == 0, "pending again"
        receiver.answer = lambda request: (200, b"ok", {})
        send_all(sender, clock)
    finally:
        sender.close()
    assert purge_batch(gov.store, clock(), Retention()).events == 1
    assert counts(gov.store) == {"notification_events": 0, "deliveries": 0,
                                 "delivery_attempts": 0}


class FailingDeletes:
    """A store whose ``delete`` fails on the ``fail_at``-th call: a batch half done."""

    def __init__(self, store: Store, fail_at: int) -> None:
        self.store = store
        self.left = fail_at

    def delete(self, table: str, record_id: str) -> bool:
        self.left -= 1
        if self.left == 0:
            raise RuntimeError("the database went away")
        return self.store.delete(table, record_id)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)


def old_events(caller: Caller, count: int) -> None:
    run_id = new_run(caller)
    for index in range(count):
        raise_alert(caller, run_id, name=f"a{index}")


def test_each_batch_is_one_transaction_of_a_bounded_size(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    old_events(caller, 5)
    clock.advance(31 * DAY)
    with pytest.raises(RuntimeError):
        purge_batch(FailingDeletes(gov.store, 2), clock(), Retention(), batch=3)
    assert gov.store.count("notification_events") == 5, "the failed batch purged nothing"
    first = purge_batch(gov.store, clock(), Retention(), batch=3)
    assert (first.events, first.looked_at) == (3, 3)
    second = purge_batch(gov.store, clock(), Retention(), after=first.last_id, batch=3)
    assert (second.events, second.looked_at) == (2, 2)
    assert gov.store.count("notification_events") == 0


def test_the_sender_purges_a_batch_a_pass_then_waits(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, clock = clocked
    caller = account_caller(gov, gov.bootstrap())
    old_events(caller, 5)
    clock.advance(31 * DAY)
    sender = Sender(gov, quick_settings(purge_batch=2, purge_seconds=31 * 86400),
                    holder="retention")
    try:
        remaining = []
        for _ in range(4):
            sender.run_once()
            remaining.append(gov.store.count("notification_events"))
        assert remaining == [3, 1, 0, 0]
        old_events(caller, 1)
        clock.advance(30 * DAY + timedelta(seconds=1))
        sender.run_once()
        assert gov.store.count("notification_events") == 1, "the next purge is 31 days on"
        clock.advance(DAY)
        sender.run_once()
        assert gov.store.count("notification_events") == 0
    finally:
        sender.close()


def test_retention_comes_from_the_environment() -> None:
    default = SenderSettings.from_environment({})
    assert default.retention == Retention(30, 90) and default.change_seconds == 5
    assert SenderSettings.from_environment({RETENTION_VARIABLE: "7"}).retention == Retention(7, 90)
    assert SenderSettings.from_environment(
        {RETENTION_VARIABLE: "120"}).retention == Retention(120, 120), "dead letters as long"
    assert SenderSettings.from_environment(
        {RETENTION_VARIABLE: "1.5", DEAD_RETENTION_VARIABLE: "365"}
    ).retention == Retention(1.5, 365)
    assert SenderSettings.from_environment({CHANGE_VARIABLE: "0"}).change_seconds == 0
    for name, value in ((RETENTION_VARIABLE, "0"), (RETENTION_VARIABLE, "a month"),
                        (DEAD_RETENTION_VARIABLE, "-1"), (RETENTION_VARIABLE, "inf"),
                        (RETENTION_VARIABLE, "1e9"), (CHANGE_VARIABLE, "soon"),
                        (CHANGE_VARIABLE, "-5"), (CHANGE_VARIABLE, "1e300"),
                        ("GOVERNANCE_WEBHOOK_ALLOWED_NETWORKS", "everywhere")):
        with pytest.raises(ValueError, match=name):
            SenderSettings.from_environment({name: value})
    with pytest.raises(ValueError, match=f"{DEAD_RETENTION_VARIABLE}: dead letters are kept"):
        SenderSettings.from_environment({DEAD_RETENTION_VARIABLE: "10"})
    with pytest.raises(ValueError, match="dead_days"):
        Retention(30, 10)


def test_deliver_refuses_a_bad_retention_naming_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = tmp_path / "g.db"
    Governance.open(db).close()
    monkeypatch.setenv(RETENTION_VARIABLE, "forever")
    assert main(["deliver", "--db", str(db), "--once"]) == 1
    assert f"{RETENTION_VARIABLE} must be a number of days" in capsys.readouterr().err


def test_serve_refuses_a_bad_retention_before_starting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    from governance_http import serving

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    monkeypatch.setenv(DEAD_RETENTION_VARIABLE, "7")

    def started(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("the server started")

    monkeypatch.setattr(serving, "Granian", started)
    with pytest.raises(ValueError, match=f"{DEAD_RETENTION_VARIABLE}: dead letters"):
        serving.serve(tmp_path / "g.db", host="127.0.0.1", port=port)
    assert not (tmp_path / "g.db").exists()
