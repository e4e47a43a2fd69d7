"""The sender's lease (one sender per database), its place in ``serve`` and ``deliver``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from unittest import mock

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.ids import SeededIds
from governance_core.notifications import sender as sender_module
from governance_core.notifications.sender import Sender, SenderUnavailable
from governance_core.repository import SortKey
from governance_core.service import Governance
from governance_http.cli import main
from tests.core.runs import account_caller
from tests.notifications.conftest import LOOPBACK_ONLY, Received, Receiver, quick_settings
from tests.notifications.world import destination, new_run, raise_alert, verified
from tests.stores import STORE_KINDS, make_store


@pytest.fixture(params=STORE_KINDS)
def clocked(request: pytest.FixtureRequest) -> Iterator[tuple[Governance, FixedClock]]:
    clock = FixedClock()
    governance = Governance(make_store(request.param), clock=clock, ids=SeededIds(3))
    yield governance, clock
    governance.close()


def test_one_sender_holds_the_lease_until_it_lapses_or_is_released(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, clock = clocked
    first = Sender(gov, quick_settings(lease_seconds=30), holder="first")
    second = Sender(gov, quick_settings(lease_seconds=30), holder="second")
    assert first.acquire() and first.acquire(), "the holder renews"
    assert not second.acquire()
    assert second.run_once() == 0
    clock.advance(timedelta(seconds=29))
    assert first.acquire()
    clock.advance(timedelta(seconds=29))
    assert not second.acquire(), "renewed 29 s ago, still held"
    clock.advance(timedelta(seconds=2))
    assert second.acquire(), "a silent holder loses the lease"
    assert not first.acquire()
    first.release()
    assert not first.acquire(), "releasing is the holder's alone"
    second.close()
    assert first.acquire(), "closing gives the lease up"
    first.close()


def test_a_drain_stops_sending_once_its_lease_has_lapsed(receiver: Receiver) -> None:
    """A sender that could not renew its lease sends nothing more: another may have taken it."""
    clock = FixedClock()
    gov = Governance(make_store("memory"), clock=clock, ids=SeededIds(4),
                     config=Config(webhook_allowed_networks=LOOPBACK_ONLY))
    caller = account_caller(gov, gov.bootstrap())
    destination(caller, receiver.url)
    run_id = new_run(caller)
    for index in range(3):
        raise_alert(caller, run_id, name=f"a{index}")

    def slow(request: Received) -> tuple[int, bytes, dict[str, str]]:
        # The first request outlasts the lease, with no pass in between to renew it.
        if len(receiver.received) == 1:
            clock.advance(timedelta(seconds=31))
        return 200, b"ok", {}

    receiver.answer = slow
    first = Sender(gov, quick_settings(lease_seconds=30), holder="first")
    second = Sender(gov, quick_settings(lease_seconds=30), holder="second")
    assert first.run_once() == 1, "the drain stopped after the request that outlasted it"
    assert second.run_once() == 2, "the next holder sends the rest"
    names = [json.loads(request.body)["data"]["alert"]["name"] for request in receiver.received]
    assert names == ["a0", "a1", "a2"]
    first.close()
    second.close()
    gov.close()


def test_without_the_signing_library_the_sender_is_off_with_a_clear_message(
    clocked: tuple[Governance, FixedClock],
) -> None:
    gov, _ = clocked
    with mock.patch.object(sender_module, "signer_available", return_value=False), \
            pytest.raises(SenderUnavailable, match=r"pip install .*\[notifications\]"):
        Sender(gov)


def test_serve_starts_a_sender_unless_turned_off(
    clocked: tuple[Governance, FixedClock], monkeypatch: pytest.MonkeyPatch
) -> None:
    from governance_http import serving

    gov, _ = clocked
    monkeypatch.setenv("GOVERNANCE_SENDER", "off")
    monkeypatch.setenv("GOVERNANCE_WEBHOOK_ALLOWED_NETWORKS", "10.0.0.0/8")
    assert serving.start_sender(gov) is None
    assert gov.config.webhook_allowed_networks == ("10.0.0.0/8",)
    monkeypatch.setenv("GOVERNANCE_SENDER", "on")
    running = serving.start_sender(gov)
    assert running is not None and running.thread.is_alive()
    running.stop(10)
    assert not running.thread.is_alive()
    with mock.patch.object(sender_module, "signer_available", return_value=False):
        assert serving.start_sender(gov) is None


def test_governance_deliver_once_sends_what_is_due(
    tmp_path: Path, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.db"
    with Governance.open(db, config=Config(webhook_allowed_networks=LOOPBACK_ONLY)) as gov:
        caller = account_caller(gov, gov.bootstrap())
        _, secret = destination(caller, receiver.url)
        raise_alert(caller, new_run(caller))
    argv = ["deliver", "--db", str(db), "--once", "--json", "--retry-base-seconds", "0.001"]
    assert main(argv) == 0, "127.0.0.1 is not allowed without the option"
    assert json.loads(capsys.readouterr().out) == {"attempted": 1}
    assert receiver.received == []
    time.sleep(0.01)
    assert main([*argv, "--allow-network", "127.0.0.1/32"]) == 0
    assert json.loads(capsys.readouterr().out) == {"attempted": 1}
    assert verified(secret, receiver.received[0])["type"] == "alert.raised"
    with Governance.open(db) as gov:
        [row] = gov.store.query("deliveries")
        attempts = gov.store.query("delivery_attempts", sort=[SortKey("attempted_at")])
    assert row["status"] == "delivered" and row["attempt_count"] == 2
    assert "not public" in attempts[0]["error"] and attempts[1]["status_code"] == 200


def test_deliver_refuses_bad_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "g.db"
    Governance.open(db).close()
    assert main(["deliver", "--db", str(db), "--once", "--allow-network", "nope"]) == 1
    assert "--allow-network: 'nope' is not an IP network" in capsys.readouterr().err
    assert main(["deliver", "--db", str(db), "--once", "--poll-seconds", "0"]) == 1
    assert "--poll-seconds must be more than 0" in capsys.readouterr().err
    assert os.path.exists(db)


WITHOUT_SIGNER = """
import sys

class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "standardwebhooks" or name.startswith("standardwebhooks."):
            raise ImportError("blocked: " + name)
        return None

sys.meta_path.insert(0, Block())
from governance_core.service import Governance
from governance_core.notifications.sender import Sender, SenderUnavailable

gov = Governance.open(":memory:")
boot = gov.bootstrap()
session = gov.session(boot.token)
session.call("destinations/create", name="h", url="https://hooks.example.com/")
session.call("monitors/create", name="m", metric="run_count", window_seconds=60, warning=1)
session.call("monitors/evaluate")
try:
    Sender(gov)
except SenderUnavailable as error:
    print(error)
"""


def test_the_core_works_without_the_signing_library(tmp_path: Path) -> None:
    result = subprocess.run([sys.executable, "-c", WITHOUT_SIGNER], capture_output=True,
                            text=True, cwd=tmp_path, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    assert "webhook delivery is off: it needs the standardwebhooks package" in result.stdout
