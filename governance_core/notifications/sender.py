"""The background sender: empties the outbox, one destination's deliveries in order.

One sender works a database at a time: it holds a lease (a record of ``sender_leases``) that it
renews on every pass, and another takes over once a holder stops renewing it (a process killed
with ``kill -9`` included). Every state change of a delivery is committed after its request
is answered, so a sender killed mid-request leaves the delivery pending and it is sent again
under the same ``webhook-id`` with the same body: at least once, never another event under
that id.

Each pass picks the destinations that have a delivery due and drains each on its own thread
(at most ``parallel`` at once), oldest first: a failure schedules the next attempt with
exponential backoff and jitter and stops that destination until then, so a destination gets
its events in order, and one that hangs (up to its timeouts) delays no other. After the last
attempt a delivery is dead (the dead letter) and the next one goes.

A pass also evaluates monitors: those whose runs changed since the last look
(:mod:`~governance_core.notifications.changes`), and those due on their schedule; and it purges
one batch of what is past retention (:mod:`~governance_core.notifications.retention`).
"""

from __future__ import annotations

import concurrent.futures
import logging
import os
import random
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

import attrs

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.context import Principal
from governance_core.converter import from_record, to_record
from governance_core.errors import GovernanceError, NotFound, TemporarilyUnavailable
from governance_core.ids import extract_partition
from governance_core.models.notifications import DeliveryAttempt, Monitor
from governance_core.notifications.addresses import (
    IPNetwork,
    UnsafeDestination,
    check_url,
    parse_networks,
)
from governance_core.notifications.changes import ChangeWatch
from governance_core.notifications.outbox import message_body
from governance_core.notifications.retention import Retention, environment_number, purge_batch
from governance_core.notifications.secrets import active_secrets
from governance_core.notifications.transport import (
    Resolver,
    SendFailed,
    Sent,
    Timeouts,
    post,
    system_resolver,
)
from governance_core.repository import Filter, SortKey

if TYPE_CHECKING:
    from governance_core.service import Governance

__all__ = [
    "CHANGE_VARIABLE",
    "LEASE_ID",
    "MISSING_EXTRA",
    "NETWORKS_VARIABLE",
    "RetryPolicy",
    "Running",
    "Sender",
    "SenderSettings",
    "SenderUnavailable",
    "signer_available",
    "start_in_thread",
]

LOG = logging.getLogger("governance_core.notifications")
LEASE_ID = "sender"
"""The id of the one lease record."""
MISSING_EXTRA = (
    "webhook delivery is off: it needs the standardwebhooks package "
    "(pip install 'agent-runs-governance[notifications]')"
)
NETWORKS_VARIABLE = "GOVERNANCE_WEBHOOK_ALLOWED_NETWORKS"
"""Networks webhooks may reach although not public (comma-separated)."""
CHANGE_VARIABLE = "GOVERNANCE_MONITOR_CHANGE_SECONDS"
"""Sets :attr:`SenderSettings.change_seconds`, at most a day (0: monitors on schedule only)."""
_ERROR_MAX = 500


class SenderUnavailable(RuntimeError):
    """The sender cannot run here (its signing library is not installed)."""


def signer_available() -> bool:
    """Whether ``standardwebhooks`` can be imported."""
    try:
        import standardwebhooks  # noqa: F401
    except ImportError:
        return False
    return True


@attrs.frozen
class RetryPolicy:
    """How often and when a failed delivery is tried again.

    Attempt ``n`` failing waits ``base * 2**(n-1)`` seconds (at most ``cap``), of which a
    random half is jitter, so receivers recovering from an outage are not hit by every
    sender at once. After ``max_attempts`` attempts in a round the delivery is dead.
    """

    max_attempts: int = 10
    base_seconds: float = 5.0
    cap_seconds: float = 3600.0

    def delay(self, attempt: int, draw: Callable[[], float] = random.random) -> timedelta:
        """The wait after failed attempt number ``attempt`` (1-based); ``draw`` in [0, 1)."""
        ceiling = min(self.cap_seconds, self.base_seconds * 2 ** (attempt - 1))
        return timedelta(seconds=ceiling / 2 + draw() * ceiling / 2)


