"""Sessions and users in the console: the REST write that names them, the API's run view that
does not show them, the runs list's filters, the run header's links and the sessions page's
figures against the runs they add up.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import falcon.testing
import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from governance_http.console import sessions as sessions_module
from governance_http.money import format_money
from tests.console.support import Visitor
from tests.storage.parties_world import NOW, PartiesWorld, build, expected_sessions

RUN_LINK = re.compile(r'href="/runs/([0-9a-z]{32})"')


@pytest.fixture
def gov() -> Iterator[Governance]:
    governance = Governance(MemoryStore(), clock=FixedClock(NOW),
                            config=Config(cipher=PlaintextForTests()))
    yield governance
    governance.close()


@pytest.fixture
def client(gov: Governance) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(gov))


@pytest.fixture
def world(gov: Governance) -> PartiesWorld:
    return build(gov)


@pytest.fixture
def visitor(client: falcon.testing.TestClient, gov: Governance, world: PartiesWorld) -> Visitor:
    browser = Visitor(client)
    assert browser.sign_in(world.token).status_code == 303
    return browser


def _text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup)).strip()


def session_rows(page: str) -> list[dict[str, Any]]:
    """The sessions table's rows: each cell's text by its label, and the links of its cells."""
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", page, re.S)[1:]:
        cells = dict(re.findall(r'<td data-label="([^"]+)"[^>]*>(.*?)</td>', row, re.S))
        rows.append({
            **{label: _text(cell) for label, cell in cells.items()},
            "links": {label: [html.unescape(link) for link in re.findall(r'href="([^"]+)"', cell)]
                      for label, cell in cells.items()},
        })
    return rows


def listed_runs(visitor: Visitor, link: str) -> tuple[list[str], int]:
    """The runs a runs-list address shows over all its pages, and the total it names."""
    parts = urlsplit(link)
    query = {name: values[0] for name, values in parse_qs(parts.query).items()}
    shown: list[str] = []
    offset = 0
    while True:
        page = visitor.get(parts.path, **query, offset=offset)
        assert page.status_code == 200, page.text
        found = RUN_LINK.findall(page.text)
        shown += found
        counted = re.search(r"([\d,]+) runs</span>", page.text)
        assert counted is not None, page.text
        total = int(counted.group(1).replace(",", ""))
        offset += 25
        if offset >= total:
            return shown, total


# -- the interface -------------------------------------------------------------------------
def _api(client: falcon.testing.TestClient, token: str, method: str, path: str,
         body: dict[str, Any] | None = None) -> dict[str, Any]:
    result = client.simulate_request(
        method, f"/api/v1{path}", headers={"Authorization": f"Bearer {token}"},
        body=None if body is None else json.dumps(body),
    )
    assert result.status_code == 200, result.text
    answer: dict[str, Any] = result.json
    return answer


def test_a_rest_span_names_them_and_the_api_run_view_keeps_its_shape(
    client: falcon.testing.TestClient, gov: Governance
) -> None:
    token = gov.bootstrap().token
    agent = _api(client, token, "POST", "/agent", {"name": "chat"})["details"]["id"]
    runs = [
        _api(client, token, "POST", "/agent_instance/register", {
            "agent_id": agent, "agent_version": {"external_identifier": "1"}})["details"]["id"]
        for _ in range(2)
    ]
    _api(client, token, "POST", "/agent_spans", {
        "agent_instance_id": runs[0], "schema_name": "chat", "status": "complete",
        "payload": {"conversation_id": "conv-9", "user_id": "ann", "text": "hi"},
    })
    _api(client, token, "POST", "/agent_spans", {
        "agent_instance_id": runs[0], "schema_name": "chat", "status": "complete",
        "payload": {"session_id": "conv-10", "user_id": "bob"},
    })
    _api(client, token, "POST", "/agent_spans", {
        "agent_instance_id": runs[1], "schema_name": "chat", "status": "complete",
        "payload": {"text": "no session"},
    })
    stored = gov.store.get("agent_instances", runs[0])
    assert stored is not None and (stored["session_id"], stored["user_id"]) == ("conv-9", "ann")
    named, plain = (_api(client, token, "GET", f"/agent_instance/{run}")["details"]
                    for run in runs)
    listed = _api(client, token, "GET", "/agent_instance")["summaries"]
    exported = client.simulate_get(f"/api/v1/agent_instance/{runs[0]}/export.jsonl",
                                   headers={"Authorization": f"Bearer {token}"})
    first_line = json.loads(exported.text.splitlines()[0])
    assert set(named) == set(plain) == {key for row in listed for key in row}
    for view in (named, *listed, first_line):
        assert not {"session_id", "user_id"} & set(view), view


# -- the runs list and a run's header ----------------------------------------------------
@pytest.mark.parametrize(("parameter", "field"), [("session", "session_id"), ("user", "user_id")])
def test_the_runs_list_filters_by_session_and_user(
    visitor: Visitor, world: PartiesWorld, parameter: str, field: str
) -> None:
    values = {getattr(run, field) for run in world.runs} - {None}
    for value in sorted(values):
        wanted = {run.run_id for run in world.runs if getattr(run, field) == value}
        shown, total = listed_runs(visitor, f"/runs?{parameter}={value}")
        assert set(shown) == wanted and total == len(wanted) == len(shown)
        form = visitor.get("/runs", **{parameter: value}).text
        assert f'name="{parameter}" value="{html.escape(value)}"' in form
    assert listed_runs(visitor, f"/runs?{parameter}=nobody") == ([], 0)
    refused = visitor.get("/runs", **{parameter: "x" * 201})
    assert refused.status_code == 400
    assert f"Cannot filter runs by {parameter}: at most 200 characters" in refused.text


def test_a_run_header_links_its_session_and_user(visitor: Visitor, world: PartiesWorld) -> None:
    named = next(run for run in world.runs if run.session_id == "chat-<e>" and run.user_id)
    page = visitor.get(f"/runs/{named.run_id}").text
    assert ('<a href="/runs?session=chat-%3Ce%3E" title="The runs of this session">'
            "chat-&lt;e&gt;</a>") in page
    assert f'<a href="/runs?user={named.user_id}"' in page
    live = visitor.get(f"/runs/{named.run_id}/live").text
    assert "chat-&lt;e&gt;" in live
    plain = next(run for run in world.runs if run.session_id is None)
    header = visitor.get(f"/runs/{plain.run_id}").text
    facts = header[header.index("<dt>Session</dt>"):header.index("<dt>User</dt>")]
    assert "href" not in facts and "—" in facts


# -- the sessions page ---------------------------------------------------------------------
@pytest.mark.parametrize("days", [1, 7, 30])
def test_the_sessions_page_adds_up_their_runs(
    visitor: Visitor, world: PartiesWorld, days: int
) -> None:
    expected = expected_sessions(world, NOW - timedelta(days=days))
    page = visitor.get("/sessions", **({} if days == 7 else {"window": days}))
    assert page.status_code == 200
    rows = session_rows(page.text)
    assert [row["Session"] for row in rows] == sorted(
        expected, key=lambda name: (max(expected[name]["starts"]).date(),
                                    expected[name]["runs"], [-ord(c) for c in name]),
        reverse=True)
    since = {1: "24h", 7: "7d", 30: "30d"}[days]
    for row in rows:
        entry = expected[row["Session"]]
        assert row["Runs"] == str(entry["runs"]) and row["Failed"] == str(entry["failed"])
        assert row["First run"] == min(entry["starts"]).date().isoformat()
        assert row["Last run"] == max(entry["starts"]).date().isoformat()
        assert row["Cost"] == (format_money(entry["cost"]) if entry["cost"] is not None else "—")
        assert sorted(row["Users"].split(", ")) == sorted(entry["users"]) or (
            not entry["users"] and row["Users"] == "—")
        # The session's link lists exactly the runs counted here.
        [link] = row["links"]["Session"]
        assert parse_qs(urlsplit(link).query) == {"session": [row["Session"]], "since": [since]}
        shown, total = listed_runs(visitor, link)
        assert total == entry["runs"] == len(shown)
        for user_link in row["links"]["Users"]:
            assert parse_qs(urlsplit(user_link).query)["user"][0] in entry["users"]
    assert f"{len(expected)} sessions" in page.text or f"{len(expected)} session<" in page.text


def test_the_sessions_page_keeps_to_the_account_pages_and_names_a_bad_window(
    visitor: Visitor, world: PartiesWorld, monkeypatch: pytest.MonkeyPatch,
    client: falcon.testing.TestClient,
) -> None:
    # The other account's runs use the same session ids; none of them counts here.
    other_token = world.other.call("api_tokens/create", {"token_scope": "account"})["token"]
    other = Visitor(client)
    assert other.sign_in(other_token).status_code == 303
    theirs = {row["Session"]: row["Runs"] for row in session_rows(
        other.get("/sessions", window=90).text)}
    ours = {row["Session"]: row["Runs"] for row in session_rows(
        visitor.get("/sessions", window=90).text)}
    assert theirs and theirs != ours
    assert sum(map(int, ours.values())) == sum(
        entry["runs"] for entry in expected_sessions(world, NOW - timedelta(days=90)).values())
    refused = visitor.get("/sessions", window=14)
    assert refused.status_code == 400
    assert "Cannot show sessions for window: one of 1, 7, 30, 90 (days)" in refused.text
    assert session_rows(refused.text) == session_rows(visitor.get("/sessions").text)

    expected = expected_sessions(world, NOW - timedelta(days=30))
    assert len(expected) > 4
    whole = [row["Session"] for row in session_rows(visitor.get("/sessions", window=30).text)]
    monkeypatch.setattr(sessions_module, "PAGE_SIZE", 3)
    seen: list[str] = []
    page = visitor.get("/sessions", window=30).text
    while True:
        seen += [row["Session"] for row in session_rows(page)]
        following = re.search(r'<a href="(/sessions\?[^"]+)">Next \u203a</a>', page)
        if following is None:
            break
        page = visitor.get(html.unescape(following.group(1))).text
    assert seen == whole and sorted(seen) == sorted(expected)
    assert f"4\u20136 of {len(expected)} sessions" in visitor.get(
        "/sessions", window=30, offset=3).text


def test_the_sessions_page_without_sessions_and_its_navigation(
    visitor: Visitor, client: falcon.testing.TestClient, gov: Governance
) -> None:
    page = visitor.get("/sessions").text
    assert '<a href="/sessions" aria-current="page">Sessions</a>' in page
    empty = Visitor(client)
    assert empty.sign_in(gov.bootstrap().token).status_code == 303
    answer = empty.get("/sessions")
    assert answer.status_code == 200
    assert "No runs started in this window name a session." in answer.text
    assert "0 sessions" in answer.text
    assert Visitor(client).get("/sessions").status_code == 303  # signed out: to sign in

