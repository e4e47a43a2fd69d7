"""Webhook delivery: recovery after an outage, kill -9 of the sender, and a hanging destination.

Three scenarios against real receivers on 127.0.0.1 (each verifying every message with the
Standard Webhooks library), over a SQLite file:

1. Outage: ``--events`` alert events go to two destinations whose receivers answer 500 for
   ``--outage`` seconds, then 200. The sender runs in-process with a shortened backoff
   (``--base`` seconds doubling to ``--cap``). Prints whether every event arrived, each id
   verified, in order per destination, and the delivery latency after recovery (from the
   receiver turning healthy, or the event's creation if later, to its first 200): p50/p99.
2. kill -9: ``--rounds`` times, ``governance deliver`` is started and killed with SIGKILL
   while a request is in flight; a last one finishes. Prints events lost (goal 0) and how
   many messages arrived twice (allowed: at least once; never another body under an id).
3. Hanging destination: one receiver never answers within the read timeout while another
   answers at once; prints the healthy destination's p99 delivery latency and its ratio to
   the same run without the hanging one (goal: about 1).
4. Changes: ``--runs`` runs of ``--agents`` agents started within the last hour, a monitor
   per agent and one of the whole account; one run finishes between looks. Prints what the
   sender's look for changed runs costs (median of 20) against evaluating every monitor,
   as a schedule of the same delay would (goal: a look under a tenth of that).
5. Purge: ``--purge-events`` delivered events (a delivery and an attempt each) past
   retention, purged in batches of 100; prints events purged a second and the longest
   batch, the time one transaction holds the write lock (goal: under 100 ms).

Usage: ``PYTHONPATH=. python benchmarks/delivery_bench.py [--outage 30] [--rounds 20]
[--only changes,purge]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook

from governance_core.clock import format_timestamp
from governance_core.context import Config
from governance_core.converter import from_record
from governance_core.ids import IdFactory
from governance_core.models.notifications import Monitor
from governance_core.notifications.addresses import parse_networks
from governance_core.notifications.changes import ChangeWatch
from governance_core.notifications.retention import Retention, purge_batch
from governance_core.notifications.sender import RetryPolicy, Sender, SenderSettings
from governance_core.notifications.transport import Timeouts
from governance_core.repository import Filter
from governance_core.service import Governance, Session

LOOPBACK = ("127.0.0.1/32",)


class Receiver:
    """Records the first verified 200 of each webhook id, in the order answered.

    It answers 500 until ``healthy_at`` (never while ``None``), then 200, each answer after
    waiting ``hang`` seconds.
    """

    def __init__(self) -> None:
        self.secret = ""
        self.healthy_at: float | None = time.monotonic()
        self.hang = 0.0
        self.first_ok: dict[str, float] = {}
        self.order: list[str] = []
        self.bodies: dict[str, set[bytes]] = defaultdict(set)
        self.requests = 0
        self.failures = 0
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                Webhook(receiver.secret).verify(body, dict(self.headers))
                event_id = self.headers["webhook-id"]
                with receiver.arrived:
                    receiver.requests += 1
                    receiver.bodies[event_id].add(body)
                    receiver.arrived.notify_all()
                if receiver.hang:
                    time.sleep(receiver.hang)
                # Recorded before answering: once the answer is written the sender may send
                # the next event, whose handler could record it before this one got back.
                with receiver.lock:
                    healthy = receiver.healthy_at is not None and time.monotonic() >= (
                        receiver.healthy_at)
                    status = 200 if healthy else 500
                    if status == 200 and event_id not in receiver.first_ok:
                        receiver.first_ok[event_id] = time.monotonic()
                        receiver.order.append(event_id)
                    if status != 200:
                        receiver.failures += 1
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        """The receiver's webhook URL."""
        return f"http://127.0.0.1:{self.server.server_port}/hook"

    def wait_requests(self, count: int, timeout: float) -> bool:
        """Wait until ``count`` requests arrived; whether they did in time."""
        with self.arrived:
            return self.arrived.wait_for(lambda: self.requests >= count, timeout)

    def close(self) -> None:
        """Stop serving."""
        self.server.shutdown()
        self.server.server_close()


def percentile(values: list[float], fraction: float) -> float:
    """The nearest-rank percentile of ``values``."""
    ordered = sorted(values)
    return ordered[max(0, min(len(ordered) - 1, int(fraction * len(ordered) + 0.999999) - 1))]


