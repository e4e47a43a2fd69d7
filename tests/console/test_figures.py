"""Figures over many runs: the overview's plots and counts, and the runs list's risk filter.

Each is checked against what the runs themselves say (every page of the runs list: each run's
``cost_breakdown.total_cost`` and ``risk_score.risk_level``), with more runs than the console
ever read in one scan, so a figure computed from a capped scan shows up as wrong.
"""

from __future__ import annotations

import html
import re
from collections import Counter, defaultdict
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import pytest

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.domain.insights import run_totals
from governance_core.repository import Filter
from governance_core.service import Governance, Session
from governance_http.console import pages, web
from governance_http.money import format_money
from tests.console.support import Visitor
from tests.console.world import Account

SCHEMA = {
    "external_identifier": "figures",
    "span_type_schemas": [
        {"name": "plain", "params_schema": {"type": "object"}},
        {"name": "lookup", "params_schema": {"type": "object"}, "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"personal_identifiers": "included"},
        }},
        {"name": "payment", "params_schema": {"type": "object"}, "data_risk": {
            "action_profile": {"financial_transactions": "allowed"},
            "params_data_categories": {
                "financial_information": "included", "classification": "restricted",
            },
        }},
    ],
}
CAP = 6
"""The old scan's cap (and half of it its page), set low so a handful of runs goes past it."""


def _spans(index: int) -> list[tuple[str, int]]:
    """The spans of run ``index``: (type, input tokens), so runs differ in cost and risk."""
    kinds = ["plain"] + ["lookup"] * (index % 3) + ["payment"] * (index % 5 == 0) * (index % 4)
    return [(kind, 100 * (index + 1) + 7 * number) for number, kind in enumerate(kinds)]


def make_runs(gov: Governance, session: Session, count: int) -> str:
    """``count`` runs of a new agent, started over the last 7 days (newest first by index)."""
    agent = session.details("agents/create", {"name": "figures agent"})
    now = gov.clock()
    first_day = datetime.combine((now - timedelta(days=6)).date(), time(1), tzinfo=UTC)
    latest = max(now - timedelta(minutes=1), datetime.combine(now.date(), time(0), tzinfo=UTC))
    spread = latest - first_day
    for index in range(count):
        run = session.details("agent_instances/register", {
            "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
            "agent_schema_version": SCHEMA,
        })
        # From a minute ago back to 01:00 on the first of the 7 days the overview plots,
        # whatever the time of day: every plotted day has runs.
        started = latest - spread * index / max(1, count - 1)
        for number, (kind, tokens) in enumerate(_spans(index)):
            session.details("agent_spans/create", {
                "agent_instance_id": run["id"], "schema_name": kind, "status": "complete",
                "started_at": format_timestamp(started + timedelta(seconds=number)),
                "payload": {"model": "gpt-4o-mini"},
                "result_payload": {"usage": {"input_tokens": tokens, "output_tokens": 9}},
            })
    return str(agent["id"])


def every_run(session: Session, **filters: Any) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = session.call("agent_instances/list", {
            **filters, "pagination[offset]": offset, "pagination[page_size]": 100,
        })
        runs += page["summaries"]
        offset = page["pagination"]["next_page_offset"]
    return runs


def shown(text: str) -> Decimal:
    """The amount a money text reads as."""
    return Decimal(text.removeprefix("$").replace(",", ""))


def bars(page: str, title: str) -> dict[str, str]:
    """A chart's bar labels and values, by its accessible title."""
    chart = page[page.index(f'aria-label="{title}"'):]
    chart = chart[:chart.index("</svg>")]
    return dict(re.findall(r"<rect [^>]*><title>([^<]*): ([^<]*)</title>", html.unescape(chart)))


