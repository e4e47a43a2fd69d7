"""The trends page and its figures, checked against numbers computed here from the API's runs.

A history of runs over nine days (two agents, two environments, every status, durations
from milliseconds to a minute, token usage of three models, one of them unpriced, data risks
and alerts) is written through the core; each figure of :func:`run_trends` and of the page is
then compared with what the runs, alerts and cost breakdowns the API answers add up to.
"""

from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import attrs
import falcon.testing
import pytest

from governance_core.clock import parse_timestamp
from governance_core.context import Config
from governance_core.domain.insights import RunFilter, run_trends
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance, Session
from governance_core.storage import MemoryStore
from governance_http import create_app
from governance_http.console.charts import nice_step, trend_bars, trend_lines
from tests.console.support import Visitor
from tests.console.test_browser import (  # noqa: F401  (browser and shots are fixtures)
    NARROW,
    VIEWPORT,
    assert_accessible,
    browser,
    shots,
)
from tests.http.server import Served
from tests.stores import make_store

NOW = datetime(2026, 3, 15, 18, 0, tzinfo=UTC)
MODELS = ("gpt-4o-mini", "claude-3-5-haiku-20241022", "house-model-unpriced")
SCHEMA = {
    "external_identifier": "history-schema",
    "span_type_schemas": [
        {"name": "llm", "params_schema": {"type": "object"}},
        {"name": "lookup", "params_schema": {"type": "object"}, "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"personal_identifiers": "included"},
        }},
    ],
    "alert_schemas": [{"name": "slow_run", "schema": {"type": "object"}}],
    "quality_schemas": [{"name": "helpfulness", "schema": {"type": "object"}},
                        {"name": "accuracy", "schema": {"type": "object"}}],
}
SEVERITIES = ("critical", "error", "warning", "info")


@attrs.define
class Clock:
    """A clock the test moves."""

    now: datetime = NOW

    def __call__(self) -> datetime:
        return self.now


@attrs.frozen
class History:
    """The account's session, its agents and environments, and the token."""

    session: Session
    token: str
    agents: tuple[str, ...]
    environments: tuple[str, ...]