def setup(db: Path, receivers: list[Receiver]) -> tuple[Governance, Session, str]:
    """A store with an account, a destination per receiver and a run; the run's id."""
    gov = Governance.open(db, config=Config(webhook_allowed_networks=LOOPBACK))
    boot = gov.bootstrap()
    session = gov.session(boot.token)
    for index, receiver in enumerate(receivers):
        made = session.call("destinations/create", name=f"d{index}", url=receiver.url)
        receiver.secret = made["secret"]
    agent = session.details("agents/create", name="bench agent")
    run = session.details("agent_instances/register", agent_id=agent["id"], agent_version={
        "name": "v", "external_identifier": "1"}, agent_schema_version={
        "external_identifier": "s", "span_type_schemas": []})
    return gov, session, run["id"]


def raise_events(session: Session, run_id: str, count: int, start: int = 0) -> list[float]:
    """Raise ``count`` alerts (one event each); the monotonic time each was made."""
    created = []
    for index in range(start, start + count):
        session.call("alerts/raise", agent_instance_id=run_id, name=f"a{index:05d}",
                     severity="warning", payload={"index": index})
        created.append(time.monotonic())
    return created


def event_ids(session: Session) -> list[str]:
    """Every event id of the account, oldest first."""
    ids: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = session.call("notification_events/list", sorting="id",
                            pagination={"offset": offset, "page_size": 100})
        ids += [row["id"] for row in page["summaries"]]
        offset = page["pagination"]["next_page_offset"]
    return ids


def settings(base: float, cap: float, read: float = 5.0) -> SenderSettings:
    """Sender settings allowing 127.0.0.1, with a shortened backoff."""
    return SenderSettings(
        allowed_networks=parse_networks(LOOPBACK), poll_seconds=0.02, monitor_seconds=0,
        retry=RetryPolicy(max_attempts=1000, base_seconds=base, cap_seconds=cap),
        timeouts=Timeouts(connect=1.0, read=read),
    )


