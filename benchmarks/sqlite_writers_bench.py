"""Does the SQLite adapter's writer machinery pay? The default server with and without it.

Beside SQLite's own locking, ``SQLiteStore`` carries two pieces of machinery of its own:

- the **writer queue** (``storage/_writer_queue.py``): a file's writers, in every process,
  queue on an ``flock`` of ``<file>-lock``, waited for by a daemon thread, so that the kernel
  wakes the next process as soon as a writer commits;
- the **checkpointer**: a daemon thread that checkpoints the WAL every 0.2 s, so that no
  commit runs SQLite's automatic checkpoint (every 1,000 pages, inside the commit that
  crosses them).

Each round starts the default server (``governance serve``: one worker process per CPU) on a
fresh store, in turn: as shipped, without the queue, without the checkpointer, and without
both, each replaced by what SQLite does alone (``BEGIN IMMEDIATE`` tried again after short
jittered pauses, the adapter's fallback where ``flock`` is missing; the automatic checkpoint
at SQLite's default 1,000 pages); and as one writing process (one worker, its one thread the
file's only writer, so no queue between processes). Four client processes send
``GET /ping``, then single span creates, then decisions (50 active policies, as
``decision_bench`` has them), and the server's rate and p99 of each are printed, medians of
``--rounds`` rounds, beside each rate against the shipped one.

    python benchmarks/sqlite_writers_bench.py [--requests 4000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from decision_bench import decide_body, new_run, prepare
from serve_bench import span_body
from servers import Request, free_port, start_server, stop_server, timed_requests

from governance_core.service import Governance

SHIPPED = (
    "import sys; from governance_http.serving import serve; "
    "serve(sys.argv[2], host='127.0.0.1', port=int(sys.argv[1]))"
)
NO_QUEUE = "import governance_core.storage._writer_queue as queue; queue.fcntl = None; "
NO_CHECKPOINTER = (
    "import governance_core.storage.sqlite as adapter;"
    " adapter._FALLBACK_CHECKPOINT_PAGES = 1000;"
    " adapter._Checkpointer = type('NoCheckpointer', (), {"
    "'__init__': lambda self, conn: conn.close(), 'stop': lambda self: None,"
    " 'stop_soon': lambda self: None}); "
)
ONE_PROCESS = SHIPPED.replace("port=int(sys.argv[1]))", "port=int(sys.argv[1]), workers=1)")
CONFIGURATIONS = {
    "shipped": SHIPPED,
    "no queue": NO_QUEUE + SHIPPED,
    "no checkpointer": NO_CHECKPOINTER + SHIPPED,
    "SQLite alone": NO_QUEUE + NO_CHECKPOINTER + SHIPPED,
    "one process": NO_QUEUE + ONE_PROCESS,
}
KINDS = ("ping", "span", "decide")


def timed(args: tuple[int, str, str, str, int, str]) -> list[float]:
    """Send ``count`` requests of ``kind`` on one connection; each latency (seconds)."""
    port, token, kind, run_id, count, label = args
    requests: list[Request] = []
    for number in range(count):
        if kind == "ping":
            requests.append(("GET", "/api/v1/ping", None))
        elif kind == "span":
            body = json.dumps({**span_body(run_id, number),
                               "idempotency_key": f"{label}-{number:08d}"})
            requests.append(("POST", "/api/v1/agent_spans", body))
        else:
            requests.append(("POST", "/api/v1/decision", json.dumps(decide_body(run_id, number))))
    return timed_requests(port, token, requests)


def rate(
    port: int, token: str, kind: str, runs: Sequence[str], requests: int, label: str
) -> tuple[float, float]:
    """Requests a second from one client process per run, and the p99 (seconds)."""
    share = requests // len(runs)
    with multiprocessing.get_context("spawn").Pool(len(runs)) as pool:
        pool.map(timed, [(port, token, kind, run, 50, f"warm-{label}-{index}")
                         for index, run in enumerate(runs)])
        began = time.perf_counter()
        results = pool.map(timed, [(port, token, kind, run, share, f"{label}-{index}")
                                   for index, run in enumerate(runs)])
        elapsed = time.perf_counter() - began
    latencies = sorted(latency for result in results for latency in result)
    return len(latencies) / elapsed, latencies[int(len(latencies) * 0.99) - 1]


def one_round(code: str, db: Path, requests: int, label: str) -> dict[str, tuple[float, float]]:
    """Each kind's rate and p99 from the default server started with ``code`` on ``db``."""
    token, agent_id = prepare(db)
    with Governance.open(db) as gov:
        session = gov.session(token)
        runs = [new_run(session, agent_id) for _ in range(4)]
    port = free_port()
    process = start_server(["-c", code, str(port), str(db)], port, env=dict(os.environ),
                           timeout_s=30)
    try:
        return {kind: rate(port, token, kind, runs, requests, f"{label}-{kind}")
                for kind in KINDS}
    finally:
        stop_server(process)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure both configurations in alternating rounds and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    measured: dict[str, list[dict[str, tuple[float, float]]]] = {
        name: [] for name in CONFIGURATIONS
    }
    with tempfile.TemporaryDirectory() as tmp:
        for number in range(args.rounds):
            for index, (name, code) in enumerate(CONFIGURATIONS.items()):
                db = Path(tmp) / f"round-{number}-{index}.db"
                measured[name].append(one_round(code, db, args.requests, f"r{number}-{index}"))
    print(f"default server, 4 client processes, {args.requests} requests of each kind,"
          f" medians of {args.rounds} alternating rounds")
    medians = {
        name: {kind: (statistics.median(r[kind][0] for r in rounds),
                      statistics.median(r[kind][1] for r in rounds)) for kind in KINDS}
        for name, rounds in measured.items()
    }
    for kind in KINDS:
        shipped = medians["shipped"][kind]
        for name, figures in medians.items():
            requests_s, p99 = figures[kind]
            print(f"{kind:7s} {name:16s} {requests_s:6.0f} req/s  p99 {p99 * 1e3:5.1f} ms"
                  f"  rate against shipped {requests_s / shipped[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
