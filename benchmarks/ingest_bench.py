"""Span ingest through the library against raw SQLite writing the same rows, in one run.

Run: ``python benchmarks/ingest_bench.py [--spans 2000]``.

The library side records finished LLM spans (with token usage, so cost and risk aggregates
move) into one run through ``gov.call("agent_spans/create")``: validation, idempotency, the
span write and its run's aggregates, one transaction a span; then the same number of spans in
bulk requests of 100 items. The baseline inserts a row of the same JSON size per span in its
own ``BEGIN IMMEDIATE`` transaction on a WAL file with the same pragmas: the ceiling a span
ingest is measured against. It prints spans per second and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Any

from governance_core.service import Governance

SCHEMA = {
    "span_type_schemas": [
        {
            "name": "llm",
            "params_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
            "data_risk": {"action_profile": {"read_data": "allowed"},
                          "params_data_categories": {"personal_identifiers": "included"}},
            "template": "{{ prompt | truncate: 40 }}",
        }
    ]
}


def span_body(instance_id: str, number: int) -> dict[str, Any]:
    """A finished LLM span as the TypeScript client sends it."""
    return {
        "agent_instance_id": instance_id,
        "schema_name": "llm",
        "status": "complete",
        "started_at": "2026-11-21T16:41:59Z",
        "finished_at": "2026-11-21T16:42:00Z",
        "payload": {"prompt": f"Review application {number}", "model": "gpt-4o",
                    "token_usage": {"prompt_tokens": 812, "completion_tokens": 164}},
        "result_payload": {"text": "approve " * 20},
    }


def library_rates(folder: Path, spans: int) -> tuple[float, float]:
    """Spans a second, one request a span and in bulk requests of 100."""
    with Governance.open(folder / "library.db") as gov:
        token = gov.bootstrap(account_name="Bench", admin_email="bench@example.test").token
        agent = gov.call("agents/create", {"name": "bench"}, token=token)["details"]
        instance = gov.call("agent_instances/register", {
            "agent_id": agent["id"], "agent_version": {"name": "1", "external_identifier": "1"},
            "agent_schema_version": {"external_identifier": "s1", **SCHEMA},
        }, token=token)["details"]["id"]
        started = time.perf_counter()
        for number in range(spans):
            gov.call("agent_spans/create", span_body(instance, number), token=token)
        single = spans / (time.perf_counter() - started)
        started = time.perf_counter()
        for batch in range(0, spans, 100):
            items = [{"_type": "agent_spans/create", "idempotency_key": f"bench-{batch + i:08d}",
                      **span_body(instance, batch + i)} for i in range(100)]
            gov.call("bulk", {"items": items}, token=token)
        bulk = spans / (time.perf_counter() - started)
    return single, bulk


def baseline_rate(folder: Path, spans: int) -> float:
    """Raw sqlite3: one row of the same JSON a span, one transaction each."""
    conn = sqlite3.connect(folder / "raw.db", isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.execute("CREATE TABLE spans (id TEXT PRIMARY KEY, instance TEXT, data TEXT)")
    conn.execute("CREATE INDEX spans_instance ON spans (instance)")
    started = time.perf_counter()
    for number in range(spans):
        text = json.dumps(span_body("instance", number))
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO spans VALUES (?, ?, ?)", (f"span-{number}", "instance", text))
        conn.execute("COMMIT")
    rate = spans / (time.perf_counter() - started)
    conn.close()
    return rate


def main() -> None:
    """Measure and print."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        baseline = baseline_rate(Path(folder), args.spans)
        single, bulk = library_rates(Path(folder), args.spans)
    print(f"raw sqlite3, 1 row a transaction:      {baseline:8.0f} rows/s   (baseline)")
    print(f"library, 1 span a request:             {single:8.0f} spans/s  "
          f"ratio {single / baseline:.2f}")
    print(f"library, bulk of 100 spans a request:  {bulk:8.0f} spans/s  "
          f"ratio {bulk / baseline:.2f}")


if __name__ == "__main__":
    main()
