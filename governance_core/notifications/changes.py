"""What changed since the sender last looked, so that the monitors it touches are evaluated now.

Nothing is written for this on the span and run write path: each look reads what the store
keeps already, from indexes it has already.

- ``runs``: per account, one grouped read of the runs' per-day index (the trends page's: it
  holds every field read, so no run is read) over the days of the account's longest monitor
  window: the runs and the sums of their cost, quality score and duration per day, agent,
  environment, status and risk level. A group whose figures differ from the previous look's
  had a run start, finish, fail, move its cost, score or risk.
- ``tokens``: the same over the per-model usage index (``run_models``), for accounts with a
  ``tokens`` monitor.
- ``decisions``: the policy denials decided since the previous look; ``alerts``: the alert
  events of the outbox (a critical alert raised, any alert updated) since then. Each is read
  from a margin earlier (:data:`LATE_COMMIT_MARGIN`), for a transaction that committed after
  the look though its time is before it, and counted once.

A look answers (agent, environment) pairs per source, and a monitor is touched when a source
its metric reads changed within its scope. The first look at a source learns its state only
(there is nothing to compare it with); what it misses (a change made before, a change that
leaves every figure as it was, a row stamped earlier than the margin) the schedule catches.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import attrs

from governance_core.clock import format_timestamp
from governance_core.models.notifications import Monitor
from governance_core.repository import Filter, Record, SortKey, Tables, tenant_filter
from governance_core.storage.protocol import GroupBy, Store

__all__ = [
    "EVERY_PAIR",
    "LATE_COMMIT_MARGIN",
    "ROWS_PER_LOOK",
    "ChangeWatch",
    "Pair",
    "sources_of",
    "touches",
]

Pair = tuple[str | None, str | None]
"""An agent id and an environment id; :data:`EVERY_PAIR` stands for every pair."""
EVERY_PAIR: Pair = (None, None)
"""What a source answers when it cannot tell which pairs changed (too many rows to read)."""
LATE_COMMIT_MARGIN = timedelta(seconds=30)
"""How far before the previous look the decisions and alert events are read again."""
ROWS_PER_LOOK = 1000
"""The most decisions or alert events one look reads; past it every pair counts as changed."""

_RUN_KEYS = ("status", "risk_level")
_RUN_SUMS = ("total_cost", "quality_score", "duration_bucket")
_TOKEN_SUMS = ("input_tokens", "output_tokens")
_ALERT_EVENTS = ("alert.raised", "alert.updated")
_ALERTS_KEY = ("alerts", "*")


def sources_of(metric: str) -> tuple[str, ...]:
    """The sources whose changes may move ``metric``."""
    if metric == "critical_alerts":
        return ("alerts",)
    if metric == "policy_denials":
        return ("decisions",)
    if metric == "tokens":
        return ("runs", "tokens")
    return ("runs",)


def touches(monitor: Monitor, pairs: Iterable[Pair]) -> bool:
    """Whether a change of any of ``pairs`` falls within the monitor's scope."""
    return any(
        pair == EVERY_PAIR or (
            monitor.agent_id in (None, pair[0])
            and monitor.environment_id in (None, pair[1])
        )
        for pair in pairs
    )


@attrs.frozen
class _Figures:
    """One look at a table's per-day groups: from which day, and each group's figures."""

    since_day: str
    groups: dict[tuple[Any, ...], tuple[Any, ...]]

    def moved(self, before: _Figures) -> set[Pair]:
        """The pairs of the groups (of days both looks cover) whose figures differ."""
        floor = max(self.since_day, before.since_day)
        keys = self.groups.keys() | before.groups.keys()
        return {
            (key[1], key[2]) for key in keys
            if key[0] >= floor and self.groups.get(key) != before.groups.get(key)
        }


@attrs.frozen
class _Rows:
    """One look at the rows written since a time: when, and the ids read."""

    looked_at: datetime
    ids: frozenset[str]


