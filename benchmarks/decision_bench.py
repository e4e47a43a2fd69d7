"""Decision latency and rate: in process with 50 active policies, and over HTTP.

Prints each figure beside its goal:

- the engine alone (one evaluation of the account's 50 compiled policies, the request built):
  p50 and p99, goals p50 <= 0.2 ms, p99 <= 1 ms;
- a whole in-process ``decide`` on SQLite (the run's figures read, the policies' version
  read, the engine, the decision written and committed), p50 and p99 against the same goals;
- the floor under it: the same statements through ``sqlite3`` alone on the same file (the
  settings' change counts, the run, its last allowed tool call, its agent's cost of the day,
  the decision's insert, the transaction), p50 and the decide's p50 as a multiple of it;
- the same decide on PostgreSQL (``--url``, default ``$GOVERNANCE_TEST_POSTGRES_URL``, a new
  database dropped afterwards; skipped without one), p50 and p99, no goal: what the round
  trips to the server add;
- the same decide on a long run of a busy day (``--busy-calls`` allowed tool calls before it,
  ``--busy-runs`` other runs of its agent started today, on a store of their own), against
  the same goals and as a ratio to the short runs' p50: what the run's tool calls and the
  agent's cost today cost to read should not grow with them;
- a span create (a model call, which 20 of the policies can hold) judged by the policies as
  it is recorded (detective mode), p50 against the same create on an account without
  policies, in alternating blocks: what judging a recorded span costs;
- ``POST /api/v1/decision`` from 4 client processes against the default server: p99 (goal
  <= 10 ms) and its rate against ``GET /ping`` from the same clients (goal >= 50%), in
  ``--rounds`` rounds of each, alternating, so that a machine that slows down meanwhile slows
  both: the medians, and the median of the rounds' ratios; and the server's CPU a request of
  each kind (all its processes, read from ``/proc``), beside the in-process decide: what a
  decision costs the server beyond a ping, against what the decide itself costs.

The 50 policies mix what teams write (docs/policies.md): tool deny-lists, run budgets,
approvals on arguments, tool-call rates (the run's allowed tool calls) and daily budgets
(a sum over the agent's runs started today), none of which forbids the benchmark's action. The
20 whose scope can hold it (the tool-call rates and the daily budgets) are evaluated in
full, their two figures read from the store for every decision; the engine is not given the
other 30.

    python benchmarks/decision_bench.py [--decisions 3000] [--requests 4000] [--rounds 3]
        [--busy-calls 10000] [--busy-runs 5000] [--spans 2000] [--url URL]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parent))

from serve_bench import span_body
from servers import (
    Request,
    cpu_seconds,
    free_port,
    start_server,
    stop_server,
    timed_requests,
)

from governance_core.context import Context
from governance_core.policies.deciding import Action, active_policies, run_request
from governance_core.service import Governance, Session

POLICIES = 50
RUN_LENGTH = 200
"""Decisions per run before the benchmark starts another (runs are not endless)."""


def policy_source(number: int) -> str:
    """The ``number``th of the benchmark's policies (five kinds in turn)."""
    kind = number % 5
    if kind == 0:
        return f'forbid (principal, action == Action::"call_tool", resource == Tool::"t{number}");'
    if kind == 1:
        return (
            'forbid (principal, action == Action::"call_model", resource)'
            f" when {{ context.run.cost_micro_usd >= {1_000_000_000 + number} }};"
        )
    if kind == 2:
        return (
            f'@approval("refunds need a person") forbid (principal, action == Action::"call_tool",'
            f' resource == Tool::"refund{number}")'
            " when { context.args has amount && context.args.amount > 100 };"
        )
    if kind == 3:
        return (
            'forbid (principal, action == Action::"call_tool", resource)'
            f" when {{ context.run.tool_calls >= {100_000 + number} }};"
        )
    return (
        "forbid (principal, action, resource)"
        f" when {{ context.agent.cost_today_micro_usd >= {10**12 + number} }};"
    )


def prepare(db: Path | str, policies: int = POLICIES) -> tuple[str, str]:
    """Bootstrap the store, create ``policies`` policies and an agent; the token and agent id."""
    with Governance.open(db) as gov:
        made = gov.bootstrap()
        session = gov.session(made.token)
        for number in range(policies):
            session.call("policies/create", {"name": f"p{number}", "source": policy_source(number)})
        agent = session.details("agents/create", {"name": "Bench agent"})
        return made.token, agent["id"]


