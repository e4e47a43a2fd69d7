"""Failed credentials over HTTP: bearer tokens, invite accepts and console sign-ins.

Ten failures from one client address within a minute, and that address is refused 429
``temporarily_unavailable`` with ``retry_after_ms`` and ``Retry-After`` until the window frees.
"""

from __future__ import annotations

import ipaddress
import re
from datetime import timedelta
from urllib.parse import urlencode

import falcon.testing
import pytest

from governance_core.clock import FixedClock
from governance_core.errors import InvalidValue
from governance_core.rate_limits import DEFAULT_MAX_FAILURES, DEFAULT_WINDOW, FailureLimit
from governance_core.service import Bootstrap, Governance
from governance_http.console.web import SIGN_IN_COOKIE
from governance_http.settings import (
    FAILED_ATTEMPTS_VARIABLE,
    FAILED_ATTEMPTS_WINDOW_VARIABLE,
    TRUSTED_PROXIES_VARIABLE,
    failure_limit,
    open_governance,
)

ATTACKER = "203.0.113.7"
NEIGHBOUR = "198.51.100.20"
CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')


def _guess(n: int) -> str:
    return f"pf_guess{n:04d}" + "g" * 36


def _ping(
    client: falcon.testing.TestClient, token: str, address: str = ATTACKER, **headers: str
) -> falcon.testing.Result:
    return client.simulate_get("/api/v1/ping", remote_addr=address,
                               headers={"Authorization": f"Bearer {token}", **headers})