class ChangeWatch:
    """Remembers what the last look saw; each :meth:`look` answers the monitors touched since.

    Not thread-safe: one sender looks from one thread.
    """

    def __init__(
        self, store: Store, *, margin: timedelta = LATE_COMMIT_MARGIN,
        rows_per_look: int = ROWS_PER_LOOK,
    ) -> None:
        self.store = store
        self.tables = Tables(store)
        self.margin = margin
        self.rows_per_look = rows_per_look
        self._figures: dict[tuple[str, str], _Figures] = {}
        self._rows: dict[tuple[str, str], _Rows] = {}

    def look(self, monitors: Sequence[Monitor], now: datetime) -> list[Monitor]:
        """The ``monitors`` (active ones, as stored) touched by a change since the last look."""
        watched: dict[tuple[str, str], list[Monitor]] = {}
        for monitor in monitors:
            for source in sources_of(monitor.metric):
                watched.setdefault((source, monitor.account_id), []).append(monitor)
        changed: dict[tuple[str, str], set[Pair]] = {}
        for (source, account_id), group in watched.items():
            if source == "decisions":
                changed[(source, account_id)] = self._denials(account_id, now)
            elif source != "alerts":
                changed[(source, account_id)] = self._groups(
                    source, account_id, _since_day(group, now)
                )
        alert_accounts = [account for source, account in watched if source == "alerts"]
        if alert_accounts:
            events = self._alert_events(now)
            for account_id in alert_accounts:
                changed[("alerts", account_id)] = (
                    {EVERY_PAIR} if events is None else events.get(account_id, set())
                )
        # A source no monitor reads any more is forgotten: watched again, it starts afresh.
        kept = set(watched) | ({_ALERTS_KEY} if alert_accounts else set())
        self._figures = {key: value for key, value in self._figures.items() if key in kept}
        self._rows = {key: value for key, value in self._rows.items() if key in kept}
        return [
            monitor for monitor in monitors
            if any(touches(monitor, changed.get((source, monitor.account_id), ()))
                   for source in sources_of(monitor.metric))
        ]

    # -- per-day groups ------------------------------------------------------------------
    def _groups(self, source: str, account_id: str, since_day: str) -> set[Pair]:
        """The pairs whose runs (``runs``) or token usage (``tokens``) moved since the last look."""
        table, keys, sums = (
            (self.tables.agent_instances, _RUN_KEYS, _RUN_SUMS) if source == "runs"
            else (self.tables.run_models, (), _TOKEN_SUMS)
        )
        rows = table.aggregate(
            [GroupBy(name) for name in ("started_day", "agent_id", "environment_id", *keys)],
            sums, [tenant_filter(account_id), Filter("started_day", "ge", since_day)],
        )
        figures = _Figures(since_day, {row.key: (row.count, row.sums) for row in rows})
        before = self._figures.get((source, account_id))
        self._figures[(source, account_id)] = figures
        return set() if before is None else figures.moved(before)

    # -- rows since the last look --------------------------------------------------------
    def _since(self, key: tuple[str, str], now: datetime) -> tuple[_Rows | None, str]:
        before = self._rows.get(key)
        start = (before.looked_at if before is not None else now) - self.margin
        return before, format_timestamp(start)

    def _new_rows(
        self, key: tuple[str, str], now: datetime, rows: list[Record],
        before: _Rows | None,
    ) -> tuple[list[Record], bool]:
        """The rows not read by the previous look, and whether the look read all there were."""
        self._rows[key] = _Rows(now, frozenset(row["id"] for row in rows))
        if before is None:
            return [], True
        return [row for row in rows if row["id"] not in before.ids], (
            len(rows) < self.rows_per_look
        )

    def _denials(self, account_id: str, now: datetime) -> set[Pair]:
        """The pairs of the policy denials decided since the last look."""
        key = ("decisions", account_id)
        before, since = self._since(key, now)
        rows = self.tables.decisions.query(
            [tenant_filter(account_id), Filter("decided_at", "ge", since),
             Filter("outcome", "eq", "deny")],
            sort=[SortKey("decided_at")], limit=self.rows_per_look,
        )
        new, complete = self._new_rows(key, now, rows, before)
        if not complete:
            return {EVERY_PAIR}
        return {(row.get("agent_id"), row.get("environment_id")) for row in new}

    def _alert_events(self, now: datetime) -> dict[str, set[Pair]] | None:
        """Per account, the pairs of the alerts raised critical or updated since the last look.

        None when there were more events than one look reads. One read for every account,
        from the outbox's events by time (by the alerts' own indexes the database would pick
        the account's or the severity's over the time range).
        """
        key = _ALERTS_KEY
        before, since = self._since(key, now)
        rows = self.tables.notification_events.query(
            [Filter("occurred_at", "ge", since)],
            sort=[SortKey("occurred_at")], limit=self.rows_per_look,
        )
        new, complete = self._new_rows(key, now, rows, before)
        if not complete:
            return None
        changed: dict[str, set[Pair]] = {}
        for row in new:
            alert = (row.get("data") or {}).get("alert") or {}
            if row["event_type"] not in _ALERT_EVENTS or (
                row["event_type"] == "alert.raised" and alert.get("severity") != "critical"
            ):
                continue
            changed.setdefault(row["account_id"], set()).add(
                (alert.get("agent_id"), alert.get("environment_id"))
            )
        return changed


def _since_day(monitors: Iterable[Monitor], now: datetime) -> str:
    """The first UTC day the longest window of ``monitors`` reaches back to."""
    longest = max(monitor.window_seconds for monitor in monitors)
    return format_timestamp(now - timedelta(seconds=longest))[:10]
