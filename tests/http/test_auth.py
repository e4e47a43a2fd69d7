"""The bearer header: extraction, and the core's answers for missing and bad tokens."""

from __future__ import annotations

import pytest

from governance_core.service import Bootstrap
from tests.http.support import Api, assert_error


def test_no_token_is_not_authenticated(anonymous: Api) -> None:
    assert_error(anonymous.get("/team"), 401, "not_authenticated")
    assert_error(anonymous.get("/team", headers={"Authorization": "  "}), 401, "not_authenticated")


@pytest.mark.parametrize(
    "header",
    ["Basic dXNlcjpwYXNz", "Bearer", "Bearer   ", "Token pf_abc", "pf_abc",
     "Bearer pf_unknown0000000000000000000000000000000", "Bearer not-a-token"],
)
def test_a_bad_token_is_bad_authtoken(anonymous: Api, header: str) -> None:
    assert_error(anonymous.get("/team", headers={"Authorization": header}), 401, "bad_authtoken")


def test_the_scheme_is_case_insensitive(anonymous: Api, boot: Bootstrap) -> None:
    result = anonymous.get("/team", headers={"Authorization": f"bearer {boot.token}"})
    assert result.status_code == 200


def test_ping_answers_without_a_token_and_checks_one_when_sent(
    anonymous: Api, boot: Bootstrap
) -> None:
    assert anonymous.ok("GET", "/ping") == {"status": "success"}
    assert anonymous.ok("GET", "/ping", token=boot.token) == {"status": "success"}
    assert_error(anonymous.get("/ping", token="pf_bogus"), 401, "bad_authtoken")
    assert_error(anonymous.get("/ping", headers={"Authorization": "Basic x"}), 401, "bad_authtoken")