@pytest.fixture
def many(gov: Governance, alice: Account, monkeypatch: pytest.MonkeyPatch) -> Account:
    monkeypatch.setattr(web, "SCAN_LIMIT", CAP)
    monkeypatch.setattr(web, "SCAN_PAGE", CAP // 2)
    make_runs(gov, alice.session, 4 * CAP)
    return alice


def test_overview_plots_cost_and_risk_of_every_run(signed_in: Visitor, many: Account) -> None:
    runs = every_run(many.session)
    assert len(runs) > 3 * CAP
    cost: dict[str, Decimal] = defaultdict(Decimal)
    levels: dict[str, Counter[str]] = defaultdict(Counter)
    for run in runs:
        if not run["started_at"]:
            continue
        day = parse_timestamp(run["started_at"]).strftime("%a %d")
        total = (run["cost_breakdown"] or {}).get("total_cost")
        if total is not None:
            cost[day] += Decimal(str(total))
        level = (run["risk_score"] or {}).get("risk_level")
        if level is not None:
            levels[day][level] += 1
    page = signed_in.get("/").text
    plotted = bars(page, "Estimated cost per day over the last 7 days")
    assert len(cost) >= 6
    assert plotted.keys() == cost.keys()
    for day, amount in cost.items():
        # Each run's cost is kept as a double: the sum agrees with the exact one to about 15
        # digits, so the text shown is the exact sum's, or one a rounding half away from it.
        assert shown(plotted[day]) == shown(format_money(amount)) or abs(
            shown(plotted[day]) - amount
        ) <= amount * Decimal("0.0005") * (1 + Decimal("1e-9")), (day, plotted[day], amount)
    risk = bars(page, "Runs per day by risk level over the last 7 days")
    assert risk == {
        f"{day} {level}": str(count)
        for day, counts in levels.items() for level, count in counts.items()
    }


def test_overview_counts_runs_by_status(signed_in: Visitor, many: Account) -> None:
    runs = every_run(many.session)
    week = Counter(run["status"] for run in runs if run["started_at"])
    page = signed_in.get("/").text
    card = page[page.index("Last 7 days"):]
    card = card[:card.index("</div>")]
    assert re.search(r'<p class="big">([\d,]+)</p>', card).group(1) == f"{sum(week.values()):,}"  # type: ignore[union-attr]
    shown = dict(re.findall(r"status-(\w+)[^>]*>[^<]*</span> ([\d,]+)</a>", card))
    assert {status: int(count) for status, count in shown.items() if int(count)} == dict(week)


@pytest.mark.parametrize("level", ["low", "medium", "high", "critical"])
def test_risk_filter_lists_every_run_of_the_level(
    signed_in: Visitor, many: Account, level: str
) -> None:
    expected = {
        run["id"] for run in every_run(many.session)
        if (run["risk_score"] or {}).get("risk_level") == level
    }
    found: set[str] = set()
    offset = 0
    while True:
        page = signed_in.get("/runs", risk_level=level, offset=offset).text
        found |= set(re.findall(r'<td[^>]*><a href="/runs/([0-9a-z]+)">', page))
        if f"offset={offset + pages.PAGE_SIZE}" not in page:
            break
        offset += pages.PAGE_SIZE
    assert found == expected
    if expected:
        assert f"{len(expected):,} run" in page


def test_run_totals_agree_with_the_runs_after_ruleset_and_profile_changes(
    gov: Governance, alice: Account
) -> None:
    session = alice.session
    agent_id = make_runs(gov, session, 12)

    def check() -> None:
        runs = every_run(session, agent_id=agent_id)
        ctx = gov.context(session.principal)
        by_level = Counter((run["risk_score"] or {}).get("risk_level") for run in runs)
        totals = run_totals(ctx, ["risk_level"], filters=[Filter("agent_id", "eq", agent_id)])
        assert {row["risk_level"]: row["runs"] for row in totals} == by_level
        cost = sum(Decimal(str(run["cost_breakdown"]["total_cost"])) for run in runs)
        assert abs(sum(row["total_cost"] for row in totals) - cost) <= cost * Decimal("1e-12")
        for run in runs:
            stored = gov.store.get("agent_instances", run["id"])
            assert stored is not None
            assert stored.get("risk_level") == (run["risk_score"] or {}).get("risk_level")
            total = (run["cost_breakdown"] or {}).get("total_cost")
            assert stored.get("total_cost") == (None if total is None else float(total))

    check()
    default = next(profile for profile in session.call("risk_profiles/list")["summaries"]
                   if profile["is_default"])
    strict = {**default["ruleset"], "thresholds": {"medium": 1, "high": 2, "critical": 3}}
    session.call("risk_profiles/update", {"risk_profile_id": default["id"], "ruleset": strict})
    check()
    lenient = session.details("risk_profiles/create", {
        "name": "lenient",
        "ruleset": {**default["ruleset"],
                    "thresholds": {"medium": 500, "high": 1000, "critical": 2000}},
    })
    session.call("agents/update", {"agent_id": agent_id, "risk_profile_id": lenient["id"]})
    check()
    session.call("risk_profiles/update", {"risk_profile_id": lenient["id"], "ruleset": strict})
    check()
