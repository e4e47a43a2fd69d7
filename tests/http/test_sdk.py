"""The published Python SDK (prefactor-core 0.5.3 over prefactor-http 0.4.3) against a real server.

The SDK is used as its documentation shows: a run registered with span type and quality
schemas, started, nested spans, a failed span, a span cancelled before it began, a quality
payload, finished; then a bulk request; then a second run terminated by an account token
while a span is open, which the SDK learns from the answer to that span's finish. The SDK
must raise nothing, and the server must hold exactly what was sent.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefactor_core import PrefactorCoreClient, PrefactorCoreConfig, QueueConfig
from prefactor_http import HttpClientConfig, PrefactorHttpClient
from prefactor_http.models.bulk import BulkItem, BulkRequest

from governance_core.service import Governance
from tests.http.server import Served

pytestmark = pytest.mark.slow

SPAN_TYPES = [
    {"name": "langchain:llm", "params_schema": {"type": "object"},
     "result_schema": {"type": "object"}},
    {"name": "langchain:tool", "params_schema": {"type": "object"}},
]
SCHEMA_VERSION = {
    "external_identifier": "sdk-schema-1",
    "span_type_schemas": SPAN_TYPES,
    "quality_schemas": [{"name": "accuracy", "schema": {"type": "object"}}],
}
VERSION = {"name": "Reviewer", "external_identifier": "sdk-1.0"}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, str, str]]:
    db = tmp_path / "sdk.db"
    with Governance.open(db) as gov:
        made = gov.bootstrap()
        agent = gov.session(made.token).details("agents/create", {"name": "SDK agent"})
    server = Served(db, workers=2)
    try:
        server.wait_ready()
        yield server, made.token, agent["id"]
    finally:
        server.stop()


def config(server: Served, token: str) -> PrefactorCoreConfig:
    http = HttpClientConfig(
        api_url=server.base_url, api_token=token, max_retries=1, initial_retry_delay=0.1,
        max_retry_delay=0.5,
    )
    return PrefactorCoreConfig(http_config=http, queue_config=QueueConfig(max_retries=1))


async def record_a_run(server: Served, token: str, agent_id: str) -> str:
    async with PrefactorCoreClient(config(server, token)) as client:
        run = await client.create_agent_instance(
            agent_id=agent_id, agent_version=VERSION, agent_schema_version=SCHEMA_VERSION
        )
        await run.start()
        async with run.span("langchain:llm") as outer:
            await outer.start({"prompt": "Review application 42"})
            async with run.span("langchain:tool") as inner:
                await inner.start({"tool": "credit_check"})
                await inner.complete({"score": 710})
            await outer.complete({"answer": "approve"})
        async with run.span("langchain:tool") as failing:
            await failing.start({"tool": "fraud_check"})
            await failing.fail({"error": "timeout"})
        async with run.span("langchain:tool") as skipped:
            await skipped.cancel()
        await run.record_quality("accuracy", {"score": 1})
        await run.finish()
        return run.id


async def send_bulk(server: Served, token: str, run_id: str) -> dict[str, Any]:
    http = HttpClientConfig(api_url=server.base_url, api_token=token, max_retries=0)
    async with PrefactorHttpClient(http) as client:
        response = await client.bulk.execute(BulkRequest(items=[
            BulkItem(_type="agents/list", idempotency_key="sdk-bulk-list"),  # type: ignore[call-arg]
            BulkItem(  # type: ignore[call-arg]
                _type="agent_spans/create", idempotency_key="sdk-bulk-span",
                agent_instance_id=run_id, schema_name="langchain:tool", status="complete",
                payload={"tool": "bulk"}, result_payload={"ok": True},
            ),
        ]))
        return {key: output.model_dump() for key, output in response.outputs.items()}


async def terminated_run(server: Served, token: str, agent_id: str) -> tuple[str, str | None]:
    async with PrefactorCoreClient(config(server, token)) as client:
        monitor = client._termination_monitor
        assert monitor is not None
        run = await client.create_agent_instance(
            agent_id=agent_id, agent_version=VERSION, agent_schema_version=SCHEMA_VERSION
        )
        await run.start()
        async with run.span("langchain:llm") as span:
            await span.start({"prompt": "a long task"})
            status, _ = await asyncio.to_thread(
                server.request, f"/agent_instance/{run.id}/terminate", token,
                method="POST", body={"reason": "operator stop"},
            )
            assert status == 200
            await span.complete({"answer": "too late"})
        deadline = time.monotonic() + 10
        while not monitor.get_termination_event().is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        reason = monitor.termination_reason if monitor.get_termination_event().is_set() else None
        await run.finish()
        return run.id, reason


def spans_of(server: Served, token: str, run_id: str) -> list[dict[str, Any]]:
    status, listed = server.request(
        f"/agent_spans?agent_instance_id={run_id}&pagination[page_size]=100", token
    )
    assert status == 200, listed
    rows: list[dict[str, Any]] = listed["summaries"]
    return [row for row in rows if row.get("purpose", "activity") == "activity"]


def test_the_sdk_records_runs_and_receives_termination(
    served: tuple[Served, str, str], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    server, token, agent_id = served
    run_id = asyncio.run(record_a_run(server, token, agent_id))

    status, shown = server.request(f"/agent_instance/{run_id}", token)
    assert status == 200
    run = shown["details"]
    assert run["status"] == "complete" and run["started_at"] is not None
    assert run["quality_payloads"] == {"accuracy": {"score": 1}}
    counts = run["span_counts"]
    by_status = (counts["complete"], counts["failed"], counts["cancelled"], counts["active"])
    assert (counts["total"], *by_status) == (4, 2, 1, 1, 0)
    spans = {(row["schema_name"], row["status"]): row for row in spans_of(server, token, run_id)}
    outer = spans[("langchain:llm", "complete")]
    inner = spans[("langchain:tool", "complete")]
    assert inner["parent_span_id"] == outer["id"] and outer["parent_span_id"] is None
    assert ("langchain:tool", "failed") in spans and ("langchain:tool", "cancelled") in spans
    status, full = server.request(f"/agent_spans/{outer['id']}", token)
    assert (full["details"]["payload"], full["details"]["result_payload"]) == (
        {"prompt": "Review application 42"}, {"answer": "approve"}
    )

    outputs = asyncio.run(send_bulk(server, token, run_id))
    assert {key: output["status"] for key, output in outputs.items()} == {
        "sdk-bulk-list": "success", "sdk-bulk-span": "success"
    }
    assert outputs["sdk-bulk-span"]["details"]["agent_instance_id"] == run_id
    assert len(spans_of(server, token, run_id)) == 5

    stopped_id, reason = asyncio.run(terminated_run(server, token, agent_id))
    assert reason == "operator stop"
    status, shown = server.request(f"/agent_instance/{stopped_id}", token)
    assert shown["details"]["status"] == "terminated"
    assert shown["details"]["termination_reason"] == "operator stop"
    assert [row["status"] for row in spans_of(server, token, stopped_id)] == ["cancelled"]
    complaints = [r for r in caplog.records if r.name.startswith("prefactor")]
    assert complaints == [], [r.getMessage() for r in complaints]
