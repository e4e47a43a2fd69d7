"""Span creates to different runs at once on one PostgreSQL database all succeed.

Runs created one after another share a primary-key index page, and a span's update of its
run writes a new entry into it (the run's ``total_cost`` is indexed, so the update is not a
HOT one): two creates side by side each write into a page the other read, and PostgreSQL's
serializable isolation cancels one. Re-run beside the same writers, a create was cancelled
again and again; about one in forty failed after all its re-runs. A write that collided now
runs again alone (``PostgresStore.alone``), where nothing can cancel it.
"""

from __future__ import annotations

import threading

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.service import Governance
from governance_core.storage import Filter
from governance_core.storage.postgres import PostgresStore
from tests.stores import scratch_schema

WRITERS = 6
SPANS = 60


def test_span_creates_to_runs_of_their_own_all_succeed() -> None:
    with scratch_schema("collisions") as url:
        gov = Governance(PostgresStore(url), config=Config(cipher=PlaintextForTests()))
        try:
            token = gov.bootstrap().token
            agent = gov.call("agents/create", {"name": "busy"}, token=token)["details"]
            runs = [
                gov.call("agent_instances/register", {
                    "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
                    "agent_schema_version": {"external_identifier": "s", "span_type_schemas": [
                        {"name": "llm", "params_schema": {"type": "object"}},
                    ]},
                }, token=token)["details"]["id"]
                for _ in range(WRITERS)
            ]
            failures: list[BaseException] = []
            start = threading.Barrier(WRITERS)

            def write(run_id: str) -> None:
                start.wait()
                for number in range(SPANS):
                    try:
                        gov.call("agent_spans/create", {
                            "agent_instance_id": run_id, "schema_name": "llm",
                            "status": "complete", "idempotency_key": f"{run_id}-{number}",
                            "payload": {"model": "gpt-4o", "token_usage": {
                                "prompt_tokens": 10, "completion_tokens": 2}},
                        }, token=token)
                    except BaseException as error:
                        failures.append(error)

            threads = [threading.Thread(target=write, args=(run,)) for run in runs]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert failures == []
            for run_id in runs:
                stored = gov.store.get("agent_instances", run_id)
                assert stored is not None and stored["span_counts"]["total"] == SPANS
                assert gov.store.count("agent_spans", [
                    Filter("agent_instance_id", "eq", run_id),
                    Filter("purpose", "eq", "activity"),
                ]) == SPANS
        finally:
            gov.close()
