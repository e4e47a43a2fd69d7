"""Console sessions end with their token's suspension, and stay ended after it is activated."""

from __future__ import annotations

from governance_core.clock import FixedClock
from governance_core.console_sessions import ConsoleSessions
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from tests.console.world import make_account


def test_a_token_suspended_and_activated_with_no_request_between_ends_its_sessions() -> None:
    gov = Governance(MemoryStore(), clock=FixedClock(), config=Config(cipher=PlaintextForTests()))
    alice = make_account(gov, "alice")
    admin = gov.session(alice.token)
    other = admin.call("api_tokens/create", {"token_scope": "account"})
    sessions = ConsoleSessions(gov)
    first = sessions.sign_in(other["token"])
    again = sessions.sign_in(other["token"])
    kept = sessions.sign_in(alice.token)
    # Signing in again leaves the earlier session running (one per browser).
    assert sessions.resolve(first.cookie) is not None
    assert sessions.resolve(again.cookie) is not None

    token_id = other["details"]["id"]
    admin.call("api_tokens/suspend", {"api_token_id": token_id})
    admin.call("api_tokens/activate", {"api_token_id": token_id})

    assert sessions.resolve(first.cookie) is None
    assert sessions.resolve(again.cookie) is None
    assert sessions.resolve(kept.cookie) is not None
    assert sessions.resolve(sessions.sign_in(other["token"]).cookie) is not None


def test_revoking_a_token_deletes_its_sessions() -> None:
    gov = Governance(MemoryStore(), clock=FixedClock(), config=Config(cipher=PlaintextForTests()))
    alice = make_account(gov, "alice")
    admin = gov.session(alice.token)
    other = admin.call("api_tokens/create", {"token_scope": "account"})
    ConsoleSessions(gov).sign_in(other["token"])
    admin.call("api_tokens/revoke", {"api_token_id": other["details"]["id"]})
    assert gov.store.count("console_sessions") == 0
