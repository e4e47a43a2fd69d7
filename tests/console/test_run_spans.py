"""A run page's span counts, and finding a run's spans by status and type."""

from __future__ import annotations

import re
from typing import Any

import pytest

from governance_core.service import Governance, Session
from governance_http.console import pages
from tests.console.support import Visitor
from tests.console.world import Account

SPAN_ID = re.compile(r'<a href="/runs/[0-9a-z]+/spans/([0-9a-z]+)" data-detail-url')


def tree_span_ids(visitor: Visitor, run_id: str) -> list[str]:
    """Every span the run page's tree shows, its children opened (as a browser would)."""
    found = []
    pending: list[dict[str, Any]] = [{}]
    while pending:
        params = pending.pop()
        offset: int | None = 0
        while offset is not None:
            text = visitor.get(f"/runs/{run_id}/spans", fragment=1, offset=offset, **params).text
            ids = SPAN_ID.findall(text)
            found += ids
            pending += [{"parent": span_id} for span_id in ids]
            more = re.search(r'offset=(\d+)&amp;fragment=1" data-more', text)
            offset = int(more.group(1)) if more else None
    return found


def test_run_header_counts_the_spans_the_tree_shows(signed_in: Visitor, alice: Account) -> None:
    page = signed_in.get(f"/runs/{alice.playground_run_id}").text
    in_tree = tree_span_ids(signed_in, alice.playground_run_id)
    assert len(in_tree) == len(set(in_tree)) == 10
    header = re.search(r'<dd class="span-counts">(.*?)</dd>', page, re.S)
    assert header is not None
    text = re.sub(r"<[^>]+>", "", header.group(1))
    # 8 spans the agent wrote (its span counts), and the quality and alert records the
    # system wrote on the run, which the tree lists too.
    assert text.startswith(f"{len(in_tree)} spans: 8 activity (0 active · 8 complete · 0 failed")
    assert text.endswith("· 2 quality and alert")


def test_risk_table_counts_spans_per_type(signed_in: Visitor, alice: Account) -> None:
    page = signed_in.get(f"/runs/{alice.playground_run_id}").text
    table = page[page.index("<h2>Risk score</h2>"):]
    table = table[:table.index("</table>")]
    assert "<th>Span type</th><th>Spans</th>" in table and "<th>Runs</th>" not in table
    rows = dict(re.findall(r'<tr><td>([^<]+)</td><td class="num">(\d+)</td>', table))
    assert rows == {"decision_letter": "1", "llm": "3", "tool": "1",
                    "tool:credit_bureau_check": "1", "tool:identity_document_verification": "1",
                    "tool:income_verification": "1"}


SCHEMA = {
    "external_identifier": "many-spans",
    "span_type_schemas": [
        {"name": "step", "params_schema": {"type": "object"}},
        {"name": "call", "params_schema": {"type": "object"}},
    ],
}


def run_with_failures(session: Session, agent_id: str) -> tuple[str, dict[str, dict[str, str]]]:
    """A run of 60 spans in two levels, some failed and some active; (run id, span facts)."""
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    facts: dict[str, dict[str, str]] = {}
    parent = None
    for index in range(60):
        kind = "step" if index % 10 == 0 else "call"
        status = "failed" if index % 7 == 3 else "active" if index % 11 == 5 else "complete"
        made = session.details("agent_spans/create", {
            "agent_instance_id": run["id"], "schema_name": kind, "status": status,
            "parent_span_id": None if kind == "step" else parent, "payload": {"n": index},
        })
        if kind == "step":
            parent = made["id"]
        facts[made["id"]] = {"status": status, "type": kind}
    return run["id"], facts


@pytest.fixture
def failing(gov: Governance, alice: Account, monkeypatch: pytest.MonkeyPatch) -> tuple[str, Any]:
    monkeypatch.setattr(pages, "MATCH_PAGE", 4)
    agent = alice.session.details("agents/create", {"name": "failing agent"})
    return run_with_failures(alice.session, agent["id"])


def listed(visitor: Visitor, run_id: str, **params: str) -> tuple[list[str], str]:
    """The span ids a filtered run page lists over all its pages, and its first page."""
    first = visitor.get(f"/runs/{run_id}", **params).text
    ids: list[str] = []
    offset: int | None = 0
    while offset is not None:
        text = visitor.get(f"/runs/{run_id}", offset=offset, **params).text
        table = text[text.index('class="list span-matches"'):text.index("</table>")] if (
            "span-matches" in text) else ""
        ids += re.findall(
            r'<tr class="match"[^>]*>\s*<td><a href="/runs/[0-9a-z]+/spans/([0-9a-z]+)[?"]', table
        )
        more = re.search(r'offset=(\d+)">Next', text)
        offset = int(more.group(1)) if more else None
    return ids, first


@pytest.mark.parametrize("params", [
    {"status": "failed"}, {"status": "active"}, {"type": "step"},
    {"status": "failed", "type": "call"}, {"status": "cancelled"},
])
def test_a_filter_lists_exactly_the_matching_spans(
    signed_in: Visitor, failing: tuple[str, dict[str, dict[str, str]]], params: dict[str, str]
) -> None:
    run_id, facts = failing
    expected = [
        span_id for span_id, fact in facts.items()
        if all(fact[name] == value for name, value in params.items())
    ]
    ids, first = listed(signed_in, run_id, **params)
    assert ids == expected  # in time order, each once, across pages
    assert f"({len(expected)})</h2>" in first
    assert 'id="span-tree"' not in first


def test_the_header_links_to_the_failed_spans(
    signed_in: Visitor, failing: tuple[str, dict[str, dict[str, str]]]
) -> None:
    run_id, facts = failing
    failed = sum(fact["status"] == "failed" for fact in facts.values())
    page = signed_in.get(f"/runs/{run_id}").text
    link = re.search(r'<a class="failed-link" href="([^"]+)">([\d,]+) failed</a>', page)
    assert link is not None and int(link.group(2)) == failed
    assert link.group(1) == f"/runs/{run_id}?status=failed#spans"
    # The filter form offers the run's statuses and types.
    form = page[page.index('class="filters span-filter"'):]
    form = form[:form.index("</form>")]
    assert re.findall(r"<option >(\w+)</option>", form) == [
        "active", "complete", "failed", "cancelled", "call", "step",
    ]


def test_an_unknown_filter_value_shows_the_tree(
    signed_in: Visitor, failing: tuple[str, dict[str, dict[str, str]]]
) -> None:
    run_id, _ = failing
    for params in ({"status": "broken"}, {"type": "nope"}, {"status": ""}):
        page = signed_in.get(f"/runs/{run_id}", **params).text
        assert 'id="span-tree"' in page and "span-matches" not in page
