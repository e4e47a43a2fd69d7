"""Console page loads: a run of 50,000 spans against one of 10, and the overview over 100,000 runs.

Builds, in a SQLite file, one run of ``--spans`` spans (``--steps`` top-level steps, each with
its share of child spans, one in a thousand of them failed) and one run of 10 spans, all
written through the core's span create inside one transaction per 5,000 spans. Then
``--runs`` runs started over the last 7 days: ``--model-runs`` of them are written through the
core (each with a few spans that report token usage and declare data risks, so each has its
own cost and risk level), the rest are copies of those runs' records under new ids and start
times, put in the store directly (the overview reads run records only, so copies cost it what
runs written one by one would). Signed in to the console in-process (falcon's test client, so
the figure is the server's time to answer), it times:

- the run page (header, cost, risk, alerts and the first page of the top-level spans),
- the fragment of one step's child spans (what expanding a span loads),
- the last page of the top level (what "More spans" loads at the deepest offset),
- the large run's failed spans (the header's "failed" link),
- the overview (status counts, cost and risk levels per day over every run of the week),
  against its goal of 300 ms,
- the runs list filtered by risk level,
- the runs list filtered and sorted every way (by agent and status, by a day range, by
  external identifier prefix, agent name and quality score; by start, duration, cost, risk
  and span count), against its goal of 150 ms (the span-count sorts, which read their
  index of buckets and sort within the top ones, on a line of their own),
- the trends page over 7 and 90 days and for one agent, against its goal of 300 ms,

and prints the median of ``--repeat`` loads of each and the ratio of the large run's page to
the small run's. With a Chromium (``--browser PATH``, default ``GOVERNANCE_TEST_BROWSER`` or
``/usr/bin/chromium`` when present; ``--browser ''`` skips it) it also serves the store with
``governance serve`` and times opening each run page in headless Chromium until its ``load``
event (stylesheet and script included).
Usage: ``PYTHONPATH=. python benchmarks/console_bench.py [--spans 50000] [--runs 100000]``.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import falcon.testing
from servers import HOST, free_port, governance_serve, start_server, stop_server

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.service import Governance, Session
from governance_http import create_app

CSRF = re.compile(r'name="csrf_token" value="([^"]+)"')
SCHEMA = {
    "external_identifier": "bench-schema",
    "span_type_schemas": [
        {"name": "step", "params_schema": {"type": "object"}},
        {"name": "llm", "params_schema": {"type": "object"}, "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"personal_identifiers": "included"},
        }},
    ],
    "quality_schemas": [{"name": "helpfulness", "schema": {"type": "object"}}],
}


def build_run(gov: Governance, session: Session, agent_id: str, spans: int, steps: int) -> str:
    """Register a run and write ``spans`` spans: ``steps`` roots, the rest spread under them."""
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"name": "bench", "external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    start = gov.clock() - timedelta(hours=1)
    children = spans - steps
    written = 0
    batch = 5000
    while written < spans:
        with gov.store.transaction():
            for index in range(written, min(spans, written + batch)):
                step, offset = divmod(index, spans // steps)
                at = start + timedelta(milliseconds=index * 50)
                params: dict[str, Any] = {
                    "agent_instance_id": run["id"],
                    "status": "failed" if index % 1000 == 999 else "complete",
                    "started_at": format_timestamp(at),
                    "finished_at": format_timestamp(at + timedelta(milliseconds=40)),
                }
                if offset == 0 or children == 0:
                    made = session.details("agent_spans/create", {
                        **params, "schema_name": "step", "payload": {"step": step},
                    })
                    root = made["id"]
                else:
                    session.details("agent_spans/create", {
                        **params, "schema_name": "llm", "parent_span_id": root,
                        "payload": {"model": "gpt-4o-mini", "prompt": f"call {index}"},
                        "result_payload": {"usage": {"input_tokens": 120, "output_tokens": 30}},
                    })
            written = min(spans, written + batch)
    return str(run["id"])


OVERVIEW_GOAL_S = 0.300
"""The overview's goal: under 300 ms of server time over 100,000 runs."""
RUNS_LIST_GOAL_S = 0.150
"""The runs list's goal, filtered and sorted: under 150 ms of server time over 100,000 runs."""
TRENDS_GOAL_S = 0.300
"""The trends page's goal: under 300 ms of server time over 100,000 runs."""
MODELS = ("gpt-4o-mini", "claude-3-5-haiku-20241022")
ENDINGS = ("complete",) * 5 + ("failed", "cancelled")