@attrs.frozen
class SenderSettings:
    """How the sender works; every field has a working default.

    ``allowed_networks`` lets webhooks reach networks that are not public (tests allow
    127.0.0.1 only). ``poll_seconds`` is the pause between passes, ``lease_seconds`` how
    long a silent holder keeps the lease, ``parallel`` how many destinations are drained at
    once, ``batch`` how many deliveries of a destination one drain reads at most.

    ``monitor_seconds`` is how often due monitors are looked for (0: never);
    ``change_seconds`` how often the sender looks for runs that changed, to evaluate the
    monitors covering them at once (0: on schedule only). ``retention`` says what is purged
    when, ``purge_seconds`` how often a purge starts and ``purge_batch`` how many events one
    purge transaction looks at; a full batch is followed by the next on the next pass.
    """

    retry: RetryPolicy = attrs.field(factory=RetryPolicy)
    timeouts: Timeouts = attrs.field(factory=Timeouts)
    allowed_networks: tuple[IPNetwork, ...] = ()
    poll_seconds: float = 1.0
    lease_seconds: float = 30.0
    parallel: int = 8
    batch: int = 100
    monitor_seconds: float = 15.0
    change_seconds: float = 5.0
    retention: Retention = attrs.field(factory=Retention)
    purge_seconds: float = 60.0
    purge_batch: int = 100
    resolver: Resolver = system_resolver
    tls: ssl.SSLContext | None = None

    @classmethod
    def from_environment(cls, environ: Mapping[str, str] | None = None) -> SenderSettings:
        """Settings from the environment; a bad value is a ``ValueError`` naming its variable.

        ``GOVERNANCE_WEBHOOK_ALLOWED_NETWORKS`` (comma-separated networks),
        ``GOVERNANCE_MONITOR_CHANGE_SECONDS`` (default 5), and the retention's
        ``GOVERNANCE_NOTIFICATION_RETENTION_DAYS`` and
        ``GOVERNANCE_NOTIFICATION_DEAD_RETENTION_DAYS`` (:meth:`Retention.from_environment`).
        """
        source = os.environ if environ is None else environ
        try:
            allowed = parse_networks(source.get(NETWORKS_VARIABLE))
        except ValueError as error:
            raise ValueError(f"{NETWORKS_VARIABLE}: {error}") from None
        return cls(
            allowed_networks=allowed,
            change_seconds=_seconds(source, CHANGE_VARIABLE, 5.0, maximum=86400.0),
            retention=Retention.from_environment(source),
        )


def _seconds(
    environ: Mapping[str, str], name: str, default: float, *, maximum: float,
) -> float:
    """Seconds from 0 to ``maximum`` from ``environ[name]`` (``default`` when unset)."""
    value = environment_number(environ, name, "seconds", above_zero=False, maximum=maximum)
    return default if value is None else value


