"""The outbox under ``kill -9``: a sender killed during delivery loses no event, and an event
id never carries another event (``benchmarks/delivery_bench.py`` runs 20 rounds)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from governance_core.context import Config
from governance_core.repository import Filter
from governance_core.service import Governance
from tests.core.runs import account_caller
from tests.notifications.conftest import LOOPBACK_ONLY, Received, Receiver
from tests.notifications.world import destination, new_run, raise_alert, verified

ROUNDS = 3
EVENTS = 12


def start_deliver(db: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", "governance_http.cli", "deliver", "--db", str(db),
         "--poll-seconds", "0.01", "--lease-seconds", "0.3", "--retry-base-seconds", "0.01",
         "--allow-network", "127.0.0.1/32"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def pending(db: Path) -> int:
    with Governance.open(db) as gov:
        return gov.store.count("deliveries", [Filter("status", "ne", "delivered")])


def test_kill_9_during_delivery_loses_no_event(tmp_path: Path, receiver: Receiver) -> None:
    def slow(request: Received) -> tuple[int, bytes, dict[str, str]]:
        time.sleep(0.05)  # a window in which the sender is killed mid-request
        return 200, b"", {}

    receiver.answer = slow
    db = tmp_path / "outbox.db"
    with Governance.open(db, config=Config(webhook_allowed_networks=LOOPBACK_ONLY)) as gov:
        caller = account_caller(gov, gov.bootstrap())
        _, secret = destination(caller, receiver.url)
        run_id = new_run(caller)
        for index in range(EVENTS):
            raise_alert(caller, run_id, name=f"a{index:02d}")
        event_ids = [row["id"] for row in caller.call(
            "notification_events/list", sorting="id", pagination={"page_size": 100}
        )["summaries"]]
    kills = 0
    for round_index in range(ROUNDS):
        seen = len(receiver.received)
        process = start_deliver(db)
        # Kill it while it waits for an answer: the request was sent, its outcome not stored.
        if receiver.wait_for(seen + 2 + round_index, timeout=20):
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.wait(10)
    process = start_deliver(db)
    try:
        deadline = time.monotonic() + 60
        while pending(db) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        process.terminate()
        process.wait(10)
    assert kills == ROUNDS
    assert pending(db) == 0
    bodies: dict[str, set[bytes]] = defaultdict(set)
    first_seen: list[str] = []
    for request in receiver.received:
        verified(secret, request)
        event_id = request.headers["webhook-id"]
        if event_id not in bodies:
            first_seen.append(event_id)
        bodies[event_id].add(request.body)
    assert first_seen == event_ids, "every event arrived, in order"
    assert all(len(seen) == 1 for seen in bodies.values()), "one id, one body"
