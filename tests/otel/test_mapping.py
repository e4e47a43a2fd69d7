"""The pure mapping: span types, payloads, sensitive attributes, derived ids, grouping."""

from __future__ import annotations

import hashlib
import re

import pfid
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.ids import IdFactory, extract_partition, is_pfid
from governance_core.otel import DEFAULT_SPAN_TYPES, Event, MappingSettings, Resource, Span
from governance_core.otel.mapping import (
    agent_name,
    counts_usage,
    derived_span_id,
    group_spans,
    quality_records,
    run_target,
    schema_name,
    span_members,
    tool_type,
)

TRACE = "0af7651916cd43dd8448eb211c80319c"


def make(span_id: str = "00f067aa0ba902b7", **changes: object) -> Span:
    fields: dict[str, object] = {
        "trace_id": TRACE, "span_id": span_id, "name": "op",
        "start_time_unix_nano": 1_790_000_000_000_000_000,
        "end_time_unix_nano": 1_790_000_000_500_000_000,
    }
    fields.update(changes)
    return Span(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(("attributes", "expected"), [
    ({"gen_ai.operation.name": "chat"}, "gen_ai:chat"),
    ({"gen_ai.operation.name": "Execute Tool!"}, "gen_ai:execute_tool"),
    ({"openinference.span.kind": "TOOL"}, "openinference:tool"),
    ({"traceloop.span.kind": "workflow"}, "traceloop:workflow"),
    ({"gen_ai.operation.name": "chat", "openinference.span.kind": "LLM"}, "gen_ai:chat"),
    ({"gen_ai.operation.name": "  "}, "otel:span"),
    ({"http.method": "GET"}, "otel:span"),
])
def test_the_span_type_is_namespaced_from_the_conventions(
    attributes: dict[str, object], expected: str,
) -> None:
    assert schema_name(attributes) == expected


def test_every_default_type_is_declared_once_and_tools_declare_no_risk() -> None:
    names = [entry["name"] for entry in DEFAULT_SPAN_TYPES]
    assert len(names) == len(set(names))
    by_name = {entry["name"]: entry for entry in DEFAULT_SPAN_TYPES}
    for tool in ("gen_ai:execute_tool", "openinference:tool", "traceloop:tool"):
        assert "data_risk" not in by_name[tool]
    chat = by_name["gen_ai:chat"]["data_risk"]["action_profile"]
    assert chat["external_communication"] == "allowed"


def test_sensitive_attribute_patterns_and_their_configuration() -> None:
    settings = MappingSettings()
    assert settings.is_sensitive("gen_ai.input.messages")
    assert settings.is_sensitive("llm.input_messages.0.message.content")
    assert not settings.is_sensitive("gen_ai.request.model")
    assert not settings.is_sensitive("llm.input_messages")
    replaced = MappingSettings.from_text("customer.email, customer.*.phone")
    assert replaced.is_sensitive("customer.email")
    assert replaced.is_sensitive("customer.home.phone")
    assert not replaced.is_sensitive("gen_ai.input.messages")
    extended = MappingSettings.from_text("+customer.email")
    assert extended.is_sensitive("customer.email") and extended.is_sensitive("input.value")
    assert MappingSettings.from_text("  ") == MappingSettings()
    assert MappingSettings.from_text("a.b+c").is_sensitive("a.b+c")


def test_payloads_split_attributes_mark_sensitive_values_and_name_usage_for_cost() -> None:
    span = make(
        attributes={
            "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
            "llm.token_count.prompt": 10, "llm.token_count.completion": 3,
            "input.value": "hello", "llm.input_messages.0.message.content": "hello",
            "tags": ["a", "b"], "output.value": "hi",
        },
        events=(Event("exception", 1_790_000_000_100_000_000, {"exception.message": "x"}),),
        status_code="error", status_message="bad", scope_name="lib", scope_version="1",
    )
    members = span_members(span, span_id="S", parent_id="P", settings=MappingSettings())
    payload, result = members["payload"], members["result_payload"]
    assert members["schema_name"] == "openinference:llm"
    assert members["status"] == "failed"
    assert members["sensitive_encoding"] is True
    assert (members["started_at"], members["finished_at"]) == (
        "2026-09-21T14:13:20.000000Z", "2026-09-21T14:13:20.500000Z")
    assert payload["gen_ai.request.model"] == "gpt-4o"
    assert result["gen_ai.usage.input_tokens"] == 10 and result["llm.token_count.prompt"] == 10
    assert payload["input.value"] == {
        "$sensitive": "string", "labels": ["opentelemetry"], "value": "hello"}
    assert result["output.value"]["$sensitive"] == "string"
    assert payload["tags"] == ["a", "b"]
    assert payload["otel.span"]["scope"] == {"name": "lib", "version": "1"}
    assert result["otel.status"] == {"code": "error", "message": "bad"}
    assert result["otel.events"][0]["attributes"] == {"exception.message": "x"}
    plain = span_members(make(attributes={"gen_ai.operation.name": "chat"}), span_id="S",
                         parent_id=None, settings=MappingSettings())
    assert plain["sensitive_encoding"] is False and plain["status"] == "complete"


def test_lists_of_sensitive_values_are_marked_item_by_item() -> None:
    members = span_members(
        make(attributes={"gen_ai.input.messages": ["a", 1, True, None]}),
        span_id="S", parent_id=None, settings=MappingSettings(),
    )
    assert [item if item is None else item["$sensitive"]
            for item in members["payload"]["gen_ai.input.messages"]] == [
        "string", "number", "boolean", None]


@given(st.text(alphabet="0123456789abcdef", min_size=16, max_size=16))
def test_derived_ids_are_pfids_of_the_run_partition_and_repeat(span_id: str) -> None:
    from datetime import UTC, datetime

    run_id = IdFactory().new(123456, datetime(2026, 1, 1, tzinfo=UTC))
    derived = derived_span_id(run_id, TRACE, span_id)
    assert is_pfid(derived) and extract_partition(derived) == 123456
    assert derived[:10] == run_id[:10]
    assert derived == derived_span_id(run_id, TRACE, span_id)
    assert derived != derived_span_id(run_id, "1" * 32, span_id)


def pfid_derived_span_id(run_id: str, trace_id: str, span_id: str) -> str:
    """The derived id as first written, with the ``pfid`` package's decoder and encoder."""
    digest = hashlib.sha256(f"{run_id}/{trace_id}/{span_id}".encode()).digest()
    return str(pfid.encode(pfid.BinaryPfid(pfid.decode(run_id)[:10] + digest[:10])))


RUN_IDS = st.builds(
    lambda millis, partition, random_part: str(pfid.encode(pfid.BinaryPfid(
        millis.to_bytes(6, "big") + partition.to_bytes(4, "big")
        + random_part.to_bytes(10, "big")
    ))),
    st.integers(0, 2**48 - 1), st.integers(0, 2**30 - 1), st.integers(0, 2**80 - 1),
)


@settings(max_examples=300)
@given(
    run_id=RUN_IDS | RUN_IDS.map(str.upper),
    trace_id=st.text(alphabet="0123456789abcdef", max_size=32) | st.text(),
    span_id=st.text(alphabet="0123456789abcdef", max_size=16) | st.text(),
)
def test_derived_ids_are_those_the_pfid_package_writes(
    run_id: str, trace_id: str, span_id: str
) -> None:
    try:
        expected = pfid_derived_span_id(run_id, trace_id, span_id)
    except UnicodeEncodeError:
        with pytest.raises(UnicodeEncodeError):
            derived_span_id(run_id, trace_id, span_id)
    else:
        assert derived_span_id(run_id, trace_id, span_id) == expected


# Well-formed ids with one character changed (to a letter Crockford's base32 leaves out, say),
# with the Kelvin sign for k (which lower-cases to k), and any text.
@given(
    st.builds(lambda run_id, at, character: run_id[:at] + character + run_id[at + 1:],
              RUN_IDS, st.integers(0, 31), st.characters())
    | RUN_IDS.map(lambda run_id: run_id.replace("k", "\u212a"))
    | st.text(max_size=40)
)
def test_a_run_id_pfid_refuses_is_refused_alike(run_id: str) -> None:
    try:
        expected = pfid_derived_span_id(run_id, TRACE, "00f067aa0ba902b7")
    except pfid.PfidError as error:
        with pytest.raises(pfid.PfidError, match=re.escape(str(error))):
            derived_span_id(run_id, TRACE, "00f067aa0ba902b7")
    else:
        assert derived_span_id(run_id, TRACE, "00f067aa0ba902b7") == expected


def test_a_derived_id_stored_before_is_derived_again() -> None:
    # Spans stored by earlier versions are found again by this id: it must never change.
    run_id = "01kmfm5pp0003rk6q5q9e5bt4k0a0x6n"
    assert derived_span_id(run_id, TRACE, "00f067aa0ba902b7") == (
        pfid_derived_span_id(run_id, TRACE, "00f067aa0ba902b7")
    ) == "01kmfm5pp0003rk6c5kvc08kzdja6bta"


def test_grouping_by_agent_and_trace_puts_parents_first_and_drops_repeats() -> None:
    start = 1_790_000_000_000_000_000
    child = make("0000000000000002", parent_span_id="0000000000000001",
                 start_time_unix_nano=start)
    parent = make("0000000000000001", start_time_unix_nano=start)
    other = make("0000000000000003", resource=Resource({"service.name": "b"}))
    groups, rejected = group_spans([child, parent, child, other, make("")])
    assert [(g.target.agent, [s.span_id for s in g.spans]) for g in groups] == [
        ("unknown_service", ["0000000000000001", "0000000000000002"]),
        ("b", ["0000000000000003"]),
    ]
    assert [r.reason for r in rejected] == ["span_id must be 8 bytes, not all zero"]
    late = make(end_time_unix_nano=1)
    assert group_spans([late])[1][0].reason == (
        "end_time_unix_nano is before start_time_unix_nano")


def test_the_resource_names_agent_version_and_environment() -> None:
    target = run_target({"service.name": "svc", "gen_ai.agent.name": "Planner",
                         "service.version": "3", "deployment.environment.name": "prod"})
    assert (target.agent, target.version, target.environment) == ("Planner", "3", "prod")
    fallback = run_target({"deployment.environment": "dev"})
    assert (fallback.agent, fallback.version, fallback.environment) == (
        "unknown_service", "unversioned", "dev")


def test_evaluation_events_become_quality_payloads() -> None:
    span = make(events=(
        Event("gen_ai.evaluation.result", 1, {
            "gen_ai.evaluation.name": "Relevance", "gen_ai.evaluation.score.value": 0.5,
            "gen_ai.evaluation.score.label": "ok", "gen_ai.evaluation.explanation": "fine",
            "judge": "gpt-4o",
        }),
        Event("gen_ai.evaluation.result", 2, {"gen_ai.evaluation.score.value": 1}),
        Event("exception", 3, {}),
    ))
    assert quality_records(span, "S") == [("Relevance", {
        "agent_span_id": "S", "score": 0.5, "label": "ok", "explanation": "fine",
        "judge": "gpt-4o",
    })]


@pytest.mark.parametrize(("attributes", "expected"), [
    ({"ai.operationId": "ai.generateText.doGenerate"}, "ai:generate_text.do_generate"),
    ({"ai.operationId": "ai.embedMany"}, "ai:embed_many"),
    ({"ai.operationId": "ai.toolCall"}, "ai:tool_call"),
    ({"ai.operationId": "other.thing"}, "otel:span"),
])
def test_the_vercel_ai_sdk_operation_is_the_span_type(
    attributes: dict[str, object], expected: str,
) -> None:
    assert schema_name(attributes) == expected
    assert expected in {entry["name"] for entry in DEFAULT_SPAN_TYPES} | {"otel:span"}


@pytest.mark.parametrize(("attributes", "model_call"), [
    ({"gen_ai.operation.name": "chat"}, True),
    ({"gen_ai.operation.name": "embeddings"}, True),
    ({"gen_ai.operation.name": "invoke_agent"}, False),
    ({"gen_ai.operation.name": "execute_tool", "llm.request.type": "chat"}, False),
    ({"openinference.span.kind": "LLM"}, True),
    ({"openinference.span.kind": "EMBEDDING"}, True),
    ({"openinference.span.kind": "AGENT"}, False),
    ({"openinference.span.kind": "CHAIN"}, False),
    ({"traceloop.span.kind": "workflow", "llm.request.type": "chat"}, False),
    ({"llm.request.type": "chat"}, True),
    ({"llm.request.type": "rerank"}, False),
    ({"ai.operationId": "ai.streamText.doStream"}, True),
    ({"ai.operationId": "ai.embedMany.doEmbed"}, True),
    ({"ai.operationId": "ai.streamText"}, False),
    ({"gen_ai.usage.input_tokens": 5, "gen_ai.request.model": "gpt-4o"}, False),
])
def test_only_model_calls_count_usage(attributes: dict[str, object], model_call: bool) -> None:
    assert counts_usage(attributes) is model_call
    members = span_members(
        make(attributes={**attributes, "llm.token_count.prompt": 7}),
        span_id="S", parent_id=None, settings=MappingSettings(),
    )
    result = members["result_payload"]
    assert ("gen_ai.usage.input_tokens" in result) is model_call
    assert ("otel.uncounted_usage" in result) is not model_call


def test_tools_and_agents_are_named_from_each_convention() -> None:
    assert tool_type({"gen_ai.operation.name": "execute_tool",
                      "gen_ai.tool.name": "Send Email!"}) == "tool:send_email"
    assert tool_type({"openinference.span.kind": "TOOL", "tool.name": "search"}) == "tool:search"
    assert tool_type({"ai.operationId": "ai.toolCall", "ai.toolCall.name": "lookupOrder"}) == (
        "tool:lookuporder")
    assert tool_type({"traceloop.span.kind": "tool", "traceloop.entity.name": "fetch"}) == (
        "tool:fetch")
    assert tool_type({"gen_ai.operation.name": "execute_tool"}) is None
    assert tool_type({"gen_ai.operation.name": "chat", "gen_ai.tool.name": "x"}) is None
    assert agent_name({"gen_ai.agent.name": " planner "}) == "planner"
    assert agent_name({"openinference.span.kind": "AGENT", "agent.name": "Triage"}) == "Triage"
    assert agent_name({"traceloop.span.kind": "agent", "traceloop.entity.name": "writer"}) == (
        "writer")
    assert agent_name({"traceloop.span.kind": "task", "traceloop.entity.name": "step"}) is None
    members = span_members(make(attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_email"}),
        span_id="S", parent_id=None, settings=MappingSettings(),
        declared=frozenset({"tool:send_email"}))
    assert members["schema_name"] == "tool:send_email"
    assert span_members(make(attributes={
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "send_email"}),
        span_id="S", parent_id=None, settings=MappingSettings(),
    )["schema_name"] == "gen_ai:execute_tool"



@given(
    st.text(alphabet="0123456789abcdef", min_size=16, max_size=16),
    st.integers(0, 15),
    st.sampled_from(["", "g", "A", "F", "-", " ", "x"]),
)
def test_a_span_id_is_taken_only_as_sixteen_lowercase_hex_digits_not_all_zero(
    digits: str, place: int, other: str
) -> None:
    span_id = digits[:place] + other + digits[place + 1:] if other else digits
    groups, rejected = group_spans([make(span_id)])
    valid = not other and set(digits) != {"0"}
    assert (len(groups), len(rejected)) == ((1, 0) if valid else (0, 1))
