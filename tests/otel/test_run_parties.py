"""A trace's session and user: ``session.id``/``gen_ai.conversation.id`` and ``user.id``/
``enduser.id`` give its run the session and user the console groups and filters by.

The first value seen for a run is kept; the run's view in the interface does not show them;
an export that names them reads no more than one that does not.
"""

from __future__ import annotations

import collections
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from governance_core.otel import Resource, Span, ingest
from governance_core.otel.ingest import ExportSteps
from governance_core.otel.mapping import run_parties
from governance_core.service import Governance, Session
from governance_core.storage import SQLiteStore

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
OTHER_TRACE = "0af7651916cd43dd8448eb211c80319c"
START = 1_790_000_000_000_000_000
ROOT = "00f067aa0ba902b7"


def span(
    number: int,
    attributes: dict[str, Any] | None = None,
    *,
    trace_id: str = TRACE,
    resource: dict[str, Any] | None = None,
) -> Span:
    """Span ``number`` of a trace: 0 is its root, the others its children, in that order."""
    return Span(
        trace_id=trace_id, span_id=f"{number + 1:016x}" if number else ROOT,
        parent_span_id="" if number == 0 else ROOT, name=f"step {number}",
        start_time_unix_nano=START + number * 1_000_000,
        end_time_unix_nano=START + number * 1_000_000 + 500_000,
        attributes=attributes or {},
        resource=Resource({"service.name": "chat-agent", **(resource or {})}),
    )


@pytest.fixture
def gov(tmp_path: Path) -> Iterator[Governance]:
    with Governance(SQLiteStore(tmp_path / "parties.db")) as governance:
        yield governance


@pytest.fixture
def session(gov: Governance) -> Session:
    return gov.as_account(gov.bootstrap().account_id)


def stored_run(gov: Governance, session: Session, trace_id: str = TRACE) -> dict[str, Any]:
    [run] = [run for run in session.call("agent_instances/list")["summaries"]
             if run["external_identifier"] == trace_id]
    stored = gov.store.get("agent_instances", run["id"])
    assert stored is not None
    return stored


def send(gov: Governance, session: Session, *spans: Span) -> None:
    result = ingest(gov, session.principal, list(spans))
    assert not result.rejected and result.accepted == len(spans)


def test_span_attributes_name_the_runs_session_and_user(
    gov: Governance, session: Session
) -> None:
    send(gov, session, span(0), span(1, {"session.id": "chat-42", "user.id": "user-7"}))
    stored = stored_run(gov, session)
    assert (stored["session_id"], stored["user_id"]) == ("chat-42", "user-7")
    shown = session.details("agent_instances/show", {"agent_instance_id": stored["id"]})
    assert "session_id" not in shown and "user_id" not in shown


def test_the_first_value_seen_is_kept(gov: Governance, session: Session) -> None:
    send(gov, session, span(1, {"session.id": "first"}), span(2, {"session.id": "second",
                                                                   "user.id": "ann"}))
    # A later export, and a later span naming other ones, change nothing that is set.
    send(gov, session, span(3, {"session.id": "third", "user.id": "bob"}), span(0))
    stored = stored_run(gov, session)
    assert (stored["session_id"], stored["user_id"]) == ("first", "ann")
    assert stored["status"] == "complete"


def test_the_other_names_and_the_resource_name_them_too(
    gov: Governance, session: Session
) -> None:
    send(gov, session, span(0, {"gen_ai.conversation.id": "conversation-1"}, resource={
        "enduser.id": "resource-user",
    }))
    stored = stored_run(gov, session)
    assert (stored["session_id"], stored["user_id"]) == ("conversation-1", "resource-user")
    # The span's own attributes come before the resource's.
    send(gov, session, span(0, {"user.id": "span-user"}, trace_id=OTHER_TRACE,
                            resource={"user.id": "resource-user", "session.id": "res-session"}))
    other = stored_run(gov, session, OTHER_TRACE)
    assert (other["session_id"], other["user_id"]) == ("res-session", "span-user")


def test_values_that_are_no_ids_are_ignored() -> None:
    too_long = "x" * 201
    assert run_parties(span(1, {"session.id": too_long, "gen_ai.conversation.id": "c-1",
                                "user.id": 42, "enduser.id": "  "})) == ("c-1", None)
    assert run_parties(span(1, {"session.id": "x" * 200, "user.id": "\ud800"})) == (
        "x" * 200, None)
    assert run_parties(span(1, {"session.id": ["a"]}, resource={"user.id": "u"})) == (None, "u")
    assert run_parties(span(1)) == (None, None)


def test_a_run_without_them_has_none(gov: Governance, session: Session) -> None:
    send(gov, session, span(0), span(1, {"session.id": "y" * 201}))
    stored = stored_run(gov, session)
    assert stored.get("session_id") is None and stored.get("user_id") is None


@contextmanager
def reads(store: SQLiteStore) -> Iterator[collections.Counter[str]]:
    """Count the reads ``store`` runs, by table."""
    seen: collections.Counter[str] = collections.Counter()

    def note(sql: str) -> None:
        table = re.search(r"FROM\s+\[(\w+)\]", sql)
        if sql.split()[0].upper() == "SELECT" and table:
            seen[table.group(1)] += 1

    link = store._thread_link()
    link.conn.set_trace_callback(note)
    try:
        yield seen
    finally:
        link.conn.set_trace_callback(None)


def _export_reads(path: Path, attributes: dict[str, Any]) -> collections.Counter[str]:
    with Governance(SQLiteStore(path)) as gov:
        principal = gov.authenticate(gov.bootstrap().token)
        spans = [span(number, attributes) for number in range(60)]
        assert isinstance(gov.store, SQLiteStore)
        with reads(gov.store) as seen:
            ingest(gov, principal, spans, steps=ExportSteps(max_spans=25, max_seconds=3600))
        stored = gov.store.query("agent_instances", [])
        assert [run.get("session_id") for run in stored] == [attributes.get("session.id")]
        return seen


def test_naming_them_costs_an_export_no_read(tmp_path: Path) -> None:
    plain = _export_reads(tmp_path / "plain.db", {})
    named = _export_reads(tmp_path / "named.db", {"session.id": "chat-1", "user.id": "u-1"})
    assert named == plain
