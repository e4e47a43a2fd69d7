"""What a busy account costs the writes that read across its runs, against a quiet one.

Some writes read beyond their own run: the judge of a recorded span reads the agent's cost of
the day when a daily-budget policy is live, a monitor reads the runs of its window, and an
OTLP export looks for the account's idle trace runs. Each is measured in process on a
SQLite file, against the same with few runs, and printed with the ratio:

- a span create (detective mode judging it) with a daily-budget policy live, on an agent
  with 10 runs today and with ``--runs`` (default 10,000), p50 of 300 creates;
- a monitor evaluation of each run metric over a window holding ``--runs`` runs, against 10:
  the counts per status are counted by the store, the other metrics read every run;
- a 10-span OTLP export of an account with ``--stale`` (default 3,000) unfinished runs
  recorded through the API and last active hours ago, against none, p50 of 20 exports (an
  export looks for idle runs at most once a minute: the first of them does).

    PYTHONPATH=. python benchmarks/busy_account_bench.py [--runs 10000] [--stale 3000]
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

from governance_core.clock import Clock, FixedClock, SystemClock
from governance_core.context import Principal
from governance_core.converter import from_record
from governance_core.models.notifications import MONITOR_METRICS, Monitor
from governance_core.notifications.monitors import measure
from governance_core.otel import ingest
from governance_core.otel.model import Span
from governance_core.service import Governance, Session
from governance_core.storage import SQLiteStore

SCHEMA = {"external_identifier": "s1", "span_type_schemas": [
    {"name": "llm", "params_schema": {"type": "object"}},
]}
BUDGET = (
    "forbid (principal, action, resource)"
    " when { context.agent.cost_today_micro_usd >= 1000000000000 };"
)


def _run(session: Session, agent_id: str, **members: Any) -> str:
    run = session.details("agent_instances/register", {
        "agent_id": agent_id, "agent_version": {"external_identifier": "v1"},
        "agent_schema_version": SCHEMA, **members,
    })
    session.call("agent_instances/start", {"agent_instance_id": run["id"]})
    return str(run["id"])


def _span(session: Session, run_id: str) -> None:
    session.call("agent_spans/create", {
        "agent_instance_id": run_id, "schema_name": "llm", "status": "complete",
        "payload": {"model": "gpt-4o", "token_usage": {"prompt_tokens": 10}},
    })


def _export(
    gov: Governance, principal: Principal, clock: FixedClock, numbers: Iterator[int]
) -> None:
    """Export the next trace a second after the last."""
    clock.advance(timedelta(seconds=1))
    ingest(gov, principal, _trace(next(numbers)))


def _p50(action: Callable[[], object], count: int) -> float:
    """The median seconds of ``count`` calls of ``action``."""
    times = []
    for _ in range(count):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def _store(folder: Path, name: str, clock: Clock = SystemClock) -> Governance:
    return Governance(SQLiteStore(folder / f"{name}.db"), clock=clock)


def judged_span_creates(folder: Path, runs: int) -> dict[int, float]:
    """Span create p50 (seconds) with a daily budget live, by the agent's runs today."""
    found = {}
    for today in (10, runs):
        with _store(folder, f"judged-{today}") as gov:
            session = gov.session(gov.bootstrap().token)
            session.call("policies/create", {"name": "budget", "source": BUDGET})
            agent = session.details("agents/create", {"name": "busy"})["id"]
            with gov.transaction():
                for _ in range(today):
                    _run(session, agent)
            run = _run(session, agent)
            found[today] = _p50(functools.partial(_span, session, run), 300)
    return found


def monitor_evaluations(folder: Path, runs: int) -> dict[str, dict[int, float]]:
    """Seconds one evaluation of each run metric takes, by the runs in the window."""
    found: dict[str, dict[int, float]] = {}
    for window in (10, runs):
        with _store(folder, f"monitors-{window}") as gov:
            session = gov.session(gov.bootstrap().token)
            agent = session.details("agents/create", {"name": "busy"})["id"]
            with gov.transaction():
                for number in range(window):
                    run = _run(session, agent)
                    _span(session, run)
                    if number % 2:
                        session.call("agent_instances/finish", {"agent_instance_id": run})
            ctx = gov.context(session.principal)
            for metric in MONITOR_METRICS:
                if metric in ("critical_alerts", "policy_denials"):
                    continue
                made = session.details("monitors/create", {
                    "name": metric, "metric": metric, "agent_id": agent,
                    "window_seconds": 3600, "warning": 1e12,
                })
                stored = gov.tables.monitors.get(made["id"])
                assert stored is not None
                monitor = from_record(Monitor, stored)
                found.setdefault(metric, {})[window] = _p50(
                    functools.partial(measure, ctx, monitor), 5
                )
    return found


def _trace(number: int) -> list[Span]:
    trace = f"{number + 1:032x}"
    root = Span(trace_id=trace, span_id=f"{1:016x}", parent_span_id="", name="invoke_agent",
                start_time_unix_nano=0, end_time_unix_nano=10_000_000, attributes={
                    "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "orders"})
    children = [
        Span(trace_id=trace, span_id=f"{child + 2:016x}", parent_span_id=f"{1:016x}",
             name="chat", start_time_unix_nano=child, end_time_unix_nano=child + 1,
             attributes={"gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
                         "gen_ai.usage.input_tokens": 100})
        for child in range(9)
    ]
    return [*children, root]


def exports_beside_unfinished_runs(folder: Path, stale: int) -> dict[int, float]:
    """A 10-span export's p50 (seconds), by the account's unfinished API runs idle for hours."""
    found = {}
    for unfinished in (0, stale):
        clock = FixedClock()
        with _store(folder, f"idle-{unfinished}", clock) as gov:
            session = gov.session(gov.bootstrap().token)
            agent = session.details("agents/create", {"name": "api"})["id"]
            with gov.transaction():
                for number in range(unfinished):
                    _span(session, _run(session, agent, external_identifier=f"job-{number}"))
            clock.advance(timedelta(hours=2))

            found[unfinished] = _p50(
                functools.partial(_export, gov, session.principal, clock, itertools.count()), 20
            )
    return found


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print each figure, with its ratio to the quiet account's."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--stale", type=int, default=3_000)
    args = parser.parse_args(argv)
    ms = 1e3
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        judged = judged_span_creates(folder, args.runs)
        print(f"span create with a daily budget live: {judged[10] * ms:.2f} ms with 10 runs"
              f" today, {judged[args.runs] * ms:.2f} ms with {args.runs:,}:"
              f" ratio {judged[args.runs] / judged[10]:.2f}")
        monitors = monitor_evaluations(folder, args.runs)
        print(f"a monitor's evaluation, 10 runs in its window against {args.runs:,}:")
        for metric, by_window in monitors.items():
            print(f"  {metric:24s} {by_window[10] * ms:7.2f} ms  {by_window[args.runs] * ms:8.2f}"
                  f" ms  ratio {by_window[args.runs] / by_window[10]:7.1f}")
        exports = exports_beside_unfinished_runs(folder, args.stale)
        print(f"a 10-span export: {exports[0] * ms:.2f} ms with no unfinished run,"
              f" {exports[args.stale] * ms:.2f} ms beside {args.stale:,} idle ones:"
              f" ratio {exports[args.stale] / exports[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
