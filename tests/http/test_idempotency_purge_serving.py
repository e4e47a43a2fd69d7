"""The server's purge of idempotency records past their window, and its setting."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from governance_core.clock import format_timestamp
from governance_core.idempotency import KEEP_FOR
from governance_core.service import Bootstrap, Governance
from governance_http.serving import (
    IDEMPOTENCY_WINDOW_VARIABLE,
    parse_idempotency_window,
    start_idempotency_purge,
)
from tests.core.span_world import SpanWorld, span_world
from tests.core.test_idempotency_purge import clock, create, stored


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def test_the_window_variable_is_checked() -> None:
    assert parse_idempotency_window(None) == parse_idempotency_window(" ") == KEEP_FOR
    assert parse_idempotency_window("off") is None
    assert parse_idempotency_window("48") == timedelta(hours=48)
    for wrong in ("12", "abc", "inf", "nan", "-30"):
        with pytest.raises(ValueError, match=IDEMPOTENCY_WINDOW_VARIABLE):
            parse_idempotency_window(wrong)


def test_the_server_purges_periodically(
    world: SpanWorld, monkeypatch: pytest.MonkeyPatch,
) -> None:
    create(world, "swept-key-0001")
    clock(world).advance(timedelta(hours=49))
    create(world, "swept-key-0002")
    monkeypatch.setenv(IDEMPOTENCY_WINDOW_VARIABLE, "48")
    purged = threading.Event()
    original = world.gov.store.delete

    def delete(table: str, key: str) -> bool:
        deleted = original(table, key)
        purged.set()
        return deleted

    monkeypatch.setattr(world.gov.store, "delete", delete)
    stop = start_idempotency_purge(world.gov, every=0.01)
    assert stop is not None
    try:
        assert purged.wait(10)
    finally:
        stop.set()
    assert stored(world, "swept-key-0001") is None
    assert stored(world, "swept-key-0002") is not None
    assert format_timestamp(world.gov.clock()) > "2026-01-03"
    monkeypatch.setenv(IDEMPOTENCY_WINDOW_VARIABLE, "off")
    assert start_idempotency_purge(world.gov) is None
