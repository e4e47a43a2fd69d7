"""The OTLP endpoint's answers to what exporters may send: encodings, bad input, limits, load.

An app over an in-memory store, driven by falcon's test client; the requests are built with
``opentelemetry-proto`` so each field can be left out or broken on purpose.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from contextlib import AbstractContextManager
from typing import Any

import falcon.testing
import pytest
from google.rpc import status_pb2
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.proto.common.v1 import common_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

from governance_core.clock import FixedClock
from governance_core.errors import TemporarilyUnavailable
from governance_core.ids import SeededIds
from governance_core.otel.otlp_codec import decode_json
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore
from governance_http import create_app

TRACE = bytes.fromhex("0af7651916cd43dd8448eb211c80319c")
START = 1_790_000_000_000_000_000


class BusyStore(MemoryStore):
    """A store that can be made to answer every write transaction as busy."""

    busy = False

    def transaction(self) -> AbstractContextManager[None]:
        if self.busy:
            raise TemporarilyUnavailable("the database is busy", retry_after_ms=1500)
        return super().transaction()


@pytest.fixture
def store() -> BusyStore:
    return BusyStore()


@pytest.fixture
def gov(store: BusyStore) -> Iterator[Governance]:
    governance = Governance(store, clock=FixedClock(), ids=SeededIds(3))
    yield governance
    governance.close()


@pytest.fixture
def boot(gov: Governance) -> Bootstrap:
    return gov.bootstrap()


@pytest.fixture
def client(gov: Governance) -> falcon.testing.TestClient:
    return falcon.testing.TestClient(create_app(gov))


def attribute(key: str, value: Any) -> common_pb2.KeyValue:
    if isinstance(value, str):
        return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(string_value=value))
    return common_pb2.KeyValue(key=key, value=common_pb2.AnyValue(int_value=value))


def span(
    span_id: bytes, parent: bytes = b"", trace: bytes = TRACE, **attributes: Any
) -> trace_pb2.Span:
    """A one-millisecond span; ``gen_ai__operation__name=`` sets ``gen_ai.operation.name``."""
    return trace_pb2.Span(
        trace_id=trace, span_id=span_id, parent_span_id=parent, name=f"span {span_id.hex()}",
        start_time_unix_nano=START, end_time_unix_nano=START + 1_000_000,
        attributes=[attribute(key.replace("__", "."), value) for key, value in attributes.items()],
    )


def export(*spans: Any, service: str = "billing") -> bytes:
    request = trace_service_pb2.ExportTraceServiceRequest(resource_spans=[
        trace_pb2.ResourceSpans(
            resource={"attributes": [attribute("service.name", service)]},
            scope_spans=[trace_pb2.ScopeSpans(spans=list(spans))],
        ),
    ])
    encoded: bytes = request.SerializeToString()
    return encoded


def post(
    client: falcon.testing.TestClient, body: bytes, token: str | None,
    content_type: str = "application/x-protobuf", **headers: str,
) -> falcon.testing.Result:
    sent = {"Content-Type": content_type, **headers}
    if token is not None:
        sent["Authorization"] = f"Bearer {token}"
    return client.simulate_post("/v1/traces", body=body, headers=sent)


def status_of(result: falcon.testing.Result) -> tuple[int, int, str]:
    message = status_pb2.Status.FromString(result.content)
    return result.status_code, message.code, message.message


def stored(gov: Governance, boot: Bootstrap) -> tuple[int, int, int]:
    session = gov.session(boot.token)
    counts = [session.call(name)["pagination"]["item_count"]
              for name in ("agents/list", "agent_instances/list")]
    return counts[0], counts[1], gov.store.count("agent_spans")


def test_a_gzipped_protobuf_export_is_recorded_and_answered_in_protobuf(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    body = export(span(b"\x01" * 8), span(b"\x02" * 8, parent=b"\x01" * 8))
    result = post(client, gzip.compress(body), boot.token, **{"Content-Encoding": "gzip"})
    assert result.status_code == 200
    assert result.headers["content-type"] == "application/x-protobuf"
    answer = trace_service_pb2.ExportTraceServiceResponse.FromString(result.content)
    assert not answer.HasField("partial_success")
    assert stored(gov, boot) == (1, 1, 2)


def test_malformed_unauthenticated_untyped_and_oversized_exports_store_nothing(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    good = export(span(b"\x01" * 8))
    code, grpc, message = status_of(post(client, b"\x0a\xff\xff\xff", boot.token))
    assert (code, grpc) == (400, 3) and "ExportTraceServiceRequest" in message
    assert status_of(post(client, good, None))[:2] == (401, 16)
    assert status_of(post(client, good, "pf_not-a-real-token-at-all-000000000000"))[:2] == (401, 16)

    wrong = post(client, good, boot.token, content_type="text/plain")
    assert wrong.status_code == 415
    assert wrong.json["code"] == 3 and "application/x-protobuf" in wrong.json["message"]

    huge = export(span(b"\x01" * 8, blob="x" * (20 * 1024 * 1024)))
    assert status_of(post(client, huge, boot.token))[0] == 413
    # A small gzip body that inflates past the limit is refused as well.
    bomb = gzip.compress(huge)
    assert len(bomb) < 1024 * 1024
    code, _, message = status_of(post(client, bomb, boot.token, **{"Content-Encoding": "gzip"}))
    assert code == 413 and "decompressed" in message
    assert status_of(post(client, good[:-3], boot.token, **{"Content-Encoding": "gzip"}))[0] == 400
    assert status_of(post(client, good, boot.token, **{"Content-Encoding": "br"}))[0] == 415
    assert stored(gov, boot) == (0, 0, 0)


def test_spans_without_ids_are_rejected_by_name_and_the_rest_recorded(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    body = export(
        span(b"\x01" * 8),
        span(b""),
        span(b"\x03" * 8, trace=b""),
        span(b"\x00" * 8),
        span(b"\x05" * 8, parent=b"\x01\x02"),
    )
    result = post(client, body, boot.token)
    assert result.status_code == 200
    partial = trace_service_pb2.ExportTraceServiceResponse.FromString(
        result.content).partial_success
    assert partial.rejected_spans == 4
    assert "span ? of trace 0af7651916cd43dd8448eb211c80319c: span_id must be 8 bytes" in (
        partial.error_message)
    assert "span 0303030303030303 of trace ?: trace_id must be 16 bytes" in partial.error_message
    assert "span 0505050505050505" in partial.error_message
    assert stored(gov, boot) == (1, 1, 1)


def test_json_exports_name_the_malformed_member(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    document = {"resourceSpans": [{"scopeSpans": [{"spans": [{
        "traceId": TRACE.hex(), "spanId": "0102030405060708", "name": "x",
        "startTimeUnixNano": "soon", "endTimeUnixNano": str(START),
    }]}]}]}
    result = post(client, json.dumps(document).encode(), boot.token, "application/json")
    assert result.status_code == 400
    assert result.json == {"code": 3, "message": (
        "resourceSpans[0].scopeSpans[0].spans[0].startTimeUnixNano must be an integer")}
    assert post(client, b"{", boot.token, "application/json").status_code == 400
    assert post(client, b"[]", boot.token, "application/json").status_code == 400
    assert stored(gov, boot) == (0, 0, 0)


def test_a_busy_store_answers_503_with_retry_after(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap, store: BusyStore,
) -> None:
    body = export(span(b"\x01" * 8))
    gov.authenticate(boot.token)  # the token's last use is stamped before the store is busy
    store.busy = True
    result = post(client, body, boot.token)
    assert status_of(result)[:2] == (503, 14)
    assert result.headers["retry-after"] == "2"
    store.busy = False
    assert stored(gov, boot) == (0, 0, 0)
    assert post(client, body, boot.token).status_code == 200
    assert stored(gov, boot) == (1, 1, 1)


def test_a_span_resent_with_other_content_is_rejected_and_kept_as_first_recorded(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    assert post(client, export(span(b"\x01" * 8, step=1)), boot.token).status_code == 200
    result = post(client, export(span(b"\x01" * 8, step=2)), boot.token)
    partial = trace_service_pb2.ExportTraceServiceResponse.FromString(
        result.content).partial_success
    assert partial.rejected_spans == 1
    assert "idempotency_key_already_used" in partial.error_message
    [recorded] = gov.store.query("agent_spans")
    assert recorded["payload"]["step"] == 1


def test_an_ingestion_token_records_into_its_own_agent_and_environment(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    session = gov.session(boot.token)
    agent = session.details("agents/create", name="Billing bot")
    environment = session.details("environments/create", name="eu-prod", purpose="production")
    issued = session.call("api_tokens/create", token_scope="agent_deployment",
                          agent_id=agent["id"], environment_id=environment["id"])
    assert post(client, export(span(b"\x01" * 8), service="ignored"), issued["token"]
                ).status_code == 200
    [run] = session.call("agent_instances/list")["summaries"]
    assert (run["agent_id"], run["environment_id"]) == (agent["id"], environment["id"])
    assert session.call("agents/list")["pagination"]["item_count"] == 1


def test_the_users_own_schema_version_overrides_the_default_types(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    session = gov.session(boot.token)
    agent = session.details("agents/create", name="Billing", external_identifier="billing")
    declared = {"name": "gen_ai:execute_tool", "params_schema": {"type": "object"},
                "data_risk": {"action_profile": {"financial_transactions": "allowed"},
                              "params_data_categories": {"financial_information": "included"}}}
    session.call("agent_instances/register", agent_id=agent["id"],
                 agent_version={"external_identifier": "unversioned"},
                 agent_schema_version={"external_identifier": "mine",
                                       "span_type_schemas": [declared]})
    body = export(span(b"\x01" * 8, gen_ai__operation__name="execute_tool"))
    assert post(client, body, boot.token).status_code == 200
    runs = session.call("agent_instances/list", external_identifier=TRACE.hex())["summaries"]
    [run] = runs
    assert run["agent_id"] == agent["id"]
    assert run["risk_score"]["allowed_actions"] == ["financial_transactions"]
    assert run["risk_score"]["all_data_categories"] == ["financial_information"]


def test_the_spans_of_a_retired_agent_are_rejected_with_the_reason(
    client: falcon.testing.TestClient, gov: Governance, boot: Bootstrap,
) -> None:
    session = gov.session(boot.token)
    agent = session.details("agents/create", name="Old", external_identifier="billing")
    session.call("agents/retire", agent_id=agent["id"])
    result = post(client, export(span(b"\x01" * 8), span(b"\x02" * 8)), boot.token)
    partial = trace_service_pb2.ExportTraceServiceResponse.FromString(
        result.content).partial_success
    assert partial.rejected_spans == 2
    assert "the run was refused: the agent is retired" in partial.error_message
    assert stored(gov, boot) == (1, 0, 0)


def test_the_json_decoder_takes_both_field_spellings_and_every_value_kind() -> None:
    document = {"resource_spans": [{
        "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": "svc"}}]},
        "scopeSpans": [{"scope": {"name": "lib", "version": "2"}, "spans": [{
            "trace_id": TRACE.hex().upper(), "spanId": "0102030405060708",
            "parentSpanId": "", "name": "call", "kind": "SPAN_KIND_CLIENT", "flags": 0x300,
            "startTimeUnixNano": START, "end_time_unix_nano": str(START + 5),
            "status": {"code": "STATUS_CODE_ERROR", "message": "no"},
            "attributes": [
                {"key": "n", "value": {"intValue": "-7"}},
                {"key": "f", "value": {"doubleValue": 0.5}},
                {"key": "b", "value": {"boolValue": True}},
                {"key": "raw", "value": {"bytesValue": "AAE="}},
                {"key": "list", "value": {"arrayValue": {"values": [{"intValue": 1}]}}},
                {"key": "map", "value": {"kvlist_value": {"values": [
                    {"key": "k", "value": {"string_value": "v"}}]}}},
                {"key": "empty", "value": {}},
            ],
            "events": [{"name": "e", "timeUnixNano": str(START + 1), "attributes": []}],
        }]}],
    }]}
    [decoded] = decode_json(json.dumps(document).encode())
    assert decoded.trace_id == TRACE.hex() and decoded.parent_span_id == ""
    assert (decoded.kind, decoded.status_code, decoded.status_message) == ("client", "error", "no")
    assert decoded.parent_is_remote is True
    assert (decoded.start_time_unix_nano, decoded.end_time_unix_nano) == (START, START + 5)
    assert dict(decoded.attributes) == {
        "n": -7, "f": 0.5, "b": True, "raw": "AAE=", "list": [1], "map": {"k": "v"},
        "empty": None,
    }
    assert decoded.events[0].time_unix_nano == START + 1
    assert (decoded.scope_name, decoded.scope_version) == ("lib", "2")
    assert dict(decoded.resource.attributes) == {"service.name": "svc"}
