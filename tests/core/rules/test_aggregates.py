"""Span aggregates of an instance: moved by each span write, equal to a recount."""

from __future__ import annotations

from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.rules.aggregates import apply_span

INSTANCE: dict[str, Any] = {"id": "i", "span_counts": {}, "span_schema_counts": {},
                            "last_activity_span_at": None}


def span(
    status: str,
    name: str = "llm",
    purpose: str = "activity",
    started: str = "2026-01-01T00:00:01.000000Z",
    finished: str | None = None,
) -> dict[str, Any]:
    return {"status": status, "schema_name": name, "purpose": purpose, "started_at": started,
            "finished_at": finished}


def test_a_new_span_counts_once_by_status_and_by_name() -> None:
    after = apply_span(INSTANCE, None, span("active"))
    assert after["span_counts"] == {"active": 1, "complete": 0, "failed": 0, "cancelled": 0,
                                    "total": 1}
    assert after["span_schema_counts"] == {"llm": 1}
    assert after["last_activity_span_at"] == "2026-01-01T00:00:01.000000Z"


def test_a_finish_moves_the_status_count_only() -> None:
    started = apply_span(INSTANCE, None, span("active"))
    finished = apply_span(started, span("active"),
                          span("failed", finished="2026-01-01T00:00:05.000000Z"))
    assert finished["span_counts"]["active"] == 0
    assert finished["span_counts"]["failed"] == 1
    assert finished["span_counts"]["total"] == 1
    assert finished["span_schema_counts"] == {"llm": 1}
    assert finished["last_activity_span_at"] == "2026-01-01T00:00:05.000000Z"


def test_quality_and_alert_spans_leave_the_instance_alone() -> None:
    for purpose in ("quality", "alert"):
        assert apply_span(INSTANCE, None, span("complete", purpose=purpose)) is INSTANCE


def test_a_late_span_does_not_move_last_activity_back() -> None:
    recent = apply_span(INSTANCE, None, span("active", started="2026-03-01T00:00:00.000000Z"))
    late = apply_span(recent, None, span("complete", started="2026-01-01T00:00:00.000000Z",
                                         finished="2026-01-02T00:00:00.000000Z"))
    assert late["last_activity_span_at"] == "2026-03-01T00:00:00.000000Z"


def test_the_input_record_is_not_modified() -> None:
    apply_span(INSTANCE, None, span("active"))
    assert INSTANCE["span_counts"] == {}


STATUSES = st.sampled_from(["active", "complete", "failed", "cancelled"])
WRITES = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]), STATUSES,
        st.sampled_from(["activity", "activity", "quality", "alert"]),
        st.integers(0, 59), st.booleans(), st.sampled_from(["complete", "failed", "cancelled"]),
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(WRITES)
def test_aggregates_equal_a_recount_whatever_the_order(writes: list[Any]) -> None:
    instance = INSTANCE
    spans: list[dict[str, Any]] = []
    for name, status, purpose, second, finish_later, finish_as in writes:
        created = span(status, name, purpose, started=f"2026-01-01T00:00:{second:02d}.000000Z")
        instance = apply_span(instance, None, created)
        spans.append(created)
        if finish_later and status == "active":
            finished = {**created, "status": finish_as,
                        "finished_at": f"2026-01-01T00:01:{second:02d}.000000Z"}
            instance = apply_span(instance, created, finished)
            spans[-1] = finished
    activity = [s for s in spans if s["purpose"] == "activity"]
    by_status = Counter(s["status"] for s in activity)
    for status in ("active", "complete", "failed", "cancelled"):
        assert instance["span_counts"].get(status, 0) == by_status[status]
    assert instance["span_counts"].get("total", 0) == len(activity)
    assert instance["span_schema_counts"] == dict(Counter(s["schema_name"] for s in activity))
    stamps = [t for s in activity for t in (s["started_at"], s["finished_at"]) if t]
    assert instance["last_activity_span_at"] == (max(stamps) if stamps else None)
