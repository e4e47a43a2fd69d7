"""The helpers governance_core.testing offers to embedders' tests."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs

from governance_core.storage import SQLiteStore
from governance_core.testing import FixedClock, make_governance


def test_make_governance_is_deterministic_and_usable() -> None:
    first, boot = make_governance()
    second, again = make_governance()
    assert attrs.evolve(boot, token="") == attrs.evolve(again, token="")
    assert second.session(again.token).account_id == again.account_id
    assert first.session(boot.token).account_id == boot.account_id
    assert make_governance(seed=1)[1].account_id != boot.account_id


def test_make_governance_uses_the_given_store_and_clock() -> None:
    store = SQLiteStore(":memory:")
    clock = FixedClock(datetime(2030, 5, 1, tzinfo=UTC))
    governance, boot = make_governance(store, clock=clock)
    assert governance.store is store
    assert store.get("accounts", boot.account_id) is not None
    details = governance.session(boot.token).details("accounts/show", account_id=boot.account_id)
    assert details["inserted_at"].startswith("2030-05-01")