def build_week(gov: Governance, session: Session, agent_id: str, runs: int, models: int) -> None:
    """``runs`` runs started over the last 7 days: ``models`` written through the core, copies.

    Each model run has one to four spans with token usage of one of two models; the spans'
    types declare data risks of different weights, so the runs spread over the risk levels;
    it records a quality score from 0 to 0.9 and finishes complete, failed or cancelled after
    up to a minute. A copy takes its model's record and ``run_models`` rows under a new id and
    start (its finish as far after).
    """
    now = gov.clock()
    written = []
    with gov.store.transaction():
        for index in range(models):
            run = session.details("agent_instances/register", {
                "agent_id": agent_id, "agent_version": {"external_identifier": "week"},
                "agent_schema_version": SCHEMA, "external_identifier": f"order-{index:05d}",
            })
            start = now - timedelta(minutes=2)
            for number in range(1 + index % 4):
                session.details("agent_spans/create", {
                    "agent_instance_id": run["id"], "status": "complete",
                    "schema_name": "llm" if (index + number) % 3 else "step",
                    "started_at": format_timestamp(start),
                    "payload": {"model": MODELS[index % 2], "prompt": "p"},
                    "result_payload": {"usage": {
                        "input_tokens": 100 + 37 * index, "output_tokens": 10 + number,
                    }},
                })
            session.details("agent_instances/record_quality", {
                "agent_instance_id": run["id"], "name": "helpfulness",
                "payload": {"score": index % 10 / 10},
            })
            took = timedelta(milliseconds=97 * index**2 % 60_000)
            session.details("agent_instances/finish", {
                "agent_instance_id": run["id"], "status": ENDINGS[index % len(ENDINGS)],
                "timestamp": format_timestamp(start + took),
            })
            written.append(run["id"])
    models_stored = [gov.store.get("agent_instances", run_id) for run_id in written]
    model_rows: dict[str, list[dict[str, Any]]] = {run_id: [] for run_id in written}
    for row in gov.store.query("run_models"):
        if row["agent_instance_id"] in model_rows:
            model_rows[row["agent_instance_id"]].append(row)
    span = timedelta(days=7) - timedelta(minutes=5)
    copies = runs - models
    for first in range(0, copies, 10_000):
        with gov.store.transaction():
            for index in range(first, min(copies, first + 10_000)):
                model = models_stored[index % models]
                assert model is not None
                started = now - span * (index / max(1, copies))
                took = parse_timestamp(model["finished_at"]) - parse_timestamp(model["started_at"])
                copy_id = gov.ids.new(0, started)
                day = format_timestamp(started)[:10]
                gov.store.put("agent_instances", {
                    **model, "id": copy_id, "started_at": format_timestamp(started),
                    "started_day": day, "finished_at": format_timestamp(started + took),
                    "inserted_at": format_timestamp(started),
                    "external_identifier": f"copy-{index:06d}",
                })
                for row in model_rows[model["id"]]:
                    gov.store.put("run_models", {
                        **row, "id": f"{copy_id}.{row['id'][-24:]}",
                        "agent_instance_id": copy_id, "started_day": day,
                    })


