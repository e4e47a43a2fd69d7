"""The OpenTelemetry SDK's OTLP exporters against a real ``governance serve``.

One trace (an agent invocation, two chat calls, a failed tool call) is recorded once and sent
three ways: by the SDK's protobuf exporter, in OTLP's JSON encoding, and through the
in-process exporter into another store. Each HTTP way must hold the run the in-process
exporter holds. Every test uses its own account, so the tests run in any order and split.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from google.protobuf.json_format import MessageToDict
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.otel.exporter import GovernanceSpanExporter
from governance_core.service import Bootstrap, Governance
from tests.http.server import Served
from tests.otel.traces import (
    as_decimal,
    comparable_run,
    expected_cost,
    memory_batches,
    record_agent_trace,
    runs,
    spans,
    tree,
)

pytestmark = pytest.mark.slow


def otlp_json(batch: list[ReadableSpan]) -> bytes:
    """``batch`` in OTLP's JSON encoding: proto3 JSON with ids as hex, not base64."""
    document = MessageToDict(encode_spans(batch))

    def hex_ids(value: Any) -> Any:
        if isinstance(value, dict):
            return {
                key: (
                    base64.b64decode(item).hex()
                    if key in ("traceId", "spanId", "parentSpanId") else hex_ids(item)
                )
                for key, item in value.items()
            }
        if isinstance(value, list):
            return [hex_ids(item) for item in value]
        return value

    return json.dumps(hex_ids(document)).encode()


def post(server: Served, path: str, body: bytes, token: str, content_type: str) -> tuple[
    int, dict[str, str], bytes
]:
    request = urllib.request.Request(server.base_url + path, body, method="POST")
    request.add_header("Content-Type", content_type)
    request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            headers = {k.lower(): v for k, v in response.headers.items()}
            return response.status, headers, response.read()
    except urllib.error.HTTPError as error:
        return error.code, {k.lower(): v for k, v in error.headers.items()}, error.read()


def snapshot(gov: Governance, token: str) -> Any:
    session = gov.session(token)
    listed = runs(session)
    return listed, [spans(session, run["id"]) for run in listed], session.call("agents/list")


@pytest.fixture(scope="module")
def batches() -> list[list[ReadableSpan]]:
    return memory_batches(record_agent_trace)


@pytest.fixture(scope="module")
def in_process(
    batches: list[list[ReadableSpan]], tmp_path_factory: pytest.TempPathFactory,
) -> tuple[dict[str, Any], list[tuple[Any, ...]]]:
    """The run the in-process exporter records from the same batches: what HTTP must match."""
    with Governance.open(tmp_path_factory.mktemp("embedded") / "embedded.db",
                         config=Config(cipher=PlaintextForTests())) as embedded:
        made = embedded.bootstrap()
        exporter = GovernanceSpanExporter(embedded, made.token)
        for batch in batches:
            assert exporter.export(batch) is SpanExportResult.SUCCESS
        [local] = runs(embedded.session(made.token))
        return local, tree(embedded.session(made.token), local["id"])


def test_protobuf_exports_record_one_run_with_its_tree_statuses_and_cost(
    server: Served, accounts: dict[str, Bootstrap], batches: list[list[ReadableSpan]],
    reader: Governance, in_process: tuple[dict[str, Any], list[tuple[Any, ...]]],
) -> None:
    token = accounts["protobuf"].token
    exporter = OTLPSpanExporter(
        endpoint=server.base_url + "/v1/traces", headers={"Authorization": f"Bearer {token}"},
    )
    # The SDK exported each span as it ended: four exports, the root last.
    assert len(batches) == 4
    for batch in batches:
        assert exporter.export(batch) is SpanExportResult.SUCCESS

    session = reader.session(token)
    [run] = runs(session)
    trace_id = format(batches[0][0].context.trace_id, "032x")
    assert run["external_identifier"] == trace_id
    assert run["status"] == "complete"
    assert run["span_counts"]["total"] == 4 and run["span_counts"]["failed"] == 1
    assert run["span_schema_counts"]["by_name"] == {
        "gen_ai:chat": 2, "gen_ai:execute_tool": 1, "gen_ai:invoke_agent": 1,
    }
    cost = expected_cost(reader)
    breakdown = run["cost_breakdown"]
    assert {name: breakdown[name] for name in ("input", "output", "cache_read")} == {
        name: cost[name] for name in ("input", "output", "cache_read")
    }
    assert as_decimal(breakdown["total_cost"]) == cost["total_cost"]
    assert run["quality_payloads"]["relevance"]["score"] == 0.75
    assert run["risk_score"]["any_assessable"] is True
    assert run["risk_score"]["allowed_actions"] == ["external_communication"]

    recorded = {span["payload"]["otel.span"]["name"]: span
                for span in spans(session, run["id"]) if span["purpose"] == "activity"}
    root = recorded["invoke_agent orders"]
    assert root["parent_span_id"] is None
    assert {span["parent_span_id"] for name, span in recorded.items() if name != root[
        "payload"]["otel.span"]["name"]} == {root["id"]}
    tool = recorded["execute_tool lookup_order"]
    assert tool["status"] == "failed"
    assert tool["result_payload"]["otel.status"] == {
        "code": "error", "message": "order service timed out",
    }
    # Messages and tool arguments are sensitive values: withheld from lists, shown on a read.
    assert tool["sensitive_encoding"] is True
    assert "value" not in tool["payload"]["gen_ai.tool.call.arguments"]
    shown = session.details("agent_spans/show", agent_span_id=tool["id"])
    assert shown["payload"]["gen_ai.tool.call.arguments"]["value"] == '{"order": 42}'

    agent = session.call("agents/list", external_identifier="order-agent")["summaries"]
    assert [a["id"] for a in agent] == [run["agent_id"]]
    environment = session.details("environments/show", environment_id=run["environment_id"])
    assert (environment["name"], environment["purpose"]) == ("staging", "staging")

    # The in-process exporter records the same run.
    local, local_tree = in_process
    assert comparable_run(run) == comparable_run(local)
    assert tree(session, run["id"]) == local_tree

    # Re-sending the whole trace in one export changes nothing.
    before = snapshot(reader, token)
    everything = [span for batch in batches for span in batch]
    assert exporter.export(everything) is SpanExportResult.SUCCESS
    assert snapshot(reader, token) == before