def build_history(gov: Governance, clock: Clock | None, now: datetime, runs: int = 40) -> History:
    """``runs`` runs over the nine days up to ``now``, written through the core.

    Run ``i`` belongs to agent ``i % 2`` and environment ``(i // 2) % 2``, starts ``i % 9``
    days back, and ends in turn complete, failed, cancelled, terminated, still active or
    (every eleventh) never started; its spans report usage of the models in turn and read
    personal data ``i % 3`` times; every fifth raises an alert.
    """
    boot = gov.bootstrap(account_name="history", admin_email="admin@history.example")
    session = gov.session(boot.token)
    agents = tuple(session.details("agents/create", {"name": name})["id"]
                   for name in ("Billing assistant", "Support triage"))
    default = session.call("environments/list")["summaries"][0]["id"]
    staging = session.details("environments/create", {"name": "Staging"})["id"]
    environments = (default, staging)
    for index in range(runs):
        start = now - timedelta(days=index % 9, minutes=60 + (index * 37) % 300)
        if clock is not None:
            clock.now = start
        run = session.details("agent_instances/register", {
            "agent_id": agents[index % 2], "environment_id": environments[(index // 2) % 2],
            "external_identifier": f"{'order' if index % 3 else 'ticket'}-{index:03d}",
            "agent_version": {"external_identifier": "1"}, "agent_schema_version": SCHEMA,
        })
        if index % 11 == 10:
            continue
        session.details("agent_instances/start", {
            "agent_instance_id": run["id"], "timestamp": start.isoformat(),
        })
        for number in range(index % 4):
            model = MODELS[(index + number) % 3]
            session.details("agent_spans/create", {
                "agent_instance_id": run["id"], "schema_name": "llm", "status": "complete",
                "started_at": (start + timedelta(milliseconds=10 * number)).isoformat(),
                "payload": {"model": model, "prompt": "p"},
                "result_payload": {"usage": {"input_tokens": 100 + 13 * index,
                                             "output_tokens": 7 + number}},
            })
        for number in range(index % 3):
            session.details("agent_spans/create", {
                "agent_instance_id": run["id"], "schema_name": "lookup", "status": "complete",
                "started_at": start.isoformat(), "payload": {"n": number},
            })
        if index % 4 != 3:
            session.details("agent_instances/record_quality", {
                "agent_instance_id": run["id"], "name": "helpfulness",
                "payload": {"score": round((index * 0.37) % 1, 2)},
            })
        if index % 3 == 0:
            # A second score (the run's score is the mean), or a score that is no number.
            score: Any = index % 7 if index % 2 else "good"
            session.details("agent_instances/record_quality", {
                "agent_instance_id": run["id"], "name": "accuracy", "payload": {"score": score},
            })
        if index % 5 == 0:
            session.call("alerts/raise", {
                "agent_instance_id": run["id"], "name": "slow_run",
                "severity": SEVERITIES[(index // 5) % 4], "payload": {},
                "raised_at": (start + timedelta(seconds=1)).isoformat(),
            })
        finish = start + timedelta(milliseconds=(index * 7919) % 60_000 + index % 2)
        ending = index % 5
        if ending == 3:
            if clock is not None:
                clock.now = finish
            session.details("agent_instances/terminate", {
                "agent_instance_id": run["id"], "reason": "stopped by the test",
            })
        elif ending != 4:
            session.details("agent_instances/finish", {
                "agent_instance_id": run["id"], "timestamp": finish.isoformat(),
                "status": ("complete", "failed", "cancelled")[ending],
            })
    if clock is not None:
        clock.now = now
    return History(session, boot.token, agents, environments)


def every(session: Session, operation: str, **params: Any) -> list[dict[str, Any]]:
    """Every row of a list operation, page by page."""
    rows: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = session.call(operation, {**params, "pagination[offset]": offset,
                                        "pagination[page_size]": 100})
        rows += page["summaries"]
        offset = page["pagination"]["next_page_offset"]
    return rows


def nearest_rank(values: list[int], share: float) -> int | None:
    """The exact nearest-rank percentile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[max(1, math.ceil(share * len(ordered))) - 1]


def expected_days(
    history: History, first: date, last: date, keep: Callable[[dict[str, Any]], bool]
) -> dict[str, dict[str, Any]]:
    """The figures per day, added up here from the API's runs and alerts."""
    days: dict[str, dict[str, Any]] = {}
    day = first
    while day <= last:
        days[day.isoformat()] = {
            "statuses": Counter(), "durations": [], "risk": Counter(), "alerts": Counter(),
            "models": defaultdict(lambda: {"input": 0, "output": 0, "cost": None}),
            "total_cost": None, "quality": defaultdict(list),
        }
        day += timedelta(days=1)
    for run in every(history.session, "agent_instances/list"):
        if not run["started_at"] or not keep(run) or run["started_at"][:10] not in days:
            continue
        entry = days[run["started_at"][:10]]
        entry["statuses"][run["status"]] += 1
        if run["finished_at"]:
            took = parse_timestamp(run["finished_at"]) - parse_timestamp(run["started_at"])
            entry["durations"].append(took // timedelta(milliseconds=1))
        if run["risk_score"] and run["risk_score"]["risk_level"]:
            entry["risk"][run["risk_score"]["risk_level"]] += 1
        score = run_score(run)
        if score is not None:
            entry["quality"][run["agent_id"]].append(score)
        breakdown = run["cost_breakdown"]
        if breakdown and breakdown["total_cost"] is not None:
            entry["total_cost"] = (entry["total_cost"] or Decimal(0)) + Decimal(
                str(breakdown["total_cost"]))
        for group in (breakdown or {}).get("groups", []):
            usage = entry["models"][group["model_name"]]
            usage["input"] += group["input"]
            usage["output"] += group["output"]
            if group["total_cost"] is not None:
                usage["cost"] = (usage["cost"] or Decimal(0)) + Decimal(str(group["total_cost"]))
    runs = {run["id"]: run for run in every(history.session, "agent_instances/list")}
    for alert in every(history.session, "alerts/list"):
        run = runs[alert["agent_instance_id"]]
        if keep(run) and alert["raised_at"][:10] in days:
            days[alert["raised_at"][:10]]["alerts"][alert["severity"]] += 1
    return days


def run_score(run: dict[str, Any]) -> float | None:
    """The mean of the run's numeric quality ``score`` members, as the API shows them."""
    scores = [
        payload["score"] for payload in run["quality_payloads"].values()
        if isinstance(payload.get("score"), int | float) and not isinstance(payload["score"], bool)
    ]
    return sum(scores) / len(scores) if scores else None


def _close(got: Decimal | None, want: Decimal | None) -> bool:
    """Equal, but for the float sums the store adds (far below a millionth of a cent)."""
    if got is None or want is None:
        return got is want
    return abs(got - want) < Decimal("1e-9")


def check_trends(got: dict[str, Any], want: dict[str, dict[str, Any]]) -> None:
    """Every figure of ``run_trends`` against the figures added up from the API."""
    assert [day["day"] for day in got["days"]] == list(want)
    for day in got["days"]:
        expected = want[day["day"]]
        assert day["statuses"] == dict(expected["statuses"]), day["day"]
        assert day["runs"] == sum(expected["statuses"].values())
        finished = sum(expected["statuses"][s]
                       for s in ("complete", "failed", "cancelled", "terminated"))
        rate = expected["statuses"]["failed"] / finished if finished else None
        assert day["error_rate"] == rate
        for name, share in (("p50_ms", 0.5), ("p95_ms", 0.95)):
            exact = nearest_rank(expected["durations"], share)
            if exact is None:
                assert day[name] is None
            else:
                assert exact <= day[name] <= max(1, exact) * 1.02, (day["day"], name, exact)
        assert _close(day["total_cost"], expected["total_cost"])
        assert day["risk"] == dict(expected["risk"])
        assert day["alerts"] == dict(expected["alerts"])
        assert set(day["quality"]) == set(expected["quality"])
        for agent, scores in expected["quality"].items():
            assert day["quality"][agent]["runs"] == len(scores)
            assert abs(day["quality"][agent]["mean"] - sum(scores) / len(scores)) < 1e-9
        assert set(day["models"]) == set(expected["models"])
        for model, usage in day["models"].items():
            assert usage["input"] == expected["models"][model]["input"]
            assert usage["output"] == expected["models"][model]["output"]
            assert _close(usage["cost"], expected["models"][model]["cost"]), model


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def history_gov(request: pytest.FixtureRequest) -> Iterator[tuple[Governance, Clock]]:
    """A store of each kind (PostgreSQL with ``GOVERNANCE_TEST_POSTGRES_URL``, else skipped)."""
    clock = Clock()
    gov = Governance(make_store(request.param), clock=clock,
                     config=Config(cipher=PlaintextForTests()))
    yield gov, clock
    gov.close()


def test_run_trends_add_up_to_the_apis_runs(history_gov: tuple[Governance, Clock]) -> None:
    gov, clock = history_gov
    history = build_history(gov, clock, NOW)
    ctx = gov.context(history.session.principal)
    first, last = date(2026, 3, 1), date(2026, 3, 15)
    check_trends(run_trends(ctx, first, last), expected_days(history, first, last,
                                                             lambda run: True))
    agent, staging = history.agents[1], history.environments[1]
    chosen = RunFilter(agent_ids=(agent,), environment_id=staging)
    check_trends(run_trends(ctx, first, last, chosen), expected_days(
        history, first, last,
        lambda run: run["agent_id"] == agent and run["environment_id"] == staging,
    ))
    # The window bounds the days: the oldest runs fall outside a window starting later.
    later = date(2026, 3, 12)
    check_trends(run_trends(ctx, later, last), expected_days(history, later, last,
                                                             lambda run: True))


def test_model_rows_follow_a_span_whose_usage_changes(
    history_gov: tuple[Governance, Clock],
) -> None:
    gov, _ = history_gov
    history = build_history(gov, None, NOW, runs=0)
    session = history.session
    run = session.details("agent_instances/register", {
        "agent_id": history.agents[0], "agent_version": {"external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    span = session.details("agent_spans/create", {
        "agent_instance_id": run["id"], "schema_name": "llm", "status": "active",
        "payload": {"model": "gpt-4o-mini"},
        "result_payload": {"usage": {"input_tokens": 1000, "output_tokens": 10}},
    })
    # Finished with another model's usage: the first model's row goes, the second's comes.
    session.details("agent_spans/finish", {
        "agent_span_id": span["id"], "status": "complete",
        "result_payload": {"model": "claude-3-5-haiku-20241022",
                           "usage": {"input_tokens": 500, "output_tokens": 50}},
    })
    stored = session.details("agent_instances/show", {"agent_instance_id": run["id"]})
    rows = gov.store.query("run_models")
    assert [(row["model_name"], row["input_tokens"], row["output_tokens"]) for row in rows] == [
        (group["model_name"], group["input"], group["output"])
        for group in stored["cost_breakdown"]["groups"]
    ]
    assert rows[0]["started_day"] == stored["started_at"][:10]
    assert Decimal(repr(rows[0]["cost"])) == Decimal(str(stored["cost_breakdown"]["total_cost"]))


def test_a_finished_run_keeps_its_duration(history_gov: tuple[Governance, Clock]) -> None:
    gov, _ = history_gov
    history = build_history(gov, None, NOW, runs=0)
    run = history.session.details("agent_instances/register", {
        "agent_id": history.agents[0], "agent_version": {"external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    history.session.details("agent_instances/start", {
        "agent_instance_id": run["id"], "timestamp": "2026-03-15T10:00:00Z"})
    assert gov.store.get("agent_instances", run["id"])["duration_ms"] is None
    history.session.details("agent_instances/finish", {
        "agent_instance_id": run["id"], "timestamp": "2026-03-15T10:00:02.345Z"})
    stored = gov.store.get("agent_instances", run["id"])
    assert stored["duration_ms"] == 2345
    assert 2345 <= 1.02 ** stored["duration_bucket"] <= 2345 * 1.02
    shown = history.session.details("agent_instances/show", {"agent_instance_id": run["id"]})
    assert not {"duration_ms", "duration_bucket", "started_day", "span_total",
                "quality_score"} & set(shown)


# -- the page ------------------------------------------------------------------------------
@pytest.fixture
def page_world() -> Iterator[tuple[Visitor, History]]:
    clock = Clock()
    gov = Governance(MemoryStore(), clock=clock, config=Config(cipher=PlaintextForTests()))
    history = build_history(gov, clock, NOW)
    visitor = Visitor(falcon.testing.TestClient(create_app(gov)))
    assert visitor.sign_in(history.token).status_code == 303
    yield visitor, history
    gov.close()


def _row(text: str, day: str) -> list[str]:
    found = re.search(rf'<tr data-day="{day}">(.*?)</tr>', text, re.S)
    assert found is not None, day
    return [re.sub(r"<[^>]+>", "", cell).strip()
            for cell in re.findall(r"<td[^>]*>(.*?)</td>", found.group(1), re.S)]


def test_the_page_shows_the_days_figures_and_hover_values(
    page_world: tuple[Visitor, History],
) -> None:
    visitor, history = page_world
    result = visitor.get("/trends", window="7")
    assert result.status_code == 200
    text = result.text
    want = expected_days(history, date(2026, 3, 9), date(2026, 3, 15), lambda run: True)
    assert text.count("<tr data-day=") == 7
    for day, expected in want.items():
        cells = _row(text, day)
        statuses = expected["statuses"]
        assert cells[1] == str(sum(statuses.values()))
        assert cells[2:8] == [str(statuses[s]) for s in (
            "pending", "active", "complete", "failed", "cancelled", "terminated")]
        total = sum(statuses.values())
        for status, count in statuses.items():
            assert f"<title>{day[5:]} · {status}: {count} of {total}</title>" in text
        names = dict(zip(history.agents, ("Billing assistant", "Support triage"), strict=True))
        for agent, scores in expected["quality"].items():
            mean = sum(scores) / len(scores)
            assert f"<title>{day[5:]} · {names[agent]}: {mean:,.3g}</title>" in text
        for severity, count in expected["alerts"].items():
            alerts = sum(expected["alerts"].values())
            assert f"<title>{day[5:]} · {severity}: {count} of {alerts}</title>" in text
    shown = int(re.search(r'id="total-runs">([\d,]+)<', text).group(1))  # type: ignore[union-attr]
    assert shown == sum(sum(day["statuses"].values()) for day in want.values())
    assert "Trends" in text and 'href="/trends" aria-current="page"' in text


def test_the_page_narrows_to_an_agent_and_names_a_bad_window(
    page_world: tuple[Visitor, History],
) -> None:
    visitor, history = page_world
    agent = history.agents[0]
    text = visitor.get("/trends", window="90", agent_id=agent).text
    assert text.count("<tr data-day=") == 90
    want = expected_days(history, NOW.date() - timedelta(days=89), NOW.date(),
                         lambda run: run["agent_id"] == agent)
    for day, expected in want.items():
        assert _row(text, day)[1] == str(sum(expected["statuses"].values()))
    bad = visitor.get("/trends", window="5")
    assert bad.status_code == 400
    assert "window: one of 7, 30, 90" in bad.text


# -- in the browser ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served_history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Served, History]]:
    """The history up to the real now (the server keeps the real clock), served."""
    db = tmp_path_factory.mktemp("trends") / "trends.db"
    gov = Governance.open(db, config=Config(cipher=PlaintextForTests()))
    history = build_history(gov, None, datetime.now(UTC), runs=60)
    gov.close()
    server = Served(db)
    try:
        server.wait_ready()
        yield server, history
    finally:
        server.stop()


@pytest.fixture
def history_page(
    browser: Any, served_history: tuple[Served, History]  # noqa: F811  (the fixture)
) -> Iterator[Any]:
    """A signed-in page of the served history; any script error fails the test."""
    server, history = served_history
    context = browser.new_context(viewport=VIEWPORT, base_url=server.base_url)
    opened = context.new_page()
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(f"script error: {error}"))
    opened.on("console", lambda message: problems.append(message.text)
              if message.type == "error" else None)
    opened.goto("/sign-in")
    opened.fill("#token", history.token)
    opened.press("#token", "Enter")
    opened.wait_for_url("**/")
    yield opened
    context.close()
    assert problems == []


def test_hovering_a_bar_or_point_shows_its_value(
    history_page: Any, served_history: tuple[Served, History],
    shots: Path,  # noqa: F811  (the fixture)
) -> None:
    page = history_page
    _, history = served_history
    page.click("nav >> text=Trends")
    page.select_option("select[name=window]", "7")
    page.click("button:has-text('Show')")
    page.wait_for_url("**/trends?window=7*")
    today = datetime.now(UTC).date()
    want = expected_days(history, today - timedelta(days=6), today, lambda run: True)
    busiest = max(want, key=lambda day: sum(want[day]["statuses"].values()))
    counts = want[busiest]["statuses"]
    status = max(counts, key=lambda name: counts[name])
    label = f"{busiest[5:]} · {status}: {counts[status]} of {sum(counts.values())}"
    bar = page.locator("#chart-runs rect", has=page.locator(f"title:text-is('{label}')"))
    assert bar.count() == 1
    bar.hover()
    tip = page.locator("#chart-tip")
    tip.wait_for(state="visible")
    assert tip.inner_text() == label
    point = page.locator("#chart-durations circle").first
    point.hover()
    page.wait_for_function("document.querySelector('#chart-tip').textContent.includes('p50')")
    shown = point.locator("title").text_content()
    assert tip.inner_text() == shown and re.search(r"p50: [\d.,]+ (ms|s|min)$", shown)
    page.mouse.move(2, 2)
    tip.wait_for(state="hidden")
    for name in ("Runs started per day by status", "Runs per day by risk level",
                 "Mean quality score per day by agent",
                 "Estimated cost per day by model", "Alerts raised per day by severity"):
        assert page.get_by_role("img", name=name).count() == 1
    for field in ("Window", "Agent", "Environment"):
        assert page.locator("form.filters").get_by_label(field).count() == 1, field
    assert_accessible(page, "trends")
    page.screenshot(path=shots / "trends.png", full_page=True)
    page.set_viewport_size(NARROW)
    assert page.evaluate("document.documentElement.scrollWidth") <= NARROW["width"]
    assert_accessible(page, "trends at 390 px")
    page.screenshot(path=shots / "trends-390.png", full_page=True)


# -- chart geometry ------------------------------------------------------------------------
def test_stacked_bars_scale_to_the_axis_and_count_ticks_are_whole() -> None:
    chart = trend_bars(["a", "b"], [{"x": 3, "y": 1}, {"y": 2}], ["x", "y"], css="k")
    plot_bottom = chart.height - chart.bottom
    labels = [label for _, label in chart.y_ticks]
    assert labels == ["0", "1", "2", "3", "4"]
    top_y = chart.y_ticks[-1][0]
    unit = (plot_bottom - top_y) / 4
    heights = {(bar.label, bar.css): bar.height for bar in chart.bars}
    assert heights == {("a · x", "k-x"): 3 * unit, ("a · y", "k-y"): unit,
                       ("b · y", "k-y"): 2 * unit}
    first = [bar for bar in chart.bars if bar.label.startswith("a")]
    assert first[0].y + first[0].height == plot_bottom  # the first key sits on the axis
    assert first[1].y + first[1].height == first[0].y
    assert [bar.value for bar in chart.bars] == ["3 of 4", "1 of 4", "2 of 2"]


def test_model_bars_take_classes_by_position_and_lines_break_at_gaps() -> None:
    chart = trend_bars(["d"], [{"<b>m</b>": 2.5}], ["<b>m</b>"], css="model", indexed=True)
    assert [bar.css for bar in chart.bars] == ["model-0"]
    lines = trend_lines(["1", "2", "3", "4"], {"p50": [10.0, None, 30.0, 40.0]}, fmt=str)
    (line,) = lines.lines
    assert line.path.count("M") == 2 and [mark.label for mark in line.marks] == [
        "1 · p50: 10.0", "3 · p50: 30.0", "4 · p50: 40.0"]
    assert nice_step(7) == 2 and nice_step(0.03) == 0.01 and nice_step(0) == 1