def console_cookie(client: falcon.testing.TestClient, token: str) -> str:
    """Sign in to the console with ``token`` as a browser does; the session's cookie."""
    sign_in = client.simulate_get("/sign-in")
    csrf = sign_in.cookies["governance_sign_in"].value
    found = CSRF.search(sign_in.text)
    assert found is not None
    signed = client.simulate_post(
        "/sign-in", body=f"csrf_token={found.group(1)}&token={token}",
        headers={"Content-Type": "application/x-www-form-urlencoded",
                 "Cookie": f"governance_sign_in={csrf}"},
    )
    return f"governance_session={signed.cookies['governance_session'].value}"


def timed(client: falcon.testing.TestClient, cookie: str, path: str, repeat: int) -> float:
    """Median seconds to answer ``path`` (checked to be a 200)."""
    samples = []
    for _ in range(repeat):
        began = time.perf_counter()
        result = client.simulate_get(path, headers={"Cookie": cookie})
        samples.append(time.perf_counter() - began)
        assert result.status_code == 200, (path, result.status_code)
    return statistics.median(samples)


def browser_loads(
    db: Path, token: str, paths: list[str], browser: str, repeat: int
) -> list[float]:
    """Median seconds for headless Chromium to open each path, served by ``governance serve``."""
    from playwright.sync_api import sync_playwright

    port = free_port()
    server = start_server(governance_serve(str(db), port), port)
    base = f"http://{HOST}:{port}"
    try:
        with sync_playwright() as playwright:
            chromium = playwright.chromium.launch(executable_path=browser, args=[
                "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-component-update",
            ])
            page = chromium.new_page(base_url=base)
            page.goto("/sign-in")
            page.fill("#token", token)
            page.press("#token", "Enter")
            page.wait_for_url("**/")
            medians = []
            for path in paths:
                page.goto(path)
                samples = []
                for _ in range(repeat):
                    began = time.perf_counter()
                    page.goto(path, wait_until="load")
                    samples.append(time.perf_counter() - began)
                medians.append(statistics.median(samples))
            chromium.close()
        return medians
    finally:
        stop_server(server)


