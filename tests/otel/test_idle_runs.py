"""A trace whose root never arrives: its run ends after the idle time, and says why."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.otel import (
    DEFAULT_ROOT_WAIT,
    ROOT_MISSING_ALERT,
    ROOT_WAIT_VARIABLE,
    MappingSettings,
    Span,
    end_idle_runs,
    ingest,
    parse_root_wait,
)
from governance_core.otel.idle import idle_run_status
from governance_core.otel.ingest import IDLE_SWEEP_EVERY
from governance_core.service import Session
from tests.otel.shapes import new_governance
from tests.otel.traces import runs

START = datetime(2026, 1, 1, tzinfo=UTC)
TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
ROOT = "00f067aa0ba902b7"


def at(seconds: float) -> int:
    return int((START.timestamp() + seconds) * 1_000_000_000)


def span(span_id: str, parent: str, *, status: str = "unset", trace: str = TRACE,
         seconds: float = 0, attributes: dict[str, Any] | None = None) -> Span:
    return Span(trace_id=trace, span_id=span_id, parent_span_id=parent, name=f"op {span_id}",
                start_time_unix_nano=at(seconds), end_time_unix_nano=at(seconds + 1),
                attributes=attributes or {}, status_code=status)


def rootless(status: str = "unset") -> list[Span]:
    """A chat call and a tool call whose parent, the root, is never sent; a retry under the
    tool failed without failing it."""
    return [
        span("0000000000000001", ROOT, attributes={"gen_ai.operation.name": "chat"}),
        span("0000000000000002", ROOT, status=status, seconds=2),
        span("0000000000000003", "0000000000000002", status="error", seconds=2),
    ]


def the_run(session: Session, trace: str = TRACE) -> dict[str, Any]:
    [run] = session.call("agent_instances/list", external_identifier=trace)["summaries"]
    return dict(run)


def test_a_rootless_run_ends_after_the_idle_time_and_says_its_root_never_came() -> None:
    clock = FixedClock(START)
    gov, session = new_governance(clock)
    ingest(gov, session.principal, rootless())
    assert the_run(session)["status"] == "active"

    clock.advance(DEFAULT_ROOT_WAIT - timedelta(seconds=1))
    ingest(gov, session.principal, [span("0000000000000009", "", trace="1" * 32)])
    assert the_run(session)["status"] == "active"

    clock.advance(timedelta(seconds=5))
    # Idle now, but the account's idle runs were looked for by the export 5 s ago: an export
    # looks at most once a minute.
    ingest(gov, session.principal, [span("000000000000000a", "", trace="2" * 32, seconds=3605)])
    assert the_run(session)["status"] == "active"
    clock.advance(IDLE_SWEEP_EVERY)
    # Any later export of the account ends it.
    ingest(gov, session.principal, [span("000000000000000b", "", trace="4" * 32, seconds=3665)])
    run = the_run(session)
    assert run["status"] == "complete"
    assert run["finished_at"] == "2026-01-01T00:00:03.000000Z"
    [alert] = session.call("alerts/list", agent_instance_id=run["id"])["summaries"]
    assert (alert["name"], alert["severity"], alert["status"]) == (
        ROOT_MISSING_ALERT, "warning", "raised")
    assert alert["payload"]["trace_id"] == TRACE
    assert alert["payload"]["idle_after_seconds"] == 3600
    assert "root span never arrived" in alert["payload"]["message"]

    # The root arriving late is stored under the ended run, which keeps its status.
    late = span(ROOT, "", status="error", seconds=-1)
    assert ingest(gov, session.principal, [late]).rejected == ()
    run = the_run(session)
    assert (run["status"], run["span_counts"]["total"]) == ("complete", 4)


def test_the_status_comes_from_the_highest_spans_that_arrived() -> None:
    clock = FixedClock(START)
    gov, session = new_governance(clock)
    ingest(gov, session.principal, rootless(status="error"))
    clock.advance(timedelta(hours=2))
    assert end_idle_runs(gov) == (the_run(session)["id"],)
    assert the_run(session)["status"] == "failed"
    # A second sweep finds nothing left to end.
    assert end_idle_runs(gov) == ()


def test_a_sweep_pages_past_many_unfinished_runs_that_are_no_traces(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = FixedClock(START)
    gov, session = new_governance(clock)
    ingest(gov, session.principal, rootless())
    trace_run = the_run(session)["id"]
    agent = session.details("agents/create", name="Api", external_identifier="api")
    # More unfinished runs recorded through the API than a page of the sweep holds, each with
    # a span (so with a latest span time, as the sweep looks for).
    with gov.transaction():
        for number in range(600):
            job = session.details("agent_instances/register", agent_id=agent["id"],
                                  agent_version={"external_identifier": "1"},
                                  external_identifier=f"job-{number}")
            session.call("agent_spans/create", agent_instance_id=job["id"], schema_name="step",
                         status="complete", started_at="2026-01-01T00:00:00Z")
    clock.advance(timedelta(hours=2))
    read: list[str] = []
    iterate = gov.store.iterate

    def spans_read(table: str, *args: Any, **kwargs: Any) -> Any:
        read.append(table)
        return iterate(table, *args, **kwargs)

    monkeypatch.setattr(gov.store, "iterate", spans_read)
    assert end_idle_runs(gov) == (trace_run,)
    # Only the run whose identifier is a trace id has its spans read.
    assert read.count("agent_spans") == 1
    assert {run["status"] for run in runs(session)} == {"active", "complete"}


def test_the_idle_time_is_configurable_and_other_runs_are_left_alone() -> None:
    clock = FixedClock(START)
    gov, session = new_governance(clock)
    never = MappingSettings(root_wait=None)
    ingest(gov, session.principal, rootless(), never)
    # A run recorded through the API with a trace-like identifier and no OTel spans.
    agent = session.details("agents/create", name="Api", external_identifier="api")
    api_run = session.details("agent_instances/register", agent_id=agent["id"],
                              agent_version={"external_identifier": "1"},
                              external_identifier="f" * 32)
    session.call("agent_spans/create", agent_instance_id=api_run["id"], schema_name="step",
                 status="active",
                 started_at="2026-01-01T00:00:00Z")
    clock.advance(timedelta(minutes=10))
    ingest(gov, session.principal, [span("0000000000000009", "", trace="1" * 32)], never)
    assert the_run(session)["status"] == "active"

    short = MappingSettings(root_wait=timedelta(minutes=5))
    ingest(gov, session.principal, [span("000000000000000b", "", trace="3" * 32)], short)
    assert the_run(session)["status"] == "complete"
    assert the_run(session, "f" * 32)["status"] == "active"
    assert {run["status"] for run in runs(session)} == {"active", "complete"}


def test_idle_status_of_spans_without_their_root() -> None:
    def record(span_id: str, parent: str | None, status: str) -> dict[str, Any]:
        return {"id": span_id, "parent_span_id": parent, "status": status}

    assert idle_run_status([]) == "complete"
    assert idle_run_status([record("a", "root", "complete"), record("b", "a", "failed")]) == (
        "complete")
    assert idle_run_status([record("a", "root", "complete"), record("b", "root", "failed")]) == (
        "failed")
    assert idle_run_status([record("a", None, "failed")]) == "failed"


@pytest.mark.parametrize(("text", "expected"), [
    (None, DEFAULT_ROOT_WAIT), ("  ", DEFAULT_ROOT_WAIT), ("1800", timedelta(minutes=30)),
    ("0.5", timedelta(milliseconds=500)), ("off", None), ("0", None),
])
def test_the_root_wait_setting(text: str | None, expected: timedelta | None) -> None:
    assert parse_root_wait(text) == expected


@pytest.mark.parametrize("text", ["soon", "-5", "nan", "1e12"])
def test_a_bad_root_wait_names_the_variable(text: str) -> None:
    with pytest.raises(ValueError, match=ROOT_WAIT_VARIABLE):
        parse_root_wait(text)


def test_the_server_sweeps_every_account_in_the_background(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from governance_http.serving import start_idle_run_sweeper

    clock = FixedClock(START)
    gov, session = new_governance(clock)
    ingest(gov, session.principal, rootless())
    monkeypatch.setenv(ROOT_WAIT_VARIABLE, "off")
    assert start_idle_run_sweeper(gov, every=0.01) is None

    monkeypatch.setenv(ROOT_WAIT_VARIABLE, "60")
    clock.advance(timedelta(minutes=2))
    stop = start_idle_run_sweeper(gov, every=0.01)
    assert stop is not None
    try:
        for _ in range(500):
            if the_run(session)["status"] != "active":
                break
            threading.Event().wait(0.01)
    finally:
        stop.set()
    assert the_run(session)["status"] == "complete"


def test_a_clock_set_back_does_not_hold_the_next_sweep_back() -> None:
    clock = FixedClock(START + timedelta(hours=3))
    gov, session = new_governance(clock)
    ingest(gov, session.principal, [span("000000000000000c", "", trace="5" * 32)])
    # The clock is set back two hours (say, corrected), then the rootless trace arrives.
    clock.advance(timedelta(hours=-2))
    ingest(gov, session.principal, rootless())
    clock.advance(DEFAULT_ROOT_WAIT + timedelta(seconds=10))
    # Three hours after the first export by the old clock, but one after the rootless trace.
    ingest(gov, session.principal, [span("000000000000000d", "", trace="6" * 32)])
    assert the_run(session)["status"] == "complete"
