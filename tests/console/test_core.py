"""The core parts the console stands on: sessions, recorded reveals, the tree and time filters."""

from __future__ import annotations

from datetime import timedelta

import pytest

from governance_core.clock import FixedClock, format_timestamp
from governance_core.console_sessions import SESSION_LIFETIME, ConsoleSessions
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.errors import (
    BadAuthToken,
    NotFound,
    NotPermitted,
    ValidationErrors,
)
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from tests.console.world import Account, make_account


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


@pytest.fixture
def gov(clock: FixedClock) -> Governance:
    return Governance(MemoryStore(), clock=clock, config=Config(cipher=PlaintextForTests()))


@pytest.fixture
def alice(gov: Governance) -> Account:
    return make_account(gov, "alice")


def test_a_session_acts_as_its_token_until_it_expires(
    gov: Governance, alice: Account, clock: FixedClock
) -> None:
    sessions = ConsoleSessions(gov)
    ticket = sessions.sign_in(alice.token)
    assert alice.token not in ticket.cookie
    found = sessions.resolve(ticket.cookie)
    assert found is not None
    assert found.principal.token_id == alice.token_id
    assert found.check_csrf(found.csrf_token) and not found.check_csrf("x")
    assert not found.check_csrf(None)
    agents = sessions.session(found).call("agents/list")["summaries"]
    assert {agent["name"] for agent in agents} >= {"Loan application review agent"}
    clock.now += SESSION_LIFETIME
    assert sessions.resolve(ticket.cookie) is None
    assert gov.store.count("console_sessions") == 0


def test_every_server_on_the_store_signs_with_one_key(gov: Governance, alice: Account) -> None:
    ticket = ConsoleSessions(gov).sign_in(alice.token)
    assert ConsoleSessions(gov).resolve(ticket.cookie) is not None
    assert gov.store.count("console_secrets") == 1


def test_sign_in_refuses_ingestion_and_unusable_tokens(gov: Governance, alice: Account) -> None:
    sessions = ConsoleSessions(gov)
    environment = alice.session.call("environments/list")["summaries"][0]["id"]
    ingestion = alice.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": alice.agent_id,
        "environment_id": environment,
    })["token"]
    with pytest.raises(NotPermitted):
        sessions.sign_in(ingestion)
    with pytest.raises(BadAuthToken):
        sessions.sign_in("pf_unknown")
    assert gov.store.count("console_sessions") == 0


def test_a_token_that_expires_ends_its_sessions(
    gov: Governance, alice: Account, clock: FixedClock
) -> None:
    made = alice.session.call("api_tokens/create", {
        "expires_at": format_timestamp(clock.now + timedelta(hours=1)),
    })
    sessions = ConsoleSessions(gov)
    ticket = sessions.sign_in(made["token"])
    assert sessions.resolve(ticket.cookie) is not None
    clock.now += timedelta(hours=2)
    assert sessions.resolve(ticket.cookie) is None


def test_sign_in_deletes_expired_sessions(
    gov: Governance, alice: Account, clock: FixedClock
) -> None:
    sessions = ConsoleSessions(gov)
    for _ in range(3):
        sessions.sign_in(alice.token)
    clock.now += SESSION_LIFETIME + timedelta(seconds=1)
    sessions.sign_in(alice.token)
    assert gov.store.count("console_sessions") == 1


def test_a_reveal_is_recorded_and_must_name_a_sensitive_value(
    gov: Governance, alice: Account
) -> None:
    bob = make_account(gov, "bob")
    call = alice.session.call
    made = call("agent_spans/record_reveal",
                {"agent_span_id": alice.markup_span_id, "pointer": "/payload/secret"})
    assert made["details"]["pointer"] == "/payload/secret"
    assert made["details"]["token_id"] == alice.token_id
    listed = call("agent_spans/reveals", {"agent_span_id": alice.markup_span_id})
    assert [r["id"] for r in listed["summaries"]] == [made["details"]["id"]]
    for pointer in ("/payload/note", "/payload", "/id", "payload/secret", "/payload/none/x",
                    "secret", "/payload/secret/\u00b2"):
        with pytest.raises(ValidationErrors) as raised:
            call("agent_spans/record_reveal",
                 {"agent_span_id": alice.markup_span_id, "pointer": pointer})
        assert set(raised.value.errors) == {"pointer"}
    with pytest.raises(NotFound):
        bob.session.call("agent_spans/record_reveal",
                         {"agent_span_id": alice.markup_span_id, "pointer": "/payload/secret"})
    assert gov.store.count("sensitive_reveals") == 1


def test_spans_list_by_parent_or_top_level(alice: Account) -> None:
    call = alice.session.call
    run = alice.running_run_id
    top = call("agent_spans/list", {"agent_instance_id": run, "top_level": "true"})
    assert all(span["parent_span_id"] is None for span in top["summaries"])
    assert alice.running_root_span_id in {span["id"] for span in top["summaries"]}
    children = call("agent_spans/list", {"agent_instance_id": run,
                                         "parent_span_id": alice.running_root_span_id})
    assert [span["parent_span_id"] for span in children["summaries"]] == [
        alice.running_root_span_id
    ]
    every = call("agent_spans/list", {"agent_instance_id": run})
    assert every["pagination"]["item_count"] == (
        top["pagination"]["item_count"] + children["pagination"]["item_count"]
    )
    with pytest.raises(ValidationErrors):
        call("agent_spans/list", {"agent_instance_id": run, "parent_span_id": "nope"})


def test_runs_list_by_start_time(alice: Account, clock: FixedClock) -> None:
    call = alice.session.call
    everything = call("agent_instances/list")["pagination"]["item_count"]
    later = clock.now + timedelta(hours=1)
    clock.now = later
    run = call("playground/register_loan_application_review_agent_instance",
               {"agent_id": alice.agent_id})["details"]
    # A registered run has not started: the filter is on started_at.
    assert call("agent_instances/list",
                {"start_time": format_timestamp(later)})["pagination"]["item_count"] == 0
    call("agent_instances/start", {"agent_instance_id": run["id"]})
    fresh = call("agent_instances/list", {"start_time": format_timestamp(later)})
    assert [found["id"] for found in fresh["summaries"]] == [run["id"]]
    older = call("agent_instances/list",
                 {"end_time": format_timestamp(later - timedelta(seconds=1))})
    assert older["pagination"]["item_count"] == everything
    with pytest.raises(ValidationErrors):
        call("agent_instances/list", {"start_time": "yesterday"})
