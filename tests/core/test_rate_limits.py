"""Failed attempts: counted per key in a sliding window, refused with a retry time."""

from __future__ import annotations

import ipaddress
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.errors import BadAuthToken, NotFound, TemporarilyUnavailable
from governance_core.ids import SeededIds
from governance_core.rate_limits import (
    DEFAULT_MAX_FAILURES,
    DEFAULT_WINDOW,
    FailedAttempts,
    FailureLimit,
    client_address,
    credential_mark,
)
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
ADDRESS = ("address", "203.0.113.7")


def _clock() -> FixedClock:
    return FixedClock(START, step=timedelta(0))


def _refusal(attempts: FailedAttempts, clock: FixedClock, *keys: tuple[str, str]) -> int | None:
    """The refusal's ``retry_after_ms``, or None when the keys may try."""
    try:
        attempts.check(clock, *keys)
    except TemporarilyUnavailable as error:
        assert error.rate_limited
        return error.retry_after_ms
    return None


def test_the_defaults_are_ten_failures_a_minute() -> None:
    limit = FailureLimit()
    assert (limit.max_failures, limit.window) == (DEFAULT_MAX_FAILURES, DEFAULT_WINDOW)
    assert limit.max_failures == 10
    assert limit.window == timedelta(minutes=1)
    assert limit.trusted_proxies == ()


def test_a_key_is_refused_at_the_limit_until_its_oldest_failure_leaves_the_window() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=3, window=timedelta(seconds=60)))
    for _ in range(2):
        attempts.fail(clock, ADDRESS)
        clock.advance(timedelta(seconds=10))
    assert _refusal(attempts, clock, ADDRESS) is None
    attempts.fail(clock, ADDRESS)  # at 20 s: the third
    clock.advance(timedelta(seconds=5))
    assert _refusal(attempts, clock, ADDRESS) == 35_000  # the first, at 0 s, leaves at 60 s
    clock.advance(timedelta(seconds=34, milliseconds=999, microseconds=500))
    assert _refusal(attempts, clock, ADDRESS) == 1
    clock.advance(timedelta(microseconds=500))
    assert _refusal(attempts, clock, ADDRESS) is None
    # Sliding: one more failure now makes three within the window again (10 s, 20 s, 60 s).
    attempts.fail(clock, ADDRESS)
    assert _refusal(attempts, clock, ADDRESS) == 10_000


def test_the_refusal_names_where_the_failures_came_from_and_when_to_retry() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=1))
    attempts.fail(clock, ("token", "ab" * 32))
    with pytest.raises(TemporarilyUnavailable) as raised:
        attempts.check(clock, ADDRESS, ("token", "ab" * 32))
    assert raised.value.message == "too many failed attempts with this token; retry in 60 s"
    assert raised.value.to_payload() == {
        "status": "error", "code": "temporarily_unavailable",
        "message": "too many failed attempts with this token; retry in 60 s",
        "retry_after_ms": 60_000,
    }


def test_keys_are_counted_apart() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=2))
    attempts.fail(clock, ADDRESS)
    attempts.fail(clock, ("address", "203.0.113.8"))
    attempts.fail(clock, ("token", "203.0.113.7"))
    assert _refusal(attempts, clock, ADDRESS) is None
    attempts.fail(clock, ADDRESS)
    assert _refusal(attempts, clock, ADDRESS) == 60_000
    assert _refusal(attempts, clock, ("address", "203.0.113.8")) is None


def test_a_credential_repeated_counts_once_under_a_key_given_its_mark() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=3))
    revoked = credential_mark("pf_revoked")
    for _ in range(20):
        attempts.fail(clock, ADDRESS, revoked)
        clock.advance(timedelta(seconds=1))
    assert _refusal(attempts, clock, ADDRESS) is None
    attempts.fail(clock, ADDRESS, credential_mark("pf_guess_1"))
    assert _refusal(attempts, clock, ADDRESS) is None
    attempts.fail(clock, ADDRESS, credential_mark("pf_guess_2"))
    # Counted once, at its latest failure (19 s): the window frees at 79 s.
    assert _refusal(attempts, clock, ADDRESS) == 59_000


def test_a_limit_of_zero_counts_nothing() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=0))
    for _ in range(100):
        attempts.fail(clock, ADDRESS)
    assert _refusal(attempts, clock, ADDRESS) is None
    assert len(attempts) == 0


def test_keys_are_bounded_and_the_least_recently_failed_is_forgotten() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=1, max_keys=3))
    for n in range(3):
        attempts.fail(clock, ("address", f"198.51.100.{n}"))
    attempts.fail(clock, ("address", "198.51.100.0"))  # now the most recent
    attempts.fail(clock, ("address", "198.51.100.9"))
    assert len(attempts) == 3
    refused = {n for n in (0, 1, 2, 9) if _refusal(attempts, clock, ("address", f"198.51.100.{n}"))}
    assert refused == {0, 2, 9}


def test_keys_with_only_old_failures_are_dropped_when_checked() -> None:
    clock = _clock()
    attempts = FailedAttempts(FailureLimit(max_failures=2))
    attempts.fail(clock, ADDRESS)
    clock.advance(DEFAULT_WINDOW)
    assert _refusal(attempts, clock, ADDRESS) is None
    assert len(attempts) == 0


@pytest.mark.parametrize("field", ["max_failures", "max_keys"])
def test_a_limit_refuses_counts_below_its_minimum(field: str) -> None:
    with pytest.raises(ValueError, match=field):
        FailureLimit(**{field: -1})  # type: ignore[arg-type]


def test_a_limit_refuses_an_empty_window() -> None:
    with pytest.raises(ValueError, match="window"):
        FailureLimit(window=timedelta(0))