def new_run(session: Session, agent_id: str) -> str:
    """A started run of the agent."""
    run = session.details("agent_instances/register", {
        "agent_id": agent_id,
        "agent_version": {"external_identifier": "v1"},
        "agent_schema_version": {
            "external_identifier": "s1",
            "span_type_schemas": [{"name": "bench:llm", "params_schema": {"type": "object"}}],
        },
    })
    session.call("agent_instances/start", {"agent_instance_id": run["id"]})
    return str(run["id"])


def decide_body(run_id: str, number: int) -> dict[str, object]:
    """The benchmark's action: a search tool call, allowed by every policy."""
    return {"agent_instance_id": run_id,
            "action": {"kind": "tool_call", "name": "search", "args": {"q": f"q{number}"}}}


def percentile(values: Sequence[float], share: float) -> float:
    """The value below which ``share`` of ``values`` lie."""
    ordered = sorted(values)
    return ordered[max(0, int(len(ordered) * share) - 1)]


def in_process(
    db: Path | str, token: str, agent_id: str, decisions: int
) -> tuple[list[float], list[float]]:
    """Latencies (seconds) of the engine alone and of whole decides."""
    with Governance.open(db) as gov:
        session = gov.session(token)
        run_id = new_run(session, agent_id)
        engine: list[float] = []
        ctx: Context = gov.context(session.principal)
        instance = gov.store.get("agent_instances", run_id)
        assert instance is not None
        active = active_policies(ctx)
        assert active.compiled is not None and active.compiled.size == POLICIES
        action = Action("tool_call", "search", {"q": "x"})
        for _ in range(decisions):
            request, entities = run_request(ctx, instance, action, active)
            began = time.perf_counter()
            active.compiled.evaluate(request, entities)
            engine.append(time.perf_counter() - began)
        whole: list[float] = []
        for number in range(decisions):
            if number and number % RUN_LENGTH == 0:
                run_id = new_run(session, agent_id)
            body = decide_body(run_id, number)
            began = time.perf_counter()
            outcome = session.details("decisions/decide", body)["outcome"]
            whole.append(time.perf_counter() - began)
            assert outcome == "allow", outcome
        return engine, whole


def raw_statements(db: Path, token: str, agent_id: str, decisions: int) -> list[float]:
    """Latencies (seconds) of a decide's statements alone, through ``sqlite3`` on ``db``.

    The floor under the in-process decide: what it asks of SQLite, without the library. The
    settings' change counts read, then in one transaction the run, its last allowed tool
    call and its agent's cost of the day read, and a decision written (a copy of one the
    library stored, numbered after the run's others; the store's triggers keep its id).
    """
    with Governance.open(db) as gov:
        session = gov.session(token)
        run_id = new_run(session, agent_id)
        stored = session.details("decisions/decide", decide_body(run_id, 0))
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        connection.execute("PRAGMA synchronous = NORMAL")
        data, account_id = connection.execute(
            "SELECT data, account_id FROM decisions WHERE id = ?", (stored["id"],)
        ).fetchone()
        day = f"{agent_id}/{time.strftime('%Y-%m-%d', time.gmtime())}"
        latencies = []
        for number in range(1, decisions + 1):
            began = time.perf_counter()
            connection.execute(
                "SELECT name, count FROM _changes WHERE name IN (?, ?)",
                ("risk_profiles", "policies"),
            ).fetchall()
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("SELECT * FROM agent_instances WHERE id = ?", (run_id,)).fetchone()
            connection.execute(
                "SELECT * FROM decisions WHERE agent_instance_id = ? AND action_kind = ?"
                " AND outcome = ? AND tool_call_number >= 1"
                " ORDER BY tool_call_number DESC, id LIMIT 1",
                (run_id, "tool_call", "allow"),
            ).fetchall()
            connection.execute("SELECT * FROM agent_day_costs WHERE id = ?", (day,)).fetchone()
            connection.execute(
                "INSERT INTO decisions (id, account_id, inserted_at, agent_instance_id,"
                " agent_id, action_kind, outcome, decided_at, tool_call_number, data)"
                " VALUES (?, ?, ?, ?, ?, 'tool_call', 'allow', ?, ?, ?)",
                (f"{stored['id']}.{number}", account_id, stored["decided_at"], run_id,
                 agent_id, stored["decided_at"], number + 1, data),
            )
            connection.execute("COMMIT")
            latencies.append(time.perf_counter() - began)
        return latencies
    finally:
        connection.close()


