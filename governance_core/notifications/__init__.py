"""Notifications: monitors, webhook destinations, the outbox and the sender that empties it.

- :mod:`.addresses`: which URLs and addresses a webhook may reach;
- :mod:`.outbox`: events written in the transaction of their cause, one delivery each;
- :mod:`.monitors`: metrics over windows, thresholds with hysteresis;
- :mod:`.changes`: which monitors a change of runs (decisions, alerts) touched since a look;
- :mod:`.retention`: old delivered events and dead letters purged in batches;
- :mod:`.transport`: one HTTP request, under the address rules and timeouts;
- :mod:`.sender`: the background sender (a lease in the store, retries, dead letters,
  monitors evaluated as runs change and on schedule, the retention purge).

Signing needs the ``standardwebhooks`` package (the ``notifications`` extra); everything else,
and every operation, works without it.
"""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.errors import NotFound
from governance_core.ids import is_pfid
from governance_core.repository import Record, RecordTable

__all__ = ["NOTIFICATION_KINDS", "load_own"]

NOTIFICATION_KINDS: dict[str, str] = {
    "monitors": "monitor",
    "destinations": "destination",
    "deliveries": "delivery",
    "notification_events": "notification_event",
}
"""Each notification table (and operation family) and the resource ``type`` it holds."""


def load_own(ctx: Context, table: RecordTable, record_id: Any) -> Record:
    """The caller's record of ``table``; a malformed, missing or foreign id is ``not_found``."""
    kind = NOTIFICATION_KINDS[table.name]
    if not is_pfid(record_id):
        raise NotFound(f"{kind} not found")
    record = table.get(str(record_id))
    if record is None or record.get("account_id") != ctx.account_id:
        raise NotFound(f"{kind} not found")
    return record
