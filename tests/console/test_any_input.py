"""Any query string or form body at any console route: an answer, never a server error."""

from __future__ import annotations

import re
from urllib.parse import quote

import falcon.testing
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from governance_http.console.pages import routes
from governance_http.console.web import Console
from tests.console.support import CSRF, FORM, Visitor
from tests.console.world import Account, make_account

PARAMETER = re.compile(r"\{(\w+)\}")
NAMES = ["offset", "depth", "limit", "sort", "status", "since", "severity", "parent",
         "risk_level", "fragment", "agent_id", "token", "pointer", "next", "name",
         "csrf_token", "scope", "type", "q"]
VALUES = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["\u00b2", "\u0663", "-1", "1e9", "9" * 5000, "0x10", " 1", "%", "\x00"]),
)
PAIRS = st.lists(st.tuples(st.sampled_from(NAMES) | st.text(max_size=6), VALUES), max_size=4)


World = tuple[falcon.testing.TestClient, Account, str]


@pytest.fixture(scope="module")
def world() -> World:
    gov = Governance(MemoryStore(), config=Config(cipher=PlaintextForTests()))
    alice = make_account(gov, "alice")
    other_token = alice.session.details("api_tokens/create", {"token_scope": "account"})
    return falcon.testing.TestClient(create_app(gov)), alice, other_token["id"]


def _cookie(client: falcon.testing.TestClient, alice: Account) -> str:
    """A new signed-in session (a route drawn before may have signed the last one out)."""
    visitor = Visitor(client)
    assert visitor.sign_in(alice.token).status_code == 303
    return "; ".join(f"{k}={v}" for k, v in visitor.cookies.items())


def _paths(alice: Account, token_id: str) -> list[str]:
    ids = {"agent_id": alice.agent_id, "run_id": alice.markup_run_id,
           "span_id": alice.markup_span_id, "token_id": token_id, "action": "suspend"}
    return [PARAMETER.sub(lambda m: ids.get(m.group(1), "x"), path)
            for path, _ in routes(Console(Governance(MemoryStore())))]


def _encode(pairs: list[tuple[str, str]]) -> str:
    return "&".join(f"{quote(k, safe='')}={quote(v, safe='')}" for k, v in pairs)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data(), pairs=PAIRS, raw=st.booleans())
def test_no_console_route_answers_a_server_error(
    world: World, data: st.DataObject, pairs: list[tuple[str, str]], raw: bool,
) -> None:
    client, alice, token_id = world
    path = data.draw(st.sampled_from(_paths(alice, token_id)))
    cookie = _cookie(client, alice)
    query = _encode(pairs) if not raw else "&".join(f"{k}={v}" for k, v in pairs)
    got = client.simulate_get(path, query_string=query, headers={"Cookie": cookie})
    assert got.status_code < 500, (path, query, got.text[:300])
    page = client.simulate_get("/settings", headers={"Cookie": cookie})
    csrf = CSRF.search(page.text)
    body = _encode([*pairs, ("csrf_token", csrf.group(1) if csrf else "")])
    posted = client.simulate_post(path, body=body, headers={**FORM, "Cookie": cookie})
    assert posted.status_code < 500, (path, body, posted.text[:300])


@pytest.mark.parametrize("offset", ["\u00b2", "\u0663", "9" * 5000])
@pytest.mark.parametrize("page", ["/runs", "/agents", "/alerts", "/settings"])
def test_a_number_parameter_of_any_digits_is_no_server_error(
    world: World, page: str, offset: str
) -> None:
    client, alice, _ = world
    cookie = _cookie(client, alice)
    got = client.simulate_get(page, query_string=f"offset={quote(offset)}",
                              headers={"Cookie": cookie})
    assert got.status_code == 200


def test_a_span_list_with_any_depth_or_offset_is_no_server_error(
    world: World,
) -> None:
    client, alice, _ = world
    cookie = _cookie(client, alice)
    for query in ("depth=%C2%B2", "offset=%C2%B2", "offset=" + "9" * 5000):
        got = client.simulate_get(f"/runs/{alice.markup_run_id}/spans", query_string=query,
                                  headers={"Cookie": cookie})
        assert got.status_code == 200, query
