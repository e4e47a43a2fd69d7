"""Back-testing a policy over 100,000 recorded spans, against its goal of 10 seconds.

Builds, in a SQLite file, ``--core-runs`` runs of ``--run-spans`` spans each through the
core's span create (``console_bench.build_run``: top-level steps, the rest model calls that
report token usage, written 5,000 spans a transaction), then copies of those runs (the run
record and each of its span records under new ids, put in the store directly, started over
the last 6 days, each model call of a copy using a few more input tokens than the one before)
until the store holds ``--spans`` activity spans. Back-testing reads run and span records
only, so a copy costs it what a run written span by span would.

Then it times ``policies/test`` in process (the operation as HTTP and bulk run it) over the
last 7 days with each of two policies, and prints the seconds, the goal and the ratio (and
the process's CPU seconds, which other work on the machine does not inflate):

- ``budget``: a per-run budget on model calls (reads ``context.run.cost_micro_usd``, which
  grows at every model call, so nearly every request is a new one for the engine);
- ``span-count``: a cap on spans per run (reads ``context.run.span_count``: every request is
  new, the engine evaluates each span).

Usage: ``PYTHONPATH=. python benchmarks/backtest_bench.py [--spans 100000]``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

from console_bench import build_run

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.repository import Filter
from governance_core.service import Governance, Session

GOAL_S = 10.0
"""The goal: one policy back-tested over 100,000 recorded spans in at most 10 seconds."""

POLICIES = {
    "budget": (
        '@reason("a run may spend 0.02 USD on models")\n'
        'forbid (principal, action == Action::"call_model", resource)\n'
        "when { context.run.cost_micro_usd >= 20000 };"
    ),
    "span-count": (
        '@reason("a run may record 1,500 spans")\n'
        "forbid (principal, action, resource) when { context.run.span_count >= 1500 };"
    ),
}


def copy_runs(gov: Governance, originals: list[str], spans: int, run_spans: int) -> int:
    """Copy the runs ``originals`` (records and spans, new ids) until ``spans`` are stored.

    Each copy starts a little earlier than the last, over the last 6 days; its spans keep
    their offsets from its start and their parents (under the new ids). Returns the copies.
    """
    now = gov.clock()
    stored = len(originals) * run_spans
    copies = max(0, (spans - stored + run_spans - 1) // run_spans)
    step = timedelta(days=6) / max(copies, 1)
    for number in range(copies):
        original = gov.store.get("agent_instances", originals[number % len(originals)])
        assert original is not None
        records = gov.store.query(
            "agent_spans", [Filter("agent_instance_id", "eq", original["id"])]
        )
        started = now - step * (number + 1)
        shift = started - parse_timestamp(original["started_at"])
        run_id = gov.ids.new(0, started)
        with gov.store.transaction():
            gov.store.put("agent_instances", {
                **original, "id": run_id, "started_at": format_timestamp(started),
                "started_day": format_timestamp(started)[:10],
                "inserted_at": format_timestamp(started),
            })
            renamed: dict[str, str] = {}
            for record in records:
                at = parse_timestamp(record["started_at"]) + shift
                renamed[record["id"]] = gov.ids.new(0, at)
            for record in records:
                copy: dict[str, Any] = {
                    **record, "id": renamed[record["id"]], "agent_instance_id": run_id,
                    "parent_span_id": renamed.get(record.get("parent_span_id") or ""),
                    "started_at": format_timestamp(parse_timestamp(record["started_at"]) + shift),
                }
                usage = (record.get("result_payload") or {}).get("usage")
                if usage:
                    # Each copy's model calls use a few more tokens, so its figures (and
                    # the engine's requests) are its own, as a real run's would be.
                    copy["result_payload"] = {**record["result_payload"], "usage": {
                        **usage, "input_tokens": usage["input_tokens"] + number + 1,
                    }}
                if record.get("finished_at"):
                    copy["finished_at"] = format_timestamp(
                        parse_timestamp(record["finished_at"]) + shift
                    )
                gov.store.put("agent_spans", copy)
    return copies


def timed_backtest(session: Session, source: str) -> tuple[float, float, dict[str, Any]]:
    """Seconds one ``policies/test`` over the last 7 days takes (wall, CPU), and its answer."""
    began, cpu = time.perf_counter(), time.process_time()
    report = session.call("policies/test", {"source": source, "days": 7})
    return time.perf_counter() - began, time.process_time() - cpu, report


def main() -> None:
    """Build the store, back-test each policy, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=100_000)
    parser.add_argument("--core-runs", type=int, default=5)
    parser.add_argument("--run-spans", type=int, default=2_000)
    parser.add_argument("--steps", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        gov = Governance.open(Path(folder) / "bench.db")
        session = gov.session(gov.bootstrap().token)
        agent = session.details("agents/create", {"name": "bench agent"})["id"]
        began = time.perf_counter()
        originals = []
        for _ in range(args.core_runs):
            run_id = build_run(gov, session, agent, args.run_spans, args.steps)
            session.call("agent_instances/start", {"agent_instance_id": run_id})
            originals.append(run_id)
        built = time.perf_counter() - began
        began = time.perf_counter()
        copies = copy_runs(gov, originals, args.spans, args.run_spans)
        stored = gov.store.count("agent_spans")
        print(f"wrote {len(originals) * args.run_spans:,} spans through the core in "
              f"{built:.1f} s; copied {copies} runs in {time.perf_counter() - began:.1f} s; "
              f"{stored:,} spans stored")
        for name, source in POLICIES.items():
            seconds, cpu, report = timed_backtest(session, source)
            stopped = report["stopped_spans"]["count"]
            print(f"{name:<11} {report['spans']:>7,} spans of {report['runs']:,} runs in "
                  f"{seconds:6.2f} s (goal <= {GOAL_S:.0f} s, ratio {seconds / GOAL_S:.2f}; "
                  f"CPU {cpu:.2f} s); stopped {stopped:,} spans in "
                  f"{report['stopped_runs']['count']:,} runs")
        gov.close()


if __name__ == "__main__":
    main()
