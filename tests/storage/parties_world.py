"""Runs with sessions and users, recorded through the interface, and what they should add up to.

Each run's first activity span names its session (``session_id``, or ``conversation_id``) and
user (``user_id``) in its payload; some runs name them only in a later span, some name others
in a later span (the first stays), some name none. Runs start over the ten days before
:data:`NOW`, some fail, some report priced usage; a second account uses the same session ids.
The expected figures are computed here from the API's runs, never from the store's groups.
"""

from __future__ import annotations

import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import attrs

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.service import Governance, Session

NOW = datetime(2026, 3, 20, 12, 0, tzinfo=UTC)
SESSIONS = ("chat-a", "chat-b", "chat-c", "chat-d", "chat-<e>", "chat-f")
USERS = ("ann", "bob", "cy", "dee")


@attrs.frozen
class PartyRun:
    """A run of the world: its id and the session and user its spans named first."""

    run_id: str
    session_id: str | None
    user_id: str | None


@attrs.frozen
class PartiesWorld:
    """Two accounts' sessions (``session`` is the one looked at, with its ``token``) and runs."""

    session: Session
    token: str
    other: Session
    runs: tuple[PartyRun, ...]
    agent_ids: tuple[str, ...]


def _record(
    session: Session, agent_id: str, start: datetime, payload: dict[str, Any],
    later: dict[str, Any] | None, status: str,
) -> str:
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "1"},
    })
    session.call("agent_spans/create", {
        "agent_instance_id": run["id"], "schema_name": "llm", "status": "complete",
        "started_at": format_timestamp(start), "payload": payload,
    })
    if later is not None:
        session.call("bulk", {"items": [{
            "_type": "agent_spans/create", "agent_instance_id": run["id"],
            "schema_name": "step", "status": "complete",
            "started_at": format_timestamp(start + timedelta(seconds=1)), "payload": later,
            "idempotency_key": f"later-{run['id']}",
        }]})
    if status != "active":
        session.call("agent_instances/finish", {
            "agent_instance_id": run["id"], "status": status,
            "timestamp": format_timestamp(start + timedelta(seconds=30)),
        })
    return str(run["id"])


@attrs.frozen
class _Made:
    token: str
    session: Session
    runs: list[PartyRun]
    agent_ids: list[str]


def _account(
    gov: Governance, name: str, runs: int, seed: int, now: datetime,
    sessions: tuple[str, ...], users: tuple[str, ...], later_parties: tuple[str, str],
) -> _Made:
    boot = gov.bootstrap(account_name=name, admin_email=f"{name}@example.test")
    session = gov.session(boot.token)
    agents = [session.details("agents/create", {"name": f"{name}-{n}"})["id"] for n in range(2)]
    chosen = random.Random(seed)
    made: list[PartyRun] = []
    for number in range(runs):
        start = now - timedelta(hours=chosen.uniform(0.5, 240))
        session_id = chosen.choice((*sessions, None))
        user_id = chosen.choice((*users, None))
        payload: dict[str, Any] = {"step": number}
        if chosen.random() < 0.6:
            payload.update(model="gpt-4o", token_usage={
                "prompt_tokens": chosen.randint(10, 5000), "completion_tokens": 40})
        later: dict[str, Any] | None = None
        shape = number % 4
        if shape == 0 and session_id is not None:
            # Named only by a later span: that span sets it.
            later = {"conversation_id": session_id, "user_id": user_id}
        else:
            if session_id is not None:
                payload["conversation_id" if shape == 1 else "session_id"] = session_id
            if user_id is not None:
                payload["user_id"] = user_id
            if shape == 2:
                # A later span naming others changes nothing that is set; it sets what is not.
                later = {"session_id": later_parties[0], "user_id": later_parties[1]}
                session_id = session_id or later_parties[0]
                user_id = user_id or later_parties[1]
        status = chosen.choice(("complete", "complete", "failed", "active"))
        run_id = _record(session, chosen.choice(agents), start, payload, later, status)
        made.append(PartyRun(run_id, session_id, user_id))
    return _Made(boot.token, session, made, agents)


def build(
    gov: Governance,
    runs: int = 40,
    *,
    now: datetime = NOW,
    sessions: tuple[str, ...] = SESSIONS,
    users: tuple[str, ...] = USERS,
    later_parties: tuple[str, str] = ("later-session", "later-user"),
) -> PartiesWorld:
    """Two accounts' runs (``runs`` in the first, 10 in the second), started before ``now``.

    ``later_parties`` are the session and user some runs' later spans name.
    """
    mine = _account(gov, "acme", runs, 11, now, sessions, users, later_parties)
    other = _account(gov, "globex", 10, 12, now, sessions, users, later_parties)
    return PartiesWorld(mine.session, mine.token, other.session, tuple(mine.runs),
                        tuple(mine.agent_ids))


def api_runs(session: Session) -> list[dict[str, Any]]:
    """Every run of the caller, as the API lists it."""
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = session.call("agent_instances/list", {
            "pagination": {"offset": offset, "page_size": 100}})
        rows += page["summaries"]
        offset = page["pagination"]["next_page_offset"]
    return rows


def expected_sessions(world: PartiesWorld, since: datetime) -> dict[str, dict[str, Any]]:
    """Each session's figures over the runs started since ``since``, from the API's runs."""
    named = {run.run_id: run for run in world.runs}
    figures: dict[str, dict[str, Any]] = defaultdict(lambda: {
        "runs": 0, "failed": 0, "starts": [], "cost": None, "users": set()})
    for run in api_runs(world.session):
        party = named[run["id"]]
        if party.session_id is None or run["started_at"] is None:
            continue
        started = parse_timestamp(run["started_at"])
        if started < since:
            continue
        entry = figures[party.session_id]
        entry["runs"] += 1
        entry["failed"] += run["status"] == "failed"
        entry["starts"].append(started)
        cost = (run["cost_breakdown"] or {}).get("total_cost")
        if cost is not None:
            entry["cost"] = (entry["cost"] or Decimal(0)) + Decimal(str(cost))
        if party.user_id is not None:
            entry["users"].add(party.user_id)
    return dict(figures)