def busy(
    db: Path, token: str, agent_id: str, calls: int, runs: int, decisions: int
) -> list[float]:
    """Latencies (seconds) of decides on a long run of a busy day.

    The run has ``calls`` allowed tool calls before them, its agent ``runs`` other runs
    started today: what a decide reads of both should not grow with them.
    """
    with Governance.open(db) as gov:
        session = gov.session(token)
        with gov.transaction():
            for _ in range(runs):
                new_run(session, agent_id)
        run_id = new_run(session, agent_id)
        with gov.transaction():
            for number in range(calls):
                session.details("decisions/decide", decide_body(run_id, number))
        latencies: list[float] = []
        for number in range(decisions):
            body = decide_body(run_id, calls + number)
            began = time.perf_counter()
            outcome = session.details("decisions/decide", body)["outcome"]
            latencies.append(time.perf_counter() - began)
            assert outcome == "allow", outcome
        return latencies


def recorded(
    stores: Sequence[tuple[Path, str, str]], spans: int, block: int = 100
) -> list[list[float]]:
    """Latencies (seconds) of span creates on each store, in alternating blocks of ``block``.

    Each store is ``(file, token, agent id)``; a run takes at most :data:`RUN_LENGTH` spans.
    """
    with contextlib.ExitStack() as opened:
        sessions = [
            (opened.enter_context(Governance.open(db)).session(token), agent_id)
            for db, token, agent_id in stores
        ]
        runs = [new_run(session, agent_id) for session, agent_id in sessions]
        latencies: list[list[float]] = [[] for _ in stores]
        for start in range(0, spans, block):
            for place, (session, agent_id) in enumerate(sessions):
                if start and start % RUN_LENGTH < block:
                    runs[place] = new_run(session, agent_id)
                for number in range(start, min(start + block, spans)):
                    body = span_body(runs[place], number)
                    began = time.perf_counter()
                    session.call("agent_spans/create", body)
                    latencies[place].append(time.perf_counter() - began)
        return latencies


SERVER = (
    "import sys; from governance_http.serving import serve; "
    "serve(sys.argv[2], host='127.0.0.1', port=int(sys.argv[1]))"
)


def timed(args: tuple[int, str, str, int]) -> list[float]:
    """Send ``count`` pings (``run_id`` empty) or decides on one connection; each latency."""
    port, token, run_id, count = args
    requests: list[Request] = [
        ("POST", "/api/v1/decision", json.dumps(decide_body(run_id, number))) if run_id
        else ("GET", "/api/v1/ping", None)
        for number in range(count)
    ]
    return timed_requests(port, token, requests)


def rate(port: int, token: str, runs: Sequence[str], requests: int) -> tuple[float, float]:
    """Requests a second from one client process per entry of ``runs``, and the p99."""
    share = requests // len(runs)
    with multiprocessing.get_context("spawn").Pool(len(runs)) as pool:
        pool.map(timed, [(port, token, run, 50) for run in runs])
        began = time.perf_counter()
        results = pool.map(timed, [(port, token, run, share) for run in runs])
        elapsed = time.perf_counter() - began
    latencies = [latency for result in results for latency in result]
    return len(latencies) / elapsed, percentile(latencies, 0.99)


class Round(NamedTuple):
    """One round over HTTP: rates, the decide p99, and the server's CPU a request.

    Rates are requests a second, the p99 and CPU figures seconds; the CPU is that of every
    process of the server's session, a request of each kind.
    """

    ping: float
    decide: float
    p99: float
    ping_cpu: float
    decide_cpu: float


def over_http(db: Path, token: str, agent_id: str, requests: int, rounds: int) -> list[Round]:
    """Each round's pings and decides from 4 client processes."""
    port = free_port()
    process = start_server(
        ["-c", SERVER, str(port), str(db)], port, env=dict(os.environ), timeout_s=30
    )
    measured = []
    try:
        for _ in range(rounds):
            with Governance.open(db) as gov:
                session = gov.session(token)
                runs = [new_run(session, agent_id) for _ in range(4)]
            before = cpu_seconds(process.pid)
            ping, _ = rate(port, token, [""] * 4, requests)
            between = cpu_seconds(process.pid)
            decide, p99 = rate(port, token, runs, requests)
            after = cpu_seconds(process.pid)
            measured.append(Round(
                ping, decide, p99, (between - before) / requests, (after - between) / requests
            ))
    finally:
        stop_server(process)
    return measured