def test_json_encoding_records_the_same_run(
    server: Served, accounts: dict[str, Bootstrap], batches: list[list[ReadableSpan]],
    reader: Governance, in_process: tuple[dict[str, Any], list[tuple[Any, ...]]],
) -> None:
    token = accounts["json"].token
    for batch in batches:
        status, headers, body = post(
            server, "/api/v1/otlp/v1/traces", otlp_json(batch), token, "application/json",
        )
        assert (status, headers["content-type"], json.loads(body)) == (
            200, "application/json", {},
        )
    [via_json] = runs(reader.session(token))
    local, local_tree = in_process
    assert comparable_run(via_json) == comparable_run(local)
    assert tree(reader.session(token), via_json["id"]) == local_tree

    # Re-sending the trace as one JSON export changes nothing.
    before = snapshot(reader, token)
    everything = [span for batch in batches for span in batch]
    assert post(server, "/v1/traces", otlp_json(everything), token, "application/json")[0] == 200
    assert snapshot(reader, token) == before


def test_a_trace_whose_root_arrives_first_is_the_same_run(
    server: Served, accounts: dict[str, Bootstrap], batches: list[list[ReadableSpan]],
    reader: Governance, in_process: tuple[dict[str, Any], list[tuple[Any, ...]]],
) -> None:
    token = accounts["reversed"].token
    exporter = OTLPSpanExporter(
        endpoint=server.base_url + "/v1/traces", headers={"Authorization": f"Bearer {token}"},
    )
    # The root ends the run; its children arrive after the finish and are stored all the same.
    for batch in reversed(batches):
        assert exporter.export(batch) is SpanExportResult.SUCCESS
    [run] = runs(reader.session(token))
    expected, expected_tree = in_process
    # The run starts at the first span received: here the root, which started first.
    assert run["started_at"] == min(span["started_at"] for span in spans(
        reader.session(token), run["id"]))
    assert {**comparable_run(run), "started_at": None} == {
        **comparable_run(expected), "started_at": None,
    }
    assert tree(reader.session(token), run["id"]) == expected_tree


def test_the_server_refuses_oversized_and_malformed_exports_and_stores_nothing(
    server: Served, accounts: dict[str, Bootstrap], reader: Governance,
) -> None:
    token = accounts["errors"].token
    exporter = OTLPSpanExporter(
        endpoint=server.base_url + "/v1/traces", headers={"Authorization": f"Bearer {token}"},
    )
    huge = memory_batches(lambda provider: provider.get_tracer("big").start_span(
        "big", attributes={"blob": "x" * (20 * 1024 * 1024)}).end())
    # 413 is final: the exporter gives up at once instead of retrying.
    assert exporter.export(huge[0]) is SpanExportResult.FAILURE
    status, headers, body = post(server, "/v1/traces", b"\x0a\xff", token,
                                 "application/x-protobuf")
    assert (status, headers["content-type"]) == (400, "application/x-protobuf")
    assert b"ExportTraceServiceRequest" in body
    assert post(server, "/v1/traces", b"{}", token, "text/plain")[0] == 415
    assert snapshot(reader, token) == ([], [], reader.session(token).call("agents/list"))
    assert reader.session(token).call("agents/list")["summaries"] == []
