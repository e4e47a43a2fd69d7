"""Measure the most time one payload check and one registration check can take.

A span type's schema is untrusted: a chain of K ``allOf`` pairs over ``$ref`` is evaluated
2**K times per payload. Registration refuses schemas whose :func:`schema_cost` is over
``MAX_SCHEMA_VISITS``; a check at run time stops after ``VALIDATION_STEPS``. This prints,
beside the goal (a check under 100 ms whatever the schema and payload):

- the time to count the cost of the K=23 chain (what registration pays to refuse it);
- the time of one check of a stored K=23 chain (a schema stored before the bound), which
  stops when its steps are spent;
- the time of one check with the costliest schema registration accepts, on a payload that
  makes it spend all its steps;
- the time of an ordinary check, for scale.

    python benchmarks/schema_work_bench.py [--repeat 5]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

from governance_core.rules.payload_validation import (
    MAX_SCHEMA_VISITS,
    VALIDATION_STEPS,
    payload_check,
    schema_cost,
)

GOAL_MS = 100.0


def doubling_chain(links: int) -> dict[str, Any]:
    """Each of ``links`` definitions applies the next one twice."""
    definitions: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(links)
    }
    definitions[f"d{links}"] = {"type": "object"}
    return {"$defs": definitions, "$ref": "#/$defs/d0"}


def best_ms(run: Callable[[], object], repeat: int) -> float:
    """The fastest of ``repeat`` runs, in milliseconds."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return min(times) * 1000


def main() -> None:
    """Print each figure beside the goal."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    repeat = parser.parse_args().repeat

    bomb = doubling_chain(23)
    # The chain of 6 applied to every member: 254 visits a member, within the bound.
    costly = {**doubling_chain(6), "additionalProperties": {"$ref": "#/$defs/d0"}}
    assert schema_cost(costly) <= MAX_SCHEMA_VISITS < schema_cost(doubling_chain(8))
    ordinary = {"type": "object", "properties": {"name": {"type": "string", "pattern": "^A"},
                                                 "age": {"type": "integer"}}}
    bomb_check, costly_check, ordinary_check = map(payload_check, (bomb, costly, ordinary))
    costly_payload = {f"k{i}": {"a": i} for i in range(1000)}
    figures = {
        "count the cost of the K=23 chain (registration)": best_ms(
            lambda: schema_cost(bomb), repeat),
        "check against a stored K=23 chain": best_ms(lambda: bomb_check({"a": 1}), repeat),
        f"check against the costliest accepted schema (cost {schema_cost(costly):.0f})": best_ms(
            lambda: costly_check(costly_payload), repeat),
        "ordinary check, for scale": best_ms(lambda: ordinary_check({"name": "Ada"}), repeat),
    }
    print(f"steps per check: {VALIDATION_STEPS}; goal: under {GOAL_MS:.0f} ms each")
    for name, ms in figures.items():
        print(f"{name:70} {ms:8.2f} ms  ({ms / GOAL_MS:.2f} of the goal)")


if __name__ == "__main__":
    main()
