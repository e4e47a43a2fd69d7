"""A write that collides with a concurrent one is re-run a bounded number of times."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Principal
from governance_core.errors import WriteConflict
from governance_core.ids import SeededIds
from governance_core.service import WRITE_ATTEMPTS, Governance
from governance_core.storage import MemoryStore


class CollidingStore(MemoryStore):
    """Rolls back the outermost transactions numbered in ``collide`` with WriteConflict."""

    def __init__(self) -> None:
        super().__init__()
        self.collide: set[int] = set()
        self.started = 0
        self.depth = 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with super().transaction():
            self.depth += 1
            if self.depth == 1:
                self.started += 1
            try:
                yield
                if self.depth == 1 and self.started in self.collide:
                    raise WriteConflict()
            finally:
                self.depth -= 1


@pytest.fixture
def store() -> CollidingStore:
    return CollidingStore()


@pytest.fixture
def admin(store: CollidingStore) -> tuple[Governance, Principal]:
    gov = Governance(store, clock=FixedClock(), ids=SeededIds(3))
    return gov, gov.as_account(gov.bootstrap().account_id).principal


def _create_team(admin: tuple[Governance, Principal], name: str) -> dict[str, Any]:
    gov, principal = admin
    return gov.call("teams/create", {"details": {"name": name}}, principal=principal)


def test_a_conflicting_write_is_run_again_and_kept_once(
    admin: tuple[Governance, Principal], store: CollidingStore
) -> None:
    store.collide = {store.started + n for n in range(1, WRITE_ATTEMPTS)}
    made = _create_team(admin, "Platform")
    assert store.started - min(store.collide) == WRITE_ATTEMPTS - 1
    assert [t["id"] for t in store.query("teams")] == [made["details"]["id"]]


def test_a_write_that_keeps_conflicting_surfaces_as_temporarily_unavailable(
    admin: tuple[Governance, Principal], store: CollidingStore
) -> None:
    store.collide = {store.started + n for n in range(1, WRITE_ATTEMPTS + 1)}
    with pytest.raises(WriteConflict) as raised:
        _create_team(admin, "Platform")
    assert raised.value.to_payload()["code"] == "temporarily_unavailable"
    assert raised.value.to_payload()["retry_after_ms"] > 0
    assert store.started == max(store.collide)
    assert store.query("teams") == []


class CollidingOnceStore(CollidingStore):
    """Rolls back, once, the outermost transaction that writes a team named ``two``."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.collisions = 0

    def write_prepared(self, table: str, prepared: Sequence[tuple[str, str]]) -> None:
        # Every write ends here (a put, and the core's writes as a transaction commits).
        super().write_prepared(table, prepared)
        if table == "teams" and any('"name":"two"' in text for _, text in prepared):
            self.armed = self.armed or not self.collisions

    @contextmanager
    def transaction(self) -> Iterator[None]:
        with super().transaction():
            yield
            if self.depth == 1 and self.armed:
                self.armed = False
                self.collisions += 1
                raise WriteConflict()


def test_a_bulk_request_is_run_again_whole_and_its_done_items_replayed() -> None:
    store = CollidingOnceStore()
    gov = Governance(store, clock=FixedClock(), ids=SeededIds(3))
    principal = gov.as_account(gov.bootstrap().account_id).principal
    items = [
        {"_type": "teams/create", "idempotency_key": f"bulk-item-{n}", "details": {"name": n}}
        for n in ("one", "two", "three")
    ]
    out = gov.call("bulk", {"items": items}, principal=principal)
    assert store.collisions == 1
    assert [o["status"] for o in out["outputs"].values()] == ["success"] * 3
    assert sorted(t["name"] for t in store.query("teams")) == ["one", "three", "two"]


class ConflictingPutStore(MemoryStore):
    """Raises WriteConflict on the first team written, as a database would mid-transaction."""

    def __init__(self) -> None:
        super().__init__()
        self.team_puts = 0

    def write_prepared(self, table: str, prepared: Sequence[tuple[str, str]]) -> None:
        # Every write ends here (a put, and the core's writes as a transaction commits).
        if table == "teams":
            self.team_puts += len(prepared)
            if self.team_puts == 1:
                raise WriteConflict()
        super().write_prepared(table, prepared)


def test_a_call_inside_a_governance_transaction_is_not_run_again_alone() -> None:
    store = ConflictingPutStore()
    gov = Governance(store, clock=FixedClock(), ids=SeededIds(3))
    principal = gov.as_account(gov.bootstrap().account_id).principal
    with pytest.raises(WriteConflict), gov.transaction():
        gov.call("teams/create", {"details": {"name": "Platform"}}, principal=principal)
    assert store.team_puts == 1
    assert store.query("teams") == []
    # Outside such a block the same conflict is run again, and the write is kept once.
    gov.call("teams/create", {"details": {"name": "Platform"}}, principal=principal)
    assert len(store.query("teams")) == 1


class CollidingStoreWithTurns(CollidingStore):
    """A colliding store whose writers run side by side: it notes which runs went alone."""

    def __init__(self) -> None:
        super().__init__()
        self.ran_alone: list[int] = []
        self._opening_alone = False

    @contextmanager
    def turn(self, name: str) -> Iterator[None]:
        yield

    @contextmanager
    def alone(self) -> Iterator[None]:
        self._opening_alone = True
        try:
            yield
        finally:
            self._opening_alone = False

    @contextmanager
    def transaction(self) -> Iterator[None]:
        if self.depth == 0 and self._opening_alone:
            self.ran_alone.append(self.started + 1)
        with super().transaction():
            yield


def test_a_collided_write_runs_again_alone_and_while_most_collide_the_first_run_too() -> None:
    store = CollidingStoreWithTurns()
    gov = Governance(store, clock=FixedClock(), ids=SeededIds(3))
    admin = gov, gov.as_account(gov.bootstrap().account_id).principal
    _create_team(admin, "quiet")
    assert store.ran_alone == [], "nothing collided: every write runs side by side"
    first = store.started + 1
    store.collide = {first, first + 2}
    _create_team(admin, "one")
    assert store.ran_alone == [first + 1], "the re-run of the collided write went alone"
    _create_team(admin, "two")
    assert store.ran_alone == [first + 1, first + 3]
    # Two of the last three first runs collided: the next write runs alone from its first run.
    _create_team(admin, "three")
    assert store.ran_alone == [first + 1, first + 3, first + 4]
    assert sorted(t["name"] for t in store.query("teams")) == ["one", "quiet", "three", "two"]