class Sender:
    """Delivers the outbox of one :class:`~governance_core.service.Governance`'s store.

    ``run_once()`` makes one pass and waits for it (tests, ``governance deliver --once``);
    ``run(stop)`` makes passes until ``stop`` is set, renewing its lease on each.
    """

    def __init__(
        self,
        governance: Governance,
        settings: SenderSettings | None = None,
        *,
        holder: str | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        if not signer_available():
            raise SenderUnavailable(MISSING_EXTRA)
        self.governance = governance
        self.store = governance.store
        self.tables = governance.tables
        self.settings = settings or SenderSettings()
        self.holder = holder or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._draw = draw
        self._busy: set[str] = set()
        self._busy_lock = threading.Lock()
        self._pool = concurrent.futures.ThreadPoolExecutor(
            max_workers=self.settings.parallel, thread_name_prefix="webhook-sender"
        )
        self._next_monitors: datetime | None = None
        self._next_changes: datetime | None = None
        self._changes = ChangeWatch(self.store)
        self._next_purge: datetime | None = None
        self._purge_after: str | None = None
        self._stopping = threading.Event()
        self._held_until: datetime | None = None

    def _now(self) -> datetime:
        return self.governance.clock()

    # -- the lease -----------------------------------------------------------------------
    def acquire(self) -> bool:
        """Take or renew the lease; whether this sender holds it now."""
        try:
            with self.store.transaction():
                now = self._now()
                lease = self.tables.sender_leases.get(LEASE_ID)
                if (
                    lease is not None
                    and lease.get("holder") != self.holder
                    and parse_timestamp(lease["expires_at"]) > now
                ):
                    self._held_until = None
                    return False
                held_until = now + timedelta(seconds=self.settings.lease_seconds)
                self.tables.sender_leases.put({
                    "id": LEASE_ID, "account_id": None, "holder": self.holder,
                    "inserted_at": format_timestamp(now),
                    "expires_at": format_timestamp(held_until),
                })
            self._held_until = held_until
            return True
        except TemporarilyUnavailable:
            # Not renewed: what was taken before still holds until it expires.
            return False

    def holds_lease(self, now: datetime) -> bool:
        """Whether the lease this sender last took or renewed has not expired by ``now``.

        A drain sends nothing once it has lapsed: another sender may have taken over, and two
        sending to one destination would break its order.
        """
        return self._held_until is not None and now < self._held_until

    def release(self) -> None:
        """Give the lease up at once, when this sender holds it."""
        try:
            with self.store.transaction():
                lease = self.tables.sender_leases.get(LEASE_ID)
                if lease is not None and lease.get("holder") == self.holder:
                    self.tables.sender_leases.delete(LEASE_ID)
            self._held_until = None
        except Exception:  # the store may be gone at shutdown: the lease lapses on its own
            LOG.warning("could not release the sender lease; it expires on its own")

    # -- passes --------------------------------------------------------------------------
    def run_once(self) -> int:
        """One pass, waited for: the deliveries attempted (0 when another holds the lease)."""
        if not self.acquire():
            return 0
        self._monitors()
        futures = [future for _, future in self._dispatch()]
        self._purge()
        return sum(future.result() for future in futures)

    def run(self, stop: threading.Event) -> None:
        """Make passes until ``stop`` is set, then wait for drains under way and release."""
        self._stopping = stop
        try:
            while not stop.is_set():
                try:
                    if self.acquire():
                        self._monitors()
                        self._dispatch()
                        self._purge()
                except Exception:  # a pass that fails is logged; the next pass tries again
                    LOG.exception("webhook sender pass failed")
                stop.wait(self.settings.poll_seconds)
        finally:
            self._pool.shutdown(wait=True)
            self.release()

    def close(self) -> None:
        """Wait for drains under way, stop the threads and give the lease up."""
        self._pool.shutdown(wait=True)
        self.release()

    def _dispatch(self) -> list[tuple[str, concurrent.futures.Future[int]]]:
        """Start a drain for every destination with a delivery due that is not being drained."""
        now = format_timestamp(self._now())
        due = self.tables.deliveries.query(
            [Filter("status", "eq", "pending"), Filter("next_attempt_at", "le", now)],
            sort=[SortKey("next_attempt_at")], limit=1000,
        )
        started = []
        for destination_id in dict.fromkeys(record["destination_id"] for record in due):
            with self._busy_lock:
                if destination_id in self._busy:
                    continue
                self._busy.add(destination_id)
            started.append((destination_id, self._pool.submit(self._drain, destination_id)))
        return started

    # -- one destination -----------------------------------------------------------------
    def _drain(self, destination_id: str) -> int:
        """Send the destination's due deliveries in order; the number attempted."""
        try:
            return self._drain_in_order(destination_id)
        except Exception:
            LOG.exception("draining destination %s failed", destination_id)
            return 0
        finally:
            with self._busy_lock:
                self._busy.discard(destination_id)

    def _drain_in_order(self, destination_id: str) -> int:
        pending = self.tables.deliveries.query(
            [Filter("destination_id", "eq", destination_id), Filter("status", "eq", "pending")],
            sort=[SortKey("id")], limit=self.settings.batch,
        )
        destination = self.tables.destinations.get(destination_id)
        if destination is None:
            for delivery in pending:
                self._finish(delivery, None, "the destination was deleted", dead=True)
            return 0
        if destination.get("status") != "active":
            return 0
        attempted = 0
        for delivery in pending:
            now = self._now()
            if (
                self._stopping.is_set() or not self.holds_lease(now)
                or parse_timestamp(delivery["next_attempt_at"]) > now
            ):
                break
            event = self.tables.notification_events.get(delivery["event_id"])
            if event is None or event.get("account_id") != destination["account_id"] or (
                delivery["account_id"] != destination["account_id"]
            ):
                # Never sent: an event of another account must not reach this endpoint.
                self._finish(delivery, None, "the event does not belong to the account",
                             dead=True)
                continue
            attempted += 1
            if not self._attempt(destination, delivery, event):
                break
        return attempted

    def _attempt(self, destination: dict[str, Any], delivery: dict[str, Any],
                 event: dict[str, Any]) -> bool:
        """Send one delivery and record the attempt; whether it was delivered or is dead."""
        from standardwebhooks.webhooks import Webhook

        now = self._now()
        body = message_body(event, destination.get("body_format") or "standard")
        text = body.decode()
        signatures = " ".join(
            Webhook(secret).sign(event["id"], now, text)
            for secret in active_secrets(
                destination.get("secrets") or [], self.governance.config.cipher, now
            )
        )
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "agent-runs-governance-webhooks/1",
            "webhook-id": event["id"],
            "webhook-timestamp": str(int(now.timestamp())),
            "webhook-signature": signatures,
        }
        allowed = self.settings.allowed_networks
        sent: Sent | None = None
        error: str | None = None
        latency = 0.0
        try:
            target = check_url(destination["url"], allowed)
            sent = post(target, body, headers, allowed=allowed, timeouts=self.settings.timeouts,
                         resolver=self.settings.resolver, tls=self.settings.tls)
            latency = sent.latency_ms
            if not 200 <= sent.status < 300:
                error = f"answered {sent.status}"
                if 300 <= sent.status < 400:
                    error += " (redirects are not followed)"
        except UnsafeDestination as refused:
            error = str(refused)
        except SendFailed as failed:
            error, latency = str(failed), failed.latency_ms
        return self._finish(delivery, sent, error, latency_ms=latency, attempted_at=now)

    def _finish(
        self,
        delivery: dict[str, Any],
        sent: Sent | None,
        error: str | None,
        *,
        dead: bool = False,
        latency_ms: float = 0.0,
        attempted_at: datetime | None = None,
    ) -> bool:
        """Record an attempt's outcome in one transaction; whether the destination may go on."""
        now = self._now()
        with self.store.transaction():
            current = self.tables.deliveries.get(delivery["id"])
            if current is None:
                return True
            changes: dict[str, Any] = {"updated_at": format_timestamp(now)}
            if attempted_at is not None:
                attempts = int(current.get("attempt_count") or 0) + 1
                round_attempts = int(current.get("round_attempts") or 0) + 1
                changes.update(
                    attempt_count=attempts, round_attempts=round_attempts,
                    last_attempt_at=format_timestamp(attempted_at), latency_ms=latency_ms,
                    last_status_code=sent.status if sent else None,
                    last_error=error[:_ERROR_MAX] if error else None,
                )
                attempt = DeliveryAttempt(
                    id=self.governance.ids.new(extract_partition(current["id"]), now),
                    account_id=current["account_id"], delivery_id=current["id"],
                    destination_id=current["destination_id"], attempted_at=attempted_at,
                    inserted_at=now, succeeded=error is None, latency_ms=latency_ms,
                    status_code=sent.status if sent else None,
                    error=error[:_ERROR_MAX] if error else None,
                    response_prefix=sent.body_prefix if sent else None,
                )
                self.tables.delivery_attempts.put(to_record(attempt))
                if error is not None and round_attempts >= self.settings.retry.max_attempts:
                    dead = True
            else:
                changes["last_error"] = error
            if error is None:
                changes.update(status="delivered", delivered_at=format_timestamp(now))
            elif dead:
                changes["status"] = "dead"
            else:
                wait = self.settings.retry.delay(changes["round_attempts"], self._draw)
                changes["next_attempt_at"] = format_timestamp(now + wait)
            self.tables.deliveries.put({**current, **changes})
        if error is not None and dead:
            LOG.warning("delivery %s is dead: %s", delivery["id"], error)
        return error is None or dead

    # -- monitors ------------------------------------------------------------------------
    def _monitors(self) -> None:
        """Evaluate the monitors touched by a change, then those due on their schedule."""
        now = self._now()
        self._changed_monitors(now)
        self._due_monitors(now)

    def _changed_monitors(self, now: datetime) -> None:
        """Evaluate the active monitors whose runs changed since the last look, when it is time."""
        every = self.settings.change_seconds
        if every <= 0 or (self._next_changes is not None and now < self._next_changes):
            return
        self._next_changes = now + timedelta(seconds=every)
        active = [
            from_record(Monitor, record)
            for record in self.tables.monitors.iterate([Filter("status", "eq", "active")])
        ]
        for monitor in self._changes.look(active, now):
            self._evaluate(monitor.account_id, {"monitor_id": monitor.id})

    def _due_monitors(self, now: datetime) -> None:
        """Evaluate the monitors that are due, account by account, when it is time to look."""
        every = self.settings.monitor_seconds
        if every <= 0 or (self._next_monitors is not None and now < self._next_monitors):
            return
        self._next_monitors = now + timedelta(seconds=every)
        due = self.tables.monitors.query(
            [Filter("status", "eq", "active"),
             Filter("next_evaluation_at", "le", format_timestamp(now))],
            limit=1000,
        )
        for account_id in dict.fromkeys(record["account_id"] for record in due):
            self._evaluate(account_id, {})

    def _evaluate(self, account_id: str, params: dict[str, Any]) -> None:
        """``monitors/evaluate`` in the account; a monitor deleted meanwhile is passed over."""
        account = self.tables.accounts.get(account_id)
        if account is None:
            return
        try:
            self.governance.call(
                "monitors/evaluate", params,
                principal=Principal(account_id, account["partition"]),
            )
        except NotFound:
            return
        except GovernanceError:
            LOG.exception("evaluating the monitors of account %s failed", account_id)

    # -- retention -----------------------------------------------------------------------
    def _purge(self) -> None:
        """Purge one batch of what is past retention, when a purge is due or under way."""
        now = self._now()
        if self._next_purge is not None and now < self._next_purge:
            return
        try:
            purged = purge_batch(self.store, now, self.settings.retention,
                                 after=self._purge_after, batch=self.settings.purge_batch)
        except TemporarilyUnavailable:
            return  # a busy database: the same batch again on the next pass
        if purged.events or purged.deliveries:
            LOG.info("purged %d events, %d deliveries and %d attempts past retention",
                     purged.events, purged.deliveries, purged.attempts)
        if purged.looked_at < self.settings.purge_batch:
            self._purge_after = None
            self._next_purge = now + timedelta(seconds=self.settings.purge_seconds)
        else:
            self._purge_after = purged.last_id


@attrs.define
class Running:
    """A sender running on a daemon thread of its own."""

    thread: threading.Thread
    stopping: threading.Event

    def stop(self, timeout: float | None = None) -> None:
        """Ask it to stop, and wait (up to ``timeout`` seconds) for it to end."""
        self.stopping.set()
        self.thread.join(timeout)


def start_in_thread(sender: Sender) -> Running:
    """Run ``sender`` on a daemon thread; :meth:`Running.stop` ends it."""
    stopping = threading.Event()
    thread = threading.Thread(
        target=sender.run, args=(stopping,), name="webhook-sender", daemon=True
    )
    thread.start()
    return Running(thread, stopping)
