"""How often a process's writes collided lately, and whether its next write runs alone.

Where writers run side by side (PostgreSQL), a write that collides is rolled back and run again
alone (:meth:`~governance_core.storage.protocol.TakesTurns.alone`). When most writes collide,
running them side by side first only wastes a transaction each: measured with eight clients
writing spans to runs of their own, the server took 40% to 80% more spans a second with every
write alone than with collided writes alone. When few collide, side by side is what lets
several processes write at once. :class:`Contention` tells the two apart: it keeps the share of
first runs side by side that collided, weighted towards the latest, and halves it every
:data:`HALF_LIFE_S` seconds; while it is above :data:`CONTENDED`, first runs go alone too. Those
tell nothing of collisions, so the share only fades until writes go side by side again and
measure anew.
"""

from __future__ import annotations

import threading

__all__ = ["CONTENDED", "HALF_LIFE_S", "LATEST_WEIGHT", "Contention"]

CONTENDED = 0.3
"""The share of first runs side by side that collided above which writes run alone."""
LATEST_WEIGHT = 0.25
"""The weight of the latest outcome in the share (the rest is the share before it)."""
HALF_LIFE_S = 1.0
"""Seconds in which the share halves without a new outcome."""


class Contention:
    """The recent share of one process's writes, run side by side, that collided.

    Safe to share between threads; times are ``time.monotonic()`` seconds.
    """

    def __init__(self) -> None:
        self._share = 0.0
        self._at = 0.0
        self._lock = threading.Lock()

    def share(self, now: float) -> float:
        """The share as it stands at ``now``: faded since the last outcome."""
        elapsed = max(0.0, now - self._at)
        faded: float = self._share * 0.5 ** (elapsed / HALF_LIFE_S)
        return faded

    def runs_alone(self, now: float) -> bool:
        """Whether a write starting at ``now`` runs alone from its first run."""
        return self.share(now) > CONTENDED

    def record(self, collided: bool, now: float) -> None:
        """Count the outcome of a first run side by side that ended at ``now``."""
        with self._lock:
            self._share = self.share(now) * (1 - LATEST_WEIGHT) + LATEST_WEIGHT * collided
            self._at = max(self._at, now)
