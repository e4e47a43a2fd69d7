"""Idempotency records kept compactly, replayed as first answered, and purged past their window."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.idempotency import (
    KEEP_FOR,
    pack_response,
    purge_expired_keys,
    record_id,
    unpack_response,
)
from governance_core.service import Bootstrap, Governance
from tests.core.span_world import SpanWorld, span_world

TABLE = "idempotency_keys"
CREATE = "agent_spans/create"


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def create(world: SpanWorld, key: str, **members: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.call(CREATE, {
        "agent_instance_id": world.instance_id, "schema_name": "llm", "status": "active",
        "payload": {"prompt": "hello"}, "idempotency_key": key, **members,
    })
    return result


def stored(world: SpanWorld, key: str, operation: str = CREATE) -> dict[str, Any] | None:
    account = world.caller.principal.account_id
    return world.gov.store.get(TABLE, record_id(account, operation, key))


def clock(world: SpanWorld) -> FixedClock:
    assert isinstance(world.gov.clock, FixedClock)
    return world.gov.clock


def test_a_span_create_is_kept_packed_and_replays_as_first_answered(world: SpanWorld) -> None:
    first = create(world, "span-key-0001")
    record = stored(world, "span-key-0001")
    assert record is not None and "response" not in record
    plain = json.dumps(first, separators=(",", ":"))
    assert len(record["z1"]) < len(plain) / 2
    # The span finishes: its view changes, the create's replay does not.
    world.caller.call("agent_spans/finish", {"agent_span_id": first["details"]["id"]})
    assert world.caller.call("agent_spans/show", {
        "agent_span_id": first["details"]["id"]})["details"]["status"] == "complete"
    again = create(world, "span-key-0001")
    assert json.dumps(again) == json.dumps(first)


def test_a_record_kept_whole_before_packing_still_replays(world: SpanWorld) -> None:
    first = create(world, "span-key-0002")
    record = stored(world, "span-key-0002")
    assert record is not None
    record.pop("z1")
    world.gov.store.put(TABLE, {**record, "response": first})
    assert json.dumps(create(world, "span-key-0002")) == json.dumps(first)


def test_packing_keeps_every_value_and_leaves_small_responses_whole() -> None:
    small = {"n": 1}
    assert pack_response(small) == {"response": small}
    response = {"status": "success", "details": {
        "text": "Ünïcødé ☃ 😀 \"q\" \\ \n \x00", "big": 2**62, "float": 0.1, "tiny": 5e-324,
        "nested": [None, True, {"": []}], "id": "01" * 16, **{f"k{n}": n for n in range(40)},
    }}
    packed = pack_response(response)
    assert set(packed) == {"z1"}
    assert unpack_response(packed) == response
    assert json.dumps(unpack_response(packed)) == json.dumps(response)


def test_records_past_the_window_are_purged_in_batches(world: SpanWorld) -> None:
    old = [create(world, f"old-key-{n:04d}") for n in range(5)]
    clock(world).advance(KEEP_FOR + timedelta(seconds=1))
    create(world, "new-key-0001")
    store = world.gov.store
    now = world.gov.clock()
    assert purge_expired_keys(store, now, batch=2) == 5
    assert all(stored(world, f"old-key-{n:04d}") is None for n in range(5))
    assert stored(world, "new-key-0001") is not None
    assert purge_expired_keys(store, now) == 0
    # A purged key is free again: the request runs again (the span's id is taken since).
    with pytest.raises(Exception, match="already in use"):
        create(world, "old-key-0000", id=old[0]["details"]["id"])


def test_a_purge_keeps_at_least_the_window_of_decisions(world: SpanWorld) -> None:
    create(world, "kept-key-0001")
    clock(world).advance(KEEP_FOR - timedelta(seconds=1))
    assert purge_expired_keys(world.gov.store, world.gov.clock()) == 0
    assert stored(world, "kept-key-0001") is not None
    with pytest.raises(ValueError, match="keep_for"):
        purge_expired_keys(world.gov.store, world.gov.clock(), timedelta(hours=23))
    for batch in (0, -1, True, 1.5):
        with pytest.raises(ValueError, match="batch"):
            purge_expired_keys(world.gov.store, world.gov.clock(), batch=batch)  # type: ignore[arg-type]
