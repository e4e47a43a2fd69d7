"""available_actions and the shown agent status, as properties of plain values."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from governance_core.rules.actions import (
    AGENT_ACTIONS,
    AGENT_STATUSES,
    agent_status,
    available_actions,
    stored_status,
)

COUNT_KEYS = ("pending", "active", "complete", "failed", "cancelled", "terminated")
counts = st.fixed_dictionaries({key: st.integers(0, 5) for key in COUNT_KEYS}).map(
    lambda c: {**c, "total": sum(c.values())}
)
moments = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1), timezones=st.just(UTC)
)


@given(status=st.sampled_from(AGENT_STATUSES), instance_counts=counts)
def test_available_actions_follow_decisions_7(
    status: str, instance_counts: dict[str, int]
) -> None:
    actions = available_actions(status, instance_counts)
    assert tuple(sorted(actions)) == AGENT_ACTIONS
    retired = status == "retired"
    assert actions["update"] is not retired
    assert actions["retire"] is not retired
    assert actions["reinstate"] is retired
    assert actions["delete"] is (instance_counts["total"] == 0)


@given(status=st.sampled_from(AGENT_STATUSES), instance_counts=counts)
def test_shown_and_stored_status_allow_the_same(
    status: str, instance_counts: dict[str, int]
) -> None:
    assert available_actions(status, instance_counts) == available_actions(
        stored_status(status), instance_counts
    )


@given(
    stored=st.sampled_from(("pending", "active", "retired")),
    last=st.none() | moments,
    now=moments,
    days=st.integers(1, 60),
)
def test_dormant_only_when_active_and_quiet(
    stored: str, last: datetime | None, now: datetime, days: int
) -> None:
    after = timedelta(days=days)
    shown = agent_status(stored, last, now, after)
    quiet = last is not None and now - last > after
    assert shown == ("dormant" if stored == "active" and quiet else stored)
    assert stored_status(shown) == stored


def test_the_boundary_is_not_yet_dormant() -> None:
    now = datetime(2026, 1, 31, tzinfo=UTC)
    after = timedelta(days=30)
    assert agent_status("active", now - after, now, after) == "active"
    assert agent_status("active", now - after - timedelta(microseconds=1), now, after) == "dormant"
