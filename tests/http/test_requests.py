"""How a request becomes members: query parsing, body forms, path precedence, idempotency keys."""

from __future__ import annotations

import pytest

from governance_core.errors import BadRequest
from governance_core.fields import BODY
from governance_http.body import NO_BODY
from governance_http.params import parse_query
from governance_http.resources import request_members
from tests.http.support import Api, assert_error


def test_query_keys_stay_flat_and_repeat_into_lists() -> None:
    assert parse_query("pagination%5Boffset%5D=5&pagination[page_size]=2&a=1&a=2&a=3") == {
        "pagination[offset]": "5", "pagination[page_size]": "2", "a": ["1", "2", "3"],
    }


def test_query_flags_lists_and_encoding() -> None:
    assert parse_query("redacted&x=&name=a+b%2Fc&ids[]=1&&ids[]=2&one[]=z") == {
        "redacted": "true", "x": "", "name": "a b/c", "ids": ["1", "2"], "one": ["z"],
    }


@pytest.mark.parametrize("query", ["a%ff=1", "x=%c3%28", "a[b=1", "a]=1", "[x]=1", "a[b[c]]=1"])
def test_bad_query_syntax_is_a_bad_request(query: str) -> None:
    with pytest.raises(BadRequest):
        parse_query(query)


def test_bad_query_syntax_answers_400(api: Api) -> None:
    assert_error(api.get("/team", query="pagination[offset=1"), 400, "bad_request")


def test_members_merge_query_body_and_path_with_the_path_winning() -> None:
    members = request_members(
        {"team_id": "T"},
        {"name": "from-query", "q": "1"},
        {"name": "from-body", "team_id": "X", "details": {"team_id": "Y", "title": "t"}},
    )
    assert members == {
        "name": "from-body", "q": "1", "team_id": "T", "details": {"team_id": "T", "title": "t"}
    }


def test_a_non_object_body_is_the_body_member() -> None:
    assert request_members({}, {}, "abc") == {BODY: "abc"}
    assert request_members({}, {}, [1]) == {BODY: [1]}
    assert request_members({}, {}, NO_BODY) == {}


def test_query_members_reach_the_operation(api: Api) -> None:
    for name in ("a", "b", "c"):
        api.ok("POST", "/team", json={"name": name})
    query = "pagination[page_size]=2&pagination[offset]=1&sorting=-name"
    body = api.ok("GET", "/team", query=query)
    assert [row["name"] for row in body["summaries"]] == ["b", "a"]
    assert body["sorting"] == {"direction": "desc", "field": "name", "nulls": "auto"}
    assert body["pagination"]["page_size"] == 2


def test_a_bad_query_member_is_named_in_validation_errors(api: Api) -> None:
    result = api.get("/team", query="pagination[page_size]=1000")
    body = assert_error(result, 422, "validation_errors")
    assert set(body["errors"]) == {"pagination[page_size]"}


def test_a_path_member_cannot_be_redirected_by_the_body(api: Api) -> None:
    first = api.ok("POST", "/team", json={"name": "first"})["details"]["id"]
    second = api.ok("POST", "/team", json={"name": "second"})["details"]["id"]
    redirect = {"details": {"team_id": second, "name": "renamed"}}
    updated = api.ok("PUT", f"/team/{first}", json=redirect)
    assert updated["details"]["id"] == first
    assert api.ok("GET", f"/team/{second}")["details"]["name"] == "second"


@pytest.mark.parametrize("form", ["bare", "details"])
def test_bodies_are_accepted_bare_or_details_wrapped(api: Api, form: str) -> None:
    body = {"name": "Ops"} if form == "bare" else {"details": {"name": "Ops"}}
    assert api.ok("POST", "/team", json=body)["details"]["name"] == "Ops"


@pytest.mark.parametrize("where", ["header", "query", "body", "details"])
def test_an_idempotency_key_replays_from_any_place(api: Api, where: str) -> None:
    key = "key-0123456789"
    kwargs: dict[str, object] = {"json": {"name": "Once"}}
    if where == "header":
        kwargs["headers"] = {"Idempotency-Key": key}
    elif where == "query":
        kwargs["query"] = f"idempotency_key={key}"
    elif where == "body":
        kwargs["json"] = {"name": "Once", "idempotency_key": key}
    else:
        kwargs["json"] = {"details": {"name": "Once", "idempotency_key": key}}
    first = api.ok("POST", "/team", **kwargs)
    again = api.ok("POST", "/team", **kwargs)
    assert again == first
    assert api.ok("GET", "/team")["pagination"]["item_count"] == 1


def test_a_reused_key_with_another_request_is_409(api: Api) -> None:
    headers = {"Idempotency-Key": "key-0123456789"}
    api.ok("POST", "/team", json={"name": "One"}, headers=headers)
    result = api.post("/team", json={"name": "Two"}, headers=headers)
    assert_error(result, 409, "idempotency_key_already_used")


def test_keys_that_disagree_or_are_out_of_bounds_are_named(api: Api) -> None:
    result = api.post(
        "/team", json={"name": "x"}, headers={"Idempotency-Key": "key-aaaaaaaa"},
        query="idempotency_key=key-bbbbbbbb",
    )
    assert set(assert_error(result, 422, "validation_errors")["errors"]) == {"idempotency_key"}
    short = api.post("/team", json={"name": "x"}, headers={"Idempotency-Key": "short"})
    assert set(assert_error(short, 422, "validation_errors")["errors"]) == {"idempotency_key"}
    twice = "idempotency_key=k1234567&idempotency_key=k1234567"
    repeated = api.post("/team", json={"name": "x"}, query=twice)
    assert set(assert_error(repeated, 422, "validation_errors")["errors"]) == {"idempotency_key"}
