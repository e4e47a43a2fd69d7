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