def _assert_limited(result: falcon.testing.Result, retry_after_ms: int) -> None:
    assert result.status_code == 429, result.text
    assert result.json == {
        "status": "error", "code": "temporarily_unavailable",
        "message": f"too many failed attempts from this address; "
                   f"retry in {retry_after_ms // 1000} s",
        "retry_after_ms": retry_after_ms,
    }
    assert result.headers["Retry-After"] == str(retry_after_ms // 1000)


def _advance(gov: Governance, delta: timedelta) -> None:
    assert isinstance(gov.clock, FixedClock)
    gov.clock.advance(delta)


# -- bearer tokens ------------------------------------------------------------------------
def test_ten_bad_tokens_from_an_address_refuse_its_next_request_until_the_window_frees(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    for n in range(DEFAULT_MAX_FAILURES):
        assert _ping(client, _guess(n)).status_code == 401
    # Refused without being tried: a right guess would be refused as well.
    _assert_limited(_ping(client, _guess(99)), 60_000)
    _assert_limited(_ping(client, boot.token), 60_000)
    agents = client.simulate_get("/api/v1/agent", remote_addr=ATTACKER,
                                 headers={"Authorization": f"Bearer {boot.token}"})
    _assert_limited(agents, 60_000)
    # Another address is not held up.
    assert _ping(client, boot.token, NEIGHBOUR).status_code == 200
    assert _ping(client, _guess(99), NEIGHBOUR).status_code == 401
    _advance(gov, DEFAULT_WINDOW - timedelta(seconds=20))
    _assert_limited(_ping(client, boot.token), 20_000)
    _advance(gov, timedelta(seconds=20))
    assert _ping(client, boot.token).status_code == 200


def test_failures_on_any_api_route_count_together(
    boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    for n in range(DEFAULT_MAX_FAILURES):
        path = ("/api/v1/ping", "/api/v1/agent", "/api/v1/environment")[n % 3]
        headers = {"Authorization": f"Bearer {_guess(n)}" if n % 2 else f"Basic {n:08d}"}
        result = client.simulate_get(path, remote_addr=ATTACKER, headers=headers)
        assert result.status_code == 401
    _assert_limited(_ping(client, boot.token), 60_000)


def test_successes_are_free_and_do_not_clear_failures(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    for _ in range(50):
        assert _ping(client, boot.token).status_code == 200
    assert len(gov.caches.failed_attempts) == 0
    for n in range(DEFAULT_MAX_FAILURES):
        assert _ping(client, boot.token).status_code == 200
        assert _ping(client, _guess(n)).status_code == 401
    _assert_limited(_ping(client, boot.token), 60_000)


def test_a_client_repeating_one_bad_token_does_not_refuse_its_neighbours(
    boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    revoked = _guess(1)
    for _ in range(DEFAULT_MAX_FAILURES):
        assert _ping(client, revoked).status_code == 401
    # The token itself is refused now; other tokens from the same address still work.
    refused = _ping(client, revoked)
    assert refused.status_code == 429
    assert refused.json["message"] == "too many failed attempts with this token; retry in 60 s"
    assert _ping(client, boot.token).status_code == 200


def test_a_request_without_credentials_is_neither_counted_nor_refused(
    gov: Governance, client: falcon.testing.TestClient
) -> None:
    for n in range(DEFAULT_MAX_FAILURES):
        assert _ping(client, _guess(n)).status_code == 401
    assert client.simulate_get("/api/v1/ping", remote_addr=ATTACKER).status_code == 200
    result = client.simulate_get("/api/v1/agent", remote_addr=NEIGHBOUR)
    assert result.status_code == 401
    assert result.json["code"] == "not_authenticated"
    # The ten guesses' own keys and the attacker's address: nothing under the neighbour.
    assert len(gov.caches.failed_attempts) == DEFAULT_MAX_FAILURES + 1
    assert gov.caches.failed_attempts.retry_after_ms(gov.clock(), ("address", NEIGHBOUR)) == 0


def test_behind_a_trusted_proxy_the_forwarded_client_is_counted(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    proxy = "10.0.0.2"
    gov.caches.failed_attempts.limit = FailureLimit(
        trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"),)
    )
    for n in range(DEFAULT_MAX_FAILURES):
        # The client's own X-Forwarded-For entry (left) is not believed.
        result = _ping(client, _guess(n), proxy, **{"X-Forwarded-For": f"1.1.1.{n}, {ATTACKER}"})
        assert result.status_code == 401
    _assert_limited(_ping(client, boot.token, proxy, **{"X-Forwarded-For": ATTACKER}), 60_000)
    assert _ping(client, boot.token, proxy, **{"X-Forwarded-For": NEIGHBOUR}).status_code == 200
    # An address that is not a trusted proxy cannot name another client.
    for n in range(DEFAULT_MAX_FAILURES):
        result = _ping(client, _guess(n), NEIGHBOUR, **{"X-Forwarded-For": "1.1.1.1"})
        assert result.status_code == 401
    _assert_limited(_ping(client, boot.token, NEIGHBOUR), 60_000)
    assert _ping(client, boot.token, proxy, **{"X-Forwarded-For": "1.1.1.1"}).status_code == 200


# -- invite accepts -----------------------------------------------------------------------
def _accept(
    client: falcon.testing.TestClient, token: str, address: str = ATTACKER
) -> falcon.testing.Result:
    return client.simulate_post("/api/v1/admin_user_invite/accept", remote_addr=address,
                                json={"token": token, "name": "New"})


def _invite(gov: Governance, boot: Bootstrap, email: str) -> str:
    invite = gov.session(boot.token).call("admin_user_invites/create", {"email": email})
    return str(invite["details"]["token"])


def test_ten_unknown_invite_tokens_from_an_address_refuse_its_next_accept(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    invite = _invite(gov, boot, "new@example.com")
    for n in range(DEFAULT_MAX_FAILURES):
        assert _accept(client, f"pfinv_guess{n:04d}" + "g" * 36).status_code == 404
    _assert_limited(_accept(client, invite), 60_000)
    accepted = _accept(client, invite, NEIGHBOUR)
    assert accepted.status_code == 200, accepted.text
    assert accepted.json["details"]["email"] == "new@example.com"


def test_a_malformed_accept_is_not_counted(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    for _ in range(DEFAULT_MAX_FAILURES + 1):
        result = client.simulate_post("/api/v1/admin_user_invite/accept", remote_addr=ATTACKER,
                                      json={"name": "no token"})
        assert result.status_code == 422
    assert _accept(client, _invite(gov, boot, "new@example.com")).status_code == 200


# -- console sign-in ----------------------------------------------------------------------
def _sign_in(
    client: falcon.testing.TestClient, form: dict[str, str], address: str = ATTACKER
) -> falcon.testing.Result:
    page = client.simulate_get("/sign-in", remote_addr=address)
    csrf = CSRF.search(page.text)
    assert csrf is not None
    cookie = page.cookies[SIGN_IN_COOKIE].value
    return client.simulate_post(
        "/sign-in", remote_addr=address, body=urlencode({**form, "csrf_token": csrf.group(1)}),
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Cookie": f"{SIGN_IN_COOKIE}={cookie}"},
    )


def test_ten_bad_console_sign_ins_answer_a_page_saying_when_to_retry(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    for n in range(DEFAULT_MAX_FAILURES):
        refused = _sign_in(client, {"token": _guess(n)})
        assert refused.status_code == 401
    limited = _sign_in(client, {"token": boot.token})
    assert limited.status_code == 429
    assert limited.headers["Content-Type"].startswith("text/html")
    assert "too many failed attempts from this address; retry in 60 s" in limited.text
    assert limited.headers["Retry-After"] == "60"
    assert _sign_in(client, {"token": boot.token}, NEIGHBOUR).status_code == 303
    _advance(gov, DEFAULT_WINDOW)
    assert _sign_in(client, {"token": boot.token}).status_code == 303


def test_console_invite_failures_count_under_the_address(
    gov: Governance, boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    invite = _invite(gov, boot, "new@example.com")
    for n in range(DEFAULT_MAX_FAILURES):
        form = {"invite_token": f"pfinv_guess{n:04d}" + "g" * 36, "name": "New"}
        assert _sign_in(client, form).status_code == 404
    limited = _sign_in(client, {"invite_token": invite, "name": "New"})
    assert limited.status_code == 429
    assert "retry in 60 s" in limited.text
    assert _sign_in(client, {"invite_token": invite, "name": "New"}, NEIGHBOUR).status_code == 303


def test_console_and_api_failures_share_the_address_count(
    boot: Bootstrap, client: falcon.testing.TestClient
) -> None:
    for n in range(DEFAULT_MAX_FAILURES // 2):
        assert _sign_in(client, {"token": _guess(n)}).status_code == 401
        assert _ping(client, _guess(100 + n)).status_code == 401
    assert _sign_in(client, {"token": boot.token}).status_code == 429
    assert _ping(client, boot.token).status_code == 429


# -- settings -----------------------------------------------------------------------------
def test_the_limit_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert failure_limit() == FailureLimit()
    monkeypatch.setenv(FAILED_ATTEMPTS_VARIABLE, "3")
    monkeypatch.setenv(FAILED_ATTEMPTS_WINDOW_VARIABLE, "2.5")
    monkeypatch.setenv(TRUSTED_PROXIES_VARIABLE, "10.0.0.0/8, 127.0.0.1,fd00::/8")
    assert failure_limit() == FailureLimit(
        max_failures=3, window=timedelta(seconds=2.5),
        trusted_proxies=(ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("127.0.0.1"),
                         ipaddress.ip_network("fd00::/8")),
    )
    monkeypatch.setenv(FAILED_ATTEMPTS_VARIABLE, "0")
    assert failure_limit().max_failures == 0


@pytest.mark.parametrize(("variable", "value"), [
    (FAILED_ATTEMPTS_VARIABLE, "-1"),
    (FAILED_ATTEMPTS_VARIABLE, "ten"),
    (FAILED_ATTEMPTS_VARIABLE, "2.5"),
    (FAILED_ATTEMPTS_WINDOW_VARIABLE, "0"),
    (FAILED_ATTEMPTS_WINDOW_VARIABLE, "nan"),
    (FAILED_ATTEMPTS_WINDOW_VARIABLE, "1e300"),
    (FAILED_ATTEMPTS_WINDOW_VARIABLE, "a minute"),
    (TRUSTED_PROXIES_VARIABLE, "10.0.0.0/8,proxy.example.com"),
])
def test_a_bad_setting_is_refused_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(InvalidValue, match=variable):
        failure_limit()


def test_open_governance_applies_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAILED_ATTEMPTS_VARIABLE, "4")
    with open_governance(":memory:") as governance:
        assert governance.caches.failed_attempts.limit.max_failures == 4
