"""The runs list's filters and sorts, page by page, against orders computed from the API's runs.

The history of :mod:`tests.console.test_trends` (40 runs over nine days) is listed with each
filter and each sort, both ways; the ids the pages list, in order and across pages, must be
those the API's runs give when filtered and sorted here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import falcon.testing
import pytest

from governance_core.clock import parse_timestamp
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.console.support import Visitor
from tests.console.test_browser import (  # noqa: F401  (browser and shots are fixtures)
    assert_accessible,
    browser,
    shots,
)
from tests.console.test_trends import (  # noqa: F401  (the served history's fixtures)
    NOW,
    Clock,
    History,
    build_history,
    every,
    history_page,
    run_score,
    served_history,
)
from tests.http.server import Served

RISK_RANK = {"low": 0, "medium": 1, "high": 2, "critical": 3}
ROW = re.compile(r'<tr>\s*<td[^>]*><a href="/runs/([0-9a-z]+)">')


@pytest.fixture(scope="module")
def listed() -> Iterator[tuple[Visitor, History, list[dict[str, Any]]]]:
    clock = Clock()
    gov = Governance(MemoryStore(), clock=clock, config=Config(cipher=PlaintextForTests()))
    history = build_history(gov, clock, NOW, runs=60)
    visitor = Visitor(falcon.testing.TestClient(create_app(gov)))
    assert visitor.sign_in(history.token).status_code == 303
    yield visitor, history, every(history.session, "agent_instances/list")
    gov.close()


def _ids(visitor: Visitor, **params: Any) -> tuple[list[str], int]:
    """Every run id the list shows for ``params``, following its pages, and its total."""
    ids: list[str] = []
    offset = 0
    while True:
        text = visitor.get("/runs", **params, offset=offset).text
        page = ROW.findall(text)
        ids += page
        total = int(re.search(r"([\d,]+) runs</span>", text).group(1).replace(",", ""))  # type: ignore[union-attr]
        offset += 25
        if offset >= total:
            return ids, total


def _duration(run: dict[str, Any]) -> int | None:
    if not run["started_at"] or not run["finished_at"]:
        return None
    took = parse_timestamp(run["finished_at"]) - parse_timestamp(run["started_at"])
    return max(0, took // timedelta(milliseconds=1))


def _cost(run: dict[str, Any]) -> Decimal | None:
    breakdown = run["cost_breakdown"]
    if not breakdown or breakdown["total_cost"] is None:
        return None
    return Decimal(str(breakdown["total_cost"]))


def _risk(run: dict[str, Any]) -> int | None:
    level = (run["risk_score"] or {}).get("risk_level")
    return None if level is None else RISK_RANK[level]


SORTS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "started_at": lambda run: run["started_at"],
    "duration": _duration,
    "cost": _cost,
    "spans": lambda run: run["span_counts"]["total"],
    "risk": _risk,
}


def _nulls_last(
    runs: list[dict[str, Any]], key: Callable[[dict[str, Any]], Any], descending: bool
) -> list[dict[str, Any]]:
    """Stable: the runs with a value by it either way, then the runs without one."""
    present = sorted((run for run in runs if key(run) is not None), key=key, reverse=descending)
    return present + [run for run in runs if key(run) is None]


def _ordered(runs: list[dict[str, Any]], sort: str, descending: bool) -> list[str]:
    """Ids in the list's order: by the sorted value (missing values last), then the newest
    start first (runs not started last), then the id."""
    ordered = sorted(runs, key=lambda run: run["id"])
    if sort != "started_at":
        ordered = _nulls_last(ordered, SORTS["started_at"], descending=True)
    return [run["id"] for run in _nulls_last(ordered, SORTS[sort], descending)]


@pytest.mark.parametrize("sort", list(SORTS))
@pytest.mark.parametrize("descending", [True, False])
def test_every_sort_lists_every_run_in_order_across_pages(
    listed: tuple[Visitor, History, list[dict[str, Any]]], sort: str, descending: bool
) -> None:
    visitor, _, runs = listed
    ids, total = _ids(visitor, sort=("-" if descending else "") + sort)
    assert total == len(runs) == 60
    assert ids == _ordered(runs, sort, descending)


def _filters(history: History) -> list[tuple[dict[str, str], Callable[[dict[str, Any]], bool]]]:
    agent, staging = history.agents[1], history.environments[1]
    return [
        ({"agent_id": agent}, lambda run: run["agent_id"] == agent),
        ({"environment_id": staging}, lambda run: run["environment_id"] == staging),
        ({"status": "failed"}, lambda run: run["status"] == "failed"),
        ({"purpose": "live"}, lambda run: run["purpose"] == "live"),
        ({"risk_level": "low"}, lambda run: _risk(run) == 0),
        ({"from": "2026-03-10", "to": "2026-03-12"},
         lambda run: bool(run["started_at"]) and "2026-03-10" <= run["started_at"][:10]
         <= "2026-03-12"),
        ({"from": "2026-03-14"},
         lambda run: bool(run["started_at"]) and run["started_at"][:10] >= "2026-03-14"),
        ({"to": "2026-03-08"},
         lambda run: bool(run["started_at"]) and run["started_at"][:10] <= "2026-03-08"),
        ({"external_id": "ticket-0"},
         lambda run: (run["external_identifier"] or "").startswith("ticket-0")),
        ({"agent_name": "TRIAGE"}, lambda run: run["agent_id"] == agent),
        ({"score_min": "0.5"}, lambda run: (run_score(run) or -1) >= 0.5),
        ({"score_min": "0.2", "score_max": "0.6"},
         lambda run: run_score(run) is not None and 0.2 <= run_score(run) <= 0.6),
        ({"score_max": "1e1"}, lambda run: run_score(run) is not None),
        ({"agent_name": "nobody"}, lambda run: False),
        ({"agent_id": history.agents[0], "agent_name": "triage"}, lambda run: False),
        ({"agent_id": agent, "environment_id": staging, "status": "complete",
          "from": "2026-03-07"},
         lambda run: run["agent_id"] == agent and run["environment_id"] == staging
         and run["status"] == "complete" and run["started_at"][:10] >= "2026-03-07"),
    ]


def test_every_filter_keeps_exactly_its_runs(
    listed: tuple[Visitor, History, list[dict[str, Any]]],
) -> None:
    visitor, history, runs = listed
    for params, keep in _filters(history):
        kept = [run for run in runs if keep(run)]
        for sort in ("-cost", "risk"):
            ids, total = _ids(visitor, **params, sort=sort)
            assert total == len(kept), params
            assert ids == _ordered(kept, sort.lstrip("-"), sort.startswith("-")), (params, sort)
    # The history holds what the filters pick: none of them is trivially empty or full.
    assert 0 < sum(1 for run in runs if run["status"] == "failed") < len(runs)
    assert 0 < sum(1 for run in runs if _risk(run) is not None) < len(runs)
    assert 0 < sum(1 for run in runs if run_score(run) is not None) < len(runs)


@pytest.mark.parametrize(("params", "field"), [
    ({"from": "15/03/2026"}, "from"), ({"to": "2026-02-30"}, "to"),
    ({"from": "2026-03-10", "to": "2026-03-09"}, "to"), ({"status": "done"}, "status"),
    ({"risk_level": "severe"}, "risk_level"), ({"external_id": "x" * 201}, "external_id"),
    ({"score_min": "high"}, "score_min"), ({"score_max": "nan"}, "score_max"),
])
def test_a_filter_it_cannot_read_is_named(
    listed: tuple[Visitor, History, list[dict[str, Any]]], params: dict[str, str], field: str
) -> None:
    visitor, _, _ = listed
    result = visitor.get("/runs", **params)
    assert result.status_code == 400
    assert f"Cannot filter runs by {field}:" in result.text
    assert ROW.findall(result.text) == []


def test_filter_and_sort_runs_in_the_browser(
    history_page: Any,  # noqa: F811  (the fixture)
    served_history: tuple[Served, History],  # noqa: F811  (the fixture)
    shots: Path,  # noqa: F811  (the fixture)
) -> None:
    page = history_page
    _, history = served_history
    page.click("nav >> text=Runs")
    page.get_by_label("Agent name has").fill("triage")
    page.get_by_label("Status").select_option("failed")
    page.locator("select[name=sort]").select_option("-cost")
    page.get_by_label("Started from").fill("2000-01-01")
    page.click("button:has-text('Apply')")
    page.wait_for_url("**/runs?*sort=-cost*")
    agent = history.agents[1]
    kept = [run for run in every(history.session, "agent_instances/list")
            if run["agent_id"] == agent and run["status"] == "failed"]
    shown = page.eval_on_selector_all(
        "table.runs tbody tr td:first-child a",
        "links => links.map(link => link.getAttribute('href').slice(6))",
    )
    assert kept and shown == _ordered(kept, "cost", descending=True)
    assert page.get_by_label("Agent name has").input_value() == "triage"
    assert_accessible(page, "filtered runs")
    page.screenshot(path=shots / "runs.png", full_page=True)
