"""Derived span ids: the library's encoder against the ``pfid`` package's, per id.

Run: ``python benchmarks/id_bench.py [--ids 20000] [--rounds 5]``.

OTLP ingest derives one id per span (and looks its parent's up in the same export's table):
:func:`governance_core.otel.mapping.derived_span_id`. The reference is the same id made with
``pfid.decode`` and ``pfid.encode``, as it was first written; both are checked to agree on
every id before the clock starts. Each round derives ``--ids`` ids of one run (spans of a few
traces) each way; it prints ids per second each way, the best round's ratio and the goal.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from collections.abc import Callable
from datetime import UTC, datetime

import pfid

from governance_core.ids import SeededIds
from governance_core.otel.mapping import derived_span_id

GOAL = 10.0
"""How many times as many ids a second as the ``pfid`` package's encoder."""


def pfid_derived_span_id(run_id: str, trace_id: str, span_id: str) -> str:
    """The derived id made with the ``pfid`` package's decoder and encoder."""
    digest = hashlib.sha256(f"{run_id}/{trace_id}/{span_id}".encode()).digest()
    return str(pfid.encode(pfid.BinaryPfid(pfid.decode(run_id)[:10] + digest[:10])))


Derive = Callable[[str, str, str], str]


def rate(derive: Derive, run_id: str, spans: list[tuple[str, str]]) -> float:
    """Ids a second ``derive`` makes for ``spans`` of run ``run_id``."""
    started = time.perf_counter()
    for trace_id, span_id in spans:
        derive(run_id, trace_id, span_id)
    return len(spans) / (time.perf_counter() - started)


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=20_000, help="ids derived a round each way")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()

    run_id = SeededIds(7).new(123_456, datetime(2026, 1, 1, tzinfo=UTC))
    spans = [(f"{index // 512:032x}", f"{index:016x}") for index in range(args.ids)]
    for trace_id, span_id in spans:
        if derived_span_id(run_id, trace_id, span_id) != pfid_derived_span_id(
            run_id, trace_id, span_id
        ):
            raise SystemExit(f"the ids of span {span_id} differ")
    ratios = []
    for round_number in range(1, args.rounds + 1):
        old = rate(pfid_derived_span_id, run_id, spans)
        new = rate(derived_span_id, run_id, spans)
        ratios.append(new / old)
        print(f"round {round_number}: pfid {old:10.0f} ids/s   library {new:10.0f} ids/s   "
              f"ratio {new / old:5.1f}")
    best = max(ratios)
    print(f"derived span ids, library against pfid: best ratio {best:.1f} "
          f"(goal {GOAL:.0f}x): {'met' if best >= GOAL else 'NOT met'}")


if __name__ == "__main__":
    main()
