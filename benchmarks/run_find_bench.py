"""Finding the step in a large run: the tree with its marks, the filters, a zoom, a model call.

Builds, in a SQLite file, one run of ``--spans`` spans (``--steps`` top-level steps, each with
its share of model calls, one in a thousand failed) and one run of 10 spans, written through
the core's span create. Signed in to the console in-process (falcon's test client, so the
figure is the server's time to answer), it times the median of ``--repeat`` loads of:

- the run page: the top level with each row's child count, model, tokens, cost, and the
  "failed below" marks (the run's failed spans and their ancestors),
- one step's children (what expanding a step loads),
- the failed spans (status: the index alone),
- a name filter, and a cost filter, over the run (they read at most 2,000 spans),
- the run page zoomed to one step,
- one model call's span page (its conversation),

and prints each against the small run's run page, with the goal: every page under 300 ms of
server time at 50,000 spans.
Usage: ``PYTHONPATH=. python benchmarks/run_find_bench.py [--spans 50000]``.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

import falcon.testing
from console_bench import console_cookie, timed

from governance_core.clock import format_timestamp
from governance_core.service import Governance, Session
from governance_http import create_app

GOAL_S = 0.300
"""Every page's goal: under 300 ms of server time for a run of 50,000 spans."""
SCHEMA = {
    "external_identifier": "find-bench",
    "span_type_schemas": [
        {"name": "step", "params_schema": {"type": "object"}},
        {"name": "llm", "params_schema": {"type": "object"}},
    ],
}


def build_run(gov: Governance, session: Session, agent_id: str, spans: int, steps: int) -> str:
    """Register a run and write ``spans`` spans: ``steps`` roots, the rest model calls."""
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"name": "bench", "external_identifier": "1"},
        "agent_schema_version": SCHEMA,
    })
    start = gov.clock() - timedelta(hours=1)
    written, batch, root = 0, 5000, None
    while written < spans:
        with gov.store.transaction():
            for index in range(written, min(spans, written + batch)):
                offset = index % max(spans // steps, 1)
                at = start + timedelta(milliseconds=index * 50)
                params: dict[str, Any] = {
                    "agent_instance_id": run["id"],
                    "status": "failed" if index % 1000 == 999 else "complete",
                    "started_at": format_timestamp(at),
                    "finished_at": format_timestamp(at + timedelta(milliseconds=40)),
                }
                if offset == 0 or root is None:
                    root = session.details("agent_spans/create", {
                        **params, "schema_name": "step", "payload": {"step": index},
                    })["id"]
                else:
                    session.details("agent_spans/create", {
                        **params, "schema_name": "llm", "parent_span_id": root,
                        "payload": {"model": "gpt-4o-mini", "messages": [
                            {"role": "system", "content": "Answer briefly."},
                            {"role": "user", "content": f"call {index}"}]},
                        "result_payload": {"content": "ok", "usage": {
                            "input_tokens": 120 + index % 7, "output_tokens": 30}},
                    })
            written = min(spans, written + batch)
    return str(run["id"])


def main() -> None:
    """Build the runs, time the pages, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=50_000)
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=9)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        gov = Governance.open(Path(folder) / "bench.db")
        boot = gov.bootstrap()
        session = gov.session(boot.token)
        agent = session.details("agents/create", {"name": "bench agent"})
        began = time.perf_counter()
        large = build_run(gov, session, agent["id"], args.spans, args.steps)
        print(f"built a run of {args.spans:,} spans in {time.perf_counter() - began:.1f} s")
        small = build_run(gov, session, agent["id"], 10, 2)

        client = falcon.testing.TestClient(create_app(gov))
        cookie = console_cookie(client, boot.token)
        page = client.simulate_get(f"/runs/{large}", headers={"Cookie": cookie}).text
        step = re.search(r'data-span-id="([0-9a-z]{32})"', page)
        assert step is not None and "failed below" in page
        children = client.simulate_get(f"/runs/{large}/spans",
                                       params={"parent": step.group(1), "fragment": "1"},
                                       headers={"Cookie": cookie}).text
        call = re.search(r'data-span-id="([0-9a-z]{32})"', children)
        assert call is not None

        base = timed(client, cookie, f"/runs/{small}", args.repeat)
        print(f"run page, 10 spans: {base * 1000:.1f} ms")
        worst = 0.0
        for label, path in [
            ("run page with marks", f"/runs/{large}"),
            ("one step's children", f"/runs/{large}/spans?parent={step.group(1)}&fragment=1"),
            ("failed spans", f"/runs/{large}?status=failed"),
            ("name filter", f"/runs/{large}?q=step"),
            ("cost filter", f"/runs/{large}?min_cost=0.01"),
            ("zoomed to a step", f"/runs/{large}?zoom={step.group(1)}"),
            ("a model call's page", f"/runs/{large}/spans/{call.group(1)}"),
        ]:
            seconds = timed(client, cookie, path, args.repeat)
            worst = max(worst, seconds)
            print(f"{label}, {args.spans:,} spans: {seconds * 1000:.1f} ms"
                  f"  ({seconds / base:.1f}x the small run's page)")
        print(f"slowest: {worst * 1000:.1f} ms  (goal {GOAL_S * 1000:.0f} ms, "
              f"ratio {worst / GOAL_S:.2f})")
        gov.close()


if __name__ == "__main__":
    main()