def main(argv: Sequence[str] | None = None) -> int:
    """Measure and print every figure beside its goal."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--decisions", type=int, default=3000)
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--busy-calls", type=int, default=10_000)
    parser.add_argument("--busy-runs", type=int, default=5_000)
    parser.add_argument("--spans", type=int, default=2000)
    parser.add_argument("--url", default=os.environ.get("GOVERNANCE_TEST_POSTGRES_URL"))
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "decisions.db"
        token, agent_id = prepare(db)
        engine, whole = in_process(db, token, agent_id, args.decisions)
        raw = raw_statements(db, token, agent_id, args.decisions)
        rounds = over_http(db, token, agent_id, args.requests, args.rounds)
        busy_db = Path(tmp) / "busy.db"
        busy_token, busy_agent = prepare(busy_db)
        long_run = busy(busy_db, busy_token, busy_agent, args.busy_calls, args.busy_runs,
                        args.decisions)
        plain_db = Path(tmp) / "plain.db"
        plain_token, plain_agent = prepare(plain_db, policies=0)
        judged, plain = recorded(
            [(db, token, agent_id), (plain_db, plain_token, plain_agent)], args.spans
        )
    on_postgres = None
    if args.url:
        from postgres_bench import scratch_database

        with scratch_database(args.url) as url:
            pg_token, pg_agent = prepare(url)
            on_postgres = in_process(url, pg_token, pg_agent, args.decisions)[1]
    ping = statistics.median(r.ping for r in rounds)
    decide = statistics.median(r.decide for r in rounds)
    p99 = statistics.median(r.p99 for r in rounds)
    ratio = statistics.median(r.decide / r.ping for r in rounds)
    ping_cpu = statistics.median(r.ping_cpu for r in rounds)
    decide_cpu = statistics.median(r.decide_cpu for r in rounds)
    ms = 1e3
    print(f"{POLICIES} active policies, SQLite, {args.decisions} decisions in process")
    print(f"engine alone:        p50 {statistics.median(engine) * ms:6.3f} ms  goal <= 0.2 ms;"
          f"  p99 {percentile(engine, 0.99) * ms:6.3f} ms  goal <= 1 ms")
    print(f"in-process decide:   p50 {statistics.median(whole) * ms:6.3f} ms  goal <= 0.2 ms;"
          f"  p99 {percentile(whole, 0.99) * ms:6.3f} ms  goal <= 1 ms")
    print(f"its statements through raw sqlite3: p50 {statistics.median(raw) * ms:6.3f} ms;"
          f"  the decide {statistics.median(whole) / statistics.median(raw):.1f} times that"
          " (the floor under the goal: no goal)")
    if on_postgres is None:
        print("in-process decide on PostgreSQL: skipped (no --url and no"
              " $GOVERNANCE_TEST_POSTGRES_URL)")
    else:
        print(f"the same on PostgreSQL: p50 {statistics.median(on_postgres) * ms:6.3f} ms;"
              f"  p99 {percentile(on_postgres, 0.99) * ms:6.3f} ms  (three round trips to the"
              " server a decide: no goal)")
    print(f"a run with {args.busy_calls:,} allowed tool calls, its agent with"
          f" {args.busy_runs:,} other runs today:")
    print(f"in-process decide:   p50 {statistics.median(long_run) * ms:6.3f} ms  goal <= 0.2 ms;"
          f"  p99 {percentile(long_run, 0.99) * ms:6.3f} ms  goal <= 1 ms;  p50 against the"
          f" short runs' {statistics.median(long_run) / statistics.median(whole):.2f}")
    print(f"span create judged:  p50 {statistics.median(judged) * ms:6.3f} ms;  without"
          f" policies {statistics.median(plain) * ms:6.3f} ms;  ratio"
          f" {statistics.median(judged) / statistics.median(plain):.2f}"
          f"  ({args.spans} creates each, alternating blocks of 100)")
    print(f"HTTP, 4 client processes, {args.requests} requests each kind a round,"
          f" medians of {args.rounds} alternating rounds")
    for number, r in enumerate(rounds, 1):
        print(f"  round {number}: /ping {r.ping:.0f} req/s, /decision {r.decide:.0f}"
              f" req/s, ratio {r.decide / r.ping:.2f}")
    print(f"GET /ping:           {ping:8.0f} req/s  (baseline)")
    print(f"POST /decision:      {decide:8.0f} req/s  ratio {ratio:.2f}  goal >= 0.50;"
          f"  p99 {p99 * ms:.1f} ms  goal <= 10 ms")
    print(f"server CPU a request: /ping {ping_cpu * ms:.3f} ms, /decision {decide_cpu * ms:.3f}"
          f" ms; the decision's more than a ping {(decide_cpu - ping_cpu) * ms:.3f} ms, against"
          f" the in-process decide's p50 {statistics.median(whole) * ms:.3f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