# -- client addresses ---------------------------------------------------------------------
PROXIES = (ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))


@pytest.mark.parametrize(("remote", "forwarded", "expected"), [
    ("203.0.113.7", None, "203.0.113.7"),
    # A client that is not a trusted proxy cannot name another address.
    ("203.0.113.7", "198.51.100.1", "203.0.113.7"),
    ("10.0.0.2", "198.51.100.1", "198.51.100.1"),
    ("10.0.0.2", None, "10.0.0.2"),
    # What the client itself put in front is not believed: the proxy appended the real peer.
    ("10.0.0.2", "1.1.1.1, 198.51.100.1", "198.51.100.1"),
    ("10.0.0.2", "198.51.100.1, 10.0.0.3", "198.51.100.1"),
    ("10.0.0.2", "10.0.0.4, 10.0.0.3", "10.0.0.4"),
    ("10.0.0.2", "198.51.100.1, ", "198.51.100.1"),
    ("10.0.0.2", "unknown", "unknown"),
    ("fd00::1", "2001:db8:1:2:aaaa::1", "2001:db8:1:2::/64"),
    ("2001:db8:1:2:aaaa::1", None, "2001:db8:1:2::/64"),
    ("::ffff:203.0.113.7", None, "203.0.113.7"),
    ("", None, ""),
])
def test_the_client_address(remote: str, forwarded: str | None, expected: str) -> None:
    assert client_address(remote, forwarded, PROXIES) == expected


def test_without_trusted_proxies_the_peer_is_the_client() -> None:
    assert client_address("10.0.0.2", "198.51.100.1") == "10.0.0.2"


# -- bearer tokens ------------------------------------------------------------------------
@pytest.fixture
def gov() -> Governance:
    return Governance(MemoryStore(), clock=_clock(), ids=SeededIds(3))


@pytest.fixture
def boot(gov: Governance) -> Bootstrap:
    return gov.bootstrap()


def _rejected(gov: Governance, token: str) -> type[Exception]:
    try:
        gov.authenticate(token)
    except (BadAuthToken, TemporarilyUnavailable) as error:
        return type(error)
    raise AssertionError("the token authenticated")


def test_a_token_that_failed_ten_times_a_minute_is_refused_without_a_lookup(
    gov: Governance, boot: Bootstrap, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad = "pf_" + "x" * 43
    assert [_rejected(gov, bad) for _ in range(10)] == [BadAuthToken] * 10
    lookups: list[object] = []
    query = gov.store.query

    def counted_query(*args: Any, **kwargs: Any) -> Any:
        lookups.append(args)
        return query(*args, **kwargs)

    monkeypatch.setattr(gov.store, "query", counted_query)
    with pytest.raises(TemporarilyUnavailable) as raised:
        gov.authenticate(bad)
    assert raised.value.rate_limited
    assert raised.value.retry_after_ms == 60_000
    assert lookups == []
    # Another token is not held up by it.
    assert gov.authenticate(boot.token).account_id == boot.account_id
    assert isinstance(gov.clock, FixedClock)
    gov.clock.advance(timedelta(minutes=1))
    assert _rejected(gov, bad) is BadAuthToken


@pytest.mark.parametrize("token", ["not-a-token", "pf_"])
def test_malformed_tokens_count_as_failures(gov: Governance, token: str) -> None:
    assert {_rejected(gov, token) for _ in range(10)} == {BadAuthToken}
    assert _rejected(gov, token) is TemporarilyUnavailable


def test_a_suspended_token_counts_its_failures(gov: Governance, boot: Bootstrap) -> None:
    other = gov.session(boot.token).call("api_tokens/create", {"details": {}})
    gov.session(boot.token).call("api_tokens/suspend", {"api_token_id": other["details"]["id"]})
    assert {_rejected(gov, other["token"]) for _ in range(10)} == {BadAuthToken}
    assert _rejected(gov, other["token"]) is TemporarilyUnavailable


def test_successes_are_not_counted(gov: Governance, boot: Bootstrap) -> None:
    for _ in range(100):
        gov.authenticate(boot.token)
    assert len(gov.caches.failed_attempts) == 0


# -- invite accepts -----------------------------------------------------------------------
def _invite(gov: Governance, boot: Bootstrap, email: str) -> str:
    invite = gov.session(boot.token).call("admin_user_invites/create", {"email": email})
    return str(invite["details"]["token"])


def test_an_unknown_invite_token_is_refused_after_ten_failures(
    gov: Governance, boot: Bootstrap
) -> None:
    unknown = "pfinv_" + "y" * 43
    for _ in range(10):
        with pytest.raises(NotFound):
            gov.accept_invite(unknown)
    with pytest.raises(TemporarilyUnavailable) as raised:
        gov.accept_invite(unknown)
    assert raised.value.rate_limited
    assert raised.value.message.startswith("too many failed attempts with this invite token")
    # Another invite is accepted meanwhile.
    assert gov.accept_invite(_invite(gov, boot, "new@example.com"), name="New").token


def test_a_bulk_caller_guessing_invite_tokens_is_refused_after_ten(
    gov: Governance, boot: Bootstrap
) -> None:
    session = gov.session(boot.token)
    outputs = [
        session.call("bulk", {"items": [{
            "_type": "admin_user_invites/accept", "idempotency_key": f"guess-{n:04d}",
            "token": f"pfinv_guess{n:02d}" + "z" * 32,
        }]})["outputs"][f"guess-{n:04d}"]
        for n in range(11)
    ]
    assert [out["code"] for out in outputs] == ["not_found"] * 10 + ["temporarily_unavailable"]
    assert outputs[-1]["message"].startswith("too many failed attempts by this caller")
    assert outputs[-1]["retry_after_ms"] == 60_000