def main() -> None:
    """Build the runs, time the pages, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--runs", type=int, default=100_000)
    parser.add_argument("--model-runs", type=int, default=200)
    default_browser = os.environ.get("GOVERNANCE_TEST_BROWSER") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else ""
    )
    parser.add_argument("--browser", default=default_browser)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        gov = Governance.open(Path(folder) / "bench.db")
        boot = gov.bootstrap()
        session = gov.session(boot.token)
        agent = session.details("agents/create", {"name": "bench agent"})
        began = time.perf_counter()
        large = build_run(gov, session, agent["id"], args.spans, args.steps)
        built = time.perf_counter() - began
        small = build_run(gov, session, agent["id"], 10, 2)
        print(f"built a run of {args.spans:,} spans in {built:.1f} s")
        began = time.perf_counter()
        build_week(gov, session, agent["id"], args.runs, min(args.model_runs, args.runs))
        print(f"stored {args.runs:,} runs over 7 days in {time.perf_counter() - began:.1f} s")

        client = falcon.testing.TestClient(create_app(gov))
        cookie = console_cookie(client, boot.token)
        page = client.simulate_get(f"/runs/{large}", headers={"Cookie": cookie}).text
        first_step = re.search(r"parent=([0-9a-z]{32})", page)
        assert first_step is not None
        last_offset = (args.steps - 1) // 100 * 100

        small_page = timed(client, cookie, f"/runs/{small}", args.repeat)
        large_page = timed(client, cookie, f"/runs/{large}", args.repeat)
        children = timed(client, cookie,
                         f"/runs/{large}/spans?parent={first_step.group(1)}&fragment=1",
                         args.repeat)
        deepest = timed(client, cookie, f"/runs/{large}/spans?offset={last_offset}&fragment=1",
                        args.repeat)
        print(f"run page, 10 spans:                {small_page * 1000:8.1f} ms")
        print(f"run page, {args.spans:,} spans:          {large_page * 1000:8.1f} ms")
        print(f"expand a step ({args.spans // args.steps - 1} children):     "
              f"{children * 1000:8.1f} ms")
        print(f"top level, page at offset {last_offset}:    {deepest * 1000:8.1f} ms")
        print(f"ratio large/small run page: {large_page / small_page:.2f}")
        failed = timed(client, cookie, f"/runs/{large}?status=failed", args.repeat)
        overview = timed(client, cookie, "/", args.repeat)
        risky = timed(client, cookie, "/runs?risk_level=high", args.repeat)
        print(f"failed spans of the {args.spans:,}-span run: {failed * 1000:8.1f} ms")
        print(f"overview, {args.runs:,} runs:         {overview * 1000:8.1f} ms"
              f"  (goal {OVERVIEW_GOAL_S * 1000:.0f} ms, ratio {overview / OVERVIEW_GOAL_S:.2f})")
        print(f"runs list, risk level high:     {risky * 1000:8.1f} ms")
        today = gov.clock().date()
        lists = {
            f"{sort}, agent and status complete": f"/runs?agent_id={agent['id']}"
            f"&status=complete&sort={sort}"
            for sort in ("-started_at", "-duration", "-cost", "-risk", "-spans", "spans")
        }
        lists |= {
            "-duration, from-to 3 days": f"/runs?from={today - timedelta(days=4)}"
            f"&to={today - timedelta(days=2)}&sort=-duration",
            "-cost, page at offset 5,000": "/runs?sort=-cost&offset=5000",
            "external id starts with copy-0421": "/runs?external_id=copy-0421",
            "agent name has 'bench', -spans": "/runs?agent_name=bench&sort=-spans",
            "quality score 0.5 to 1, -started_at": "/runs?score_min=0.5&score_max=1",
        }
        worst = 0.0
        unindexed = 0.0
        for label, path in lists.items():
            took = timed(client, cookie, path, args.repeat)
            # The span-count sort reads an index of the count's buckets, then sorts within
            # them (see docs/console.md): it is reported on its own line.
            if "spans" in path:
                unindexed = max(unindexed, took)
            else:
                worst = max(worst, took)
            print(f"runs list, {label + ':':38} {took * 1000:8.1f} ms")
        print(f"runs list, slowest but the span-count sorts: {worst * 1000:8.1f} ms"
              f"  (goal {RUNS_LIST_GOAL_S * 1000:.0f} ms, ratio {worst / RUNS_LIST_GOAL_S:.2f})")
        goal_ms = RUNS_LIST_GOAL_S * 1000
        print(f"runs list, slowest span-count sort:              {unindexed * 1000:8.1f} ms"
              f"  (goal {goal_ms:.0f} ms, ratio {unindexed / RUNS_LIST_GOAL_S:.2f})")
        worst = 0.0
        for label, path in {
            "7 days": "/trends?window=7", "90 days": "/trends?window=90",
            "30 days, one agent": f"/trends?window=30&agent_id={agent['id']}",
        }.items():
            took = timed(client, cookie, path, args.repeat)
            worst = max(worst, took)
            print(f"trends, {label + ':':41} {took * 1000:8.1f} ms")
        print(f"trends, slowest of the above:     {worst * 1000:8.1f} ms"
              f"  (goal {TRENDS_GOAL_S * 1000:.0f} ms, ratio {worst / TRENDS_GOAL_S:.2f})")
        if args.browser:
            small_open, large_open = browser_loads(
                Path(folder) / "bench.db", boot.token, [f"/runs/{small}", f"/runs/{large}"],
                args.browser, max(3, args.repeat // 3),
            )
            print(f"Chromium opens the 10-span run page in     {small_open * 1000:8.1f} ms")
            print(f"Chromium opens the {args.spans:,}-span run page in {large_open * 1000:8.1f} ms")
            print(f"ratio large/small in the browser: {large_open / small_open:.2f}")
        gov.close()


if __name__ == "__main__":
    main()