def outage(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Scenario 1: receivers answer 500 for ``--outage`` seconds, then 200."""
    receivers = [Receiver(), Receiver()]
    for receiver in receivers:
        receiver.healthy_at = None
    gov, session, run_id = setup(folder / "outage.db", receivers)
    sender = Sender(gov, settings(args.base, args.cap))
    stop = threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    started = time.monotonic()
    created = raise_events(session, run_id, args.events // 2)
    time.sleep(max(0.0, args.outage - (time.monotonic() - started)))
    recovered = time.monotonic()
    for receiver in receivers:
        receiver.healthy_at = recovered
    created += raise_events(session, run_id, args.events - len(created), start=len(created))
    ids = event_ids(session)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not all(
        len(receiver.first_ok) == len(ids) for receiver in receivers
    ):
        time.sleep(0.05)
    stop.set()
    thread.join()
    latencies = [
        (receiver.first_ok[event_id] - max(recovered, made)) * 1000
        for receiver in receivers
        for event_id, made in zip(ids, created, strict=True) if event_id in receiver.first_ok
    ]
    result = {
        "events": len(ids),
        "all_arrived": all(set(receiver.first_ok) == set(ids) for receiver in receivers),
        "in_order": all(receiver.order == ids for receiver in receivers),
        "one_body_per_id": all(
            len(bodies) == 1 for receiver in receivers for bodies in receiver.bodies.values()),
        "failed_answers_during_outage": sum(receiver.failures for receiver in receivers),
        "p50_ms_after_recovery": round(statistics.median(latencies), 1),
        "p99_ms_after_recovery": round(percentile(latencies, 0.99), 1),
    }
    gov.close()
    for receiver in receivers:
        receiver.close()
    return result


def deliver_process(db: Path) -> subprocess.Popen[bytes]:
    """Start ``governance deliver`` on ``db`` with a short lease and backoff."""
    return subprocess.Popen(
        [sys.executable, "-m", "governance_http.cli", "deliver", "--db", str(db),
         "--poll-seconds", "0.01", "--lease-seconds", "0.3", "--retry-base-seconds", "0.01",
         "--allow-network", "127.0.0.1/32"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )


def kill_rounds(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Scenario 2: ``--rounds`` kills of the sender with a request in flight."""
    receiver = Receiver()
    receiver.hang = 0.03  # the window in which a sender is killed with a request in flight
    db = folder / "kill.db"
    gov, session, run_id = setup(db, [receiver])
    raise_events(session, run_id, args.rounds * 3 + 10)
    ids = event_ids(session)
    gov.close()
    kills = 0
    for _ in range(args.rounds):
        process = deliver_process(db)
        if receiver.wait_requests(receiver.requests + 2, timeout=30):
            os.kill(process.pid, signal.SIGKILL)
            kills += 1
        process.wait(10)
    process = deliver_process(db)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and len(receiver.first_ok) < len(ids):
        time.sleep(0.05)
    process.terminate()
    process.wait(10)
    with Governance.open(db) as check:
        undelivered = check.store.count("deliveries", [Filter("status", "ne", "delivered")])
    result = {
        "rounds": args.rounds, "kills": kills, "events": len(ids),
        "lost": len(set(ids) - set(receiver.first_ok)), "undelivered": undelivered,
        "arrived_twice": receiver.requests - len(receiver.bodies),
        "one_body_per_id": all(len(bodies) == 1 for bodies in receiver.bodies.values()),
        "in_order": receiver.order == ids,
    }
    receiver.close()
    return result


def hanging(args: argparse.Namespace, folder: Path, with_hang: bool) -> float:
    """Scenario 3: the healthy destination's p99 latency (ms), beside a hanging one or not."""
    healthy, stuck = Receiver(), Receiver()
    stuck.hang = 2.0
    receivers = [healthy, stuck] if with_hang else [healthy]
    gov, session, run_id = setup(folder / f"hang{int(with_hang)}.db", receivers)
    sender = Sender(gov, settings(0.05, 0.5, read=0.5))
    stop = threading.Event()
    thread = threading.Thread(target=sender.run, args=(stop,))
    thread.start()
    created = raise_events(session, run_id, args.hang_events)
    ids = event_ids(session)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(healthy.first_ok) < len(ids):
        time.sleep(0.02)
    stop.set()
    thread.join()
    latencies = [(healthy.first_ok[event_id] - made) * 1000
                 for event_id, made in zip(ids, created, strict=True)]
    gov.close()
    for receiver in receivers:
        receiver.close()
    return percentile(latencies, 0.99)


def synthetic_runs(gov: Governance, account: dict[str, Any], agents: list[str],
                   environment_id: str, count: int) -> list[dict[str, Any]]:
    """``count`` finished runs started within the last hour, 5,000 a transaction.

    Stored as the write path keeps them: the fields a monitor and a look read.
    """
    now = gov.clock()
    runs = []
    for index in range(count):
        started = now - timedelta(seconds=3000 * index / count + 60)
        runs.append({
            "id": gov.ids.new(account["partition"], started), "account_id": account["id"],
            "inserted_at": format_timestamp(started), "updated_at": format_timestamp(started),
            "agent_id": agents[index % len(agents)], "environment_id": environment_id,
            "status": "failed" if index // len(agents) % 10 == 0 else "complete",
            "purpose": "live",
            "started_at": format_timestamp(started),
            "finished_at": format_timestamp(started + timedelta(seconds=30)),
            "started_day": format_timestamp(started)[:10], "risk_level": "low",
            "total_cost": 0.01, "duration_ms": 30000, "duration_bucket": 521,
            "span_total": 10,
        })
    for start in range(0, count, 5000):
        with gov.store.transaction():
            for run in runs[start:start + 5000]:
                gov.store.put("agent_instances", run)
    return runs


def changes(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """A look for changed runs against evaluating every monitor, at ``--runs`` runs."""
    gov = Governance.open(folder / "changes.db")
    boot = gov.bootstrap()
    session = gov.session(boot.token)
    agents = [session.details("agents/create", name=f"agent {index}")["id"]
              for index in range(args.agents)]
    account = gov.store.get("accounts", boot.account_id)
    assert account is not None
    runs = synthetic_runs(gov, account, agents, boot.environment_id, args.runs)
    for agent_id in agents:
        session.call("monitors/create", name=f"failures {agent_id}", metric="failed_runs",
                     window_seconds=3600, warning=1e9, agent_id=agent_id)
    session.call("monitors/create", name="error rate", metric="error_rate",
                 window_seconds=3600, warning=0.5)
    monitors = [from_record(Monitor, record) for record in gov.store.query("monitors")]
    watch = ChangeWatch(gov.store)
    watch.look(monitors, gov.clock())
    looks, touched = [], []
    for index in range(20):
        run = runs[index]
        gov.store.put("agent_instances", {**run, "status": "terminated"})
        began = time.perf_counter()
        touched.append(len(watch.look(monitors, gov.clock())))
        looks.append((time.perf_counter() - began) * 1000)
    began = time.perf_counter()
    evaluated = len(session.call("monitors/evaluate")["evaluated"]) + sum(
        len(session.call("monitors/evaluate", monitor_id=monitor.id)["evaluated"])
        for monitor in monitors
    )
    evaluate_all = (time.perf_counter() - began) * 1000 * len(monitors) / max(evaluated, 1)
    gov.close()
    look = statistics.median(looks)
    return {"runs": args.runs, "monitors": len(monitors), "look_ms_median": round(look, 1),
            "look_ms_max": round(max(looks), 1), "monitors_touched_a_look": max(touched),
            "evaluate_every_monitor_ms": round(evaluate_all, 1),
            "ratio": round(look / evaluate_all, 3)}


def purge(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """Purge ``--purge-events`` delivered events past retention, in batches of 100."""
    gov = Governance.open(folder / "purge.db")
    boot = gov.bootstrap()
    account = gov.store.get("accounts", boot.account_id)
    assert account is not None
    old = gov.clock() - timedelta(days=40)
    # A factory of its own: the store's continues from its latest id, which is today's.
    ids = IdFactory()
    with gov.store.transaction():
        for index in range(args.purge_events):
            at = old + timedelta(seconds=index)
            stamp = format_timestamp(at)
            event_id, delivery_id, attempt_id = (
                ids.new(account["partition"], at) for _ in range(3))
            common = {"account_id": boot.account_id, "inserted_at": stamp}
            gov.store.put("notification_events", {
                **common, "id": event_id, "event_type": "alert.raised", "occurred_at": stamp,
                "data": {"alert": {"index": index}}})
            gov.store.put("deliveries", {
                **common, "id": delivery_id, "destination_id": attempt_id,
                "event_id": event_id, "event_type": "alert.raised", "status": "delivered",
                "next_attempt_at": stamp})
            gov.store.put("delivery_attempts", {
                **common, "id": attempt_id, "delivery_id": delivery_id,
                "destination_id": attempt_id, "attempted_at": stamp})
    batches: list[float] = []
    after = None
    purged = 0
    began = time.perf_counter()
    while True:
        start = time.perf_counter()
        done = purge_batch(gov.store, gov.clock(), Retention(), after=after, batch=100)
        batches.append((time.perf_counter() - start) * 1000)
        purged += done.events
        after = done.last_id
        if done.looked_at < 100:
            break
    elapsed = time.perf_counter() - began
    left = gov.store.count("notification_events")
    gov.close()
    longest = max(batches)
    return {"events": args.purge_events, "purged": purged, "left": left,
            "events_a_second": round(purged / elapsed), "batch_ms_median":
            round(statistics.median(batches), 1), "batch_ms_max": round(longest, 1),
            "ratio_to_100_ms": round(longest / 100, 2)}


def main() -> None:
    """Run the scenarios (``--only`` some of them) and print their figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=200)
    parser.add_argument("--outage", type=float, default=30.0)
    parser.add_argument("--base", type=float, default=0.25, help="first retry wait, seconds")
    parser.add_argument("--cap", type=float, default=4.0, help="longest retry wait, seconds")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--hang-events", type=int, default=50)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--purge-events", type=int, default=20_000)
    parser.add_argument("--only", default="outage,kill,hang,changes,purge",
                        help="the scenarios to run, comma-separated")
    args = parser.parse_args()
    chosen = set(args.only.split(","))
    with tempfile.TemporaryDirectory() as folder:
        if {"outage", "kill"} <= chosen:
            recovered = outage(args, Path(folder))
            print("outage then recovery:", json.dumps(recovered))
            killed = kill_rounds(args, Path(folder))
            print("kill -9 rounds:", json.dumps(killed))
            print(f"goal: every event, in order, one body per id: "
                  f"{recovered['all_arrived'] and recovered['in_order'] and killed['in_order']};"
                  f" lost under kill -9: {killed['lost']} (goal 0); p99 after recovery "
                  f"{recovered['p99_ms_after_recovery']} ms with retries capped at {args.cap} s")
        if "hang" in chosen:
            alone = hanging(args, Path(folder), with_hang=False)
            beside = hanging(args, Path(folder), with_hang=True)
            print(f"healthy destination p99: {alone:.1f} ms alone, {beside:.1f} ms beside a "
                  f"hanging one; ratio {beside / alone:.2f} (goal: about 1, far below the "
                  "500 ms read timeout)")
        if "changes" in chosen:
            looked = changes(args, Path(folder))
            print("changes:", json.dumps(looked))
            print(f"a look for changed runs: {looked['look_ms_median']} ms against "
                  f"{looked['evaluate_every_monitor_ms']} ms evaluating every monitor; ratio "
                  f"{looked['ratio']} (goal: under 0.1)")
        if "purge" in chosen:
            purged = purge(args, Path(folder))
            print("purge:", json.dumps(purged))
            print(f"purge: {purged['events_a_second']} events a second; longest batch "
                  f"{purged['batch_ms_max']} ms, ratio {purged['ratio_to_100_ms']} to the "
                  "goal of 100 ms")


if __name__ == "__main__":
    main()
