"""What real instrumentations send becomes true runs: usage once, priced, attributed, typed.

Traces are shaped as the libraries make them (:mod:`tests.otel.shapes`) and recorded through
:func:`governance_core.otel.ingest`, in the order the SDK exports them and in others.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider

from governance_core.otel import Span, ingest
from governance_core.otel.mapping import UNCOUNTED_USAGE
from governance_core.service import Governance, Session
from tests.otel.shapes import (
    TOTALS,
    by_name,
    exported,
    groups,
    new_governance,
    price_of,
    record_pydantic_ai,
    record_smolagents,
    record_vercel_legacy,
    record_vercel_otel_agent,
)
from tests.otel.traces import as_decimal, runs, spans

ORDERS: dict[str, Callable[[list[Span]], list[list[Span]]]] = {
    "children first, one export each": lambda sent: [[span] for span in sent],
    "parents first, one export each": lambda sent: [[span] for span in reversed(sent)],
    "one export": lambda sent: [list(sent)],
    "parents first in one export": lambda sent: [list(reversed(sent))],
}


def record(record: Callable[[TracerProvider], None], order: str = "one export") -> tuple[
    Governance, Session, dict[str, Any]
]:
    """Record the trace ``record`` makes, sent in ``order``; the store, session and run."""
    gov, session = new_governance()
    for export in ORDERS[order](exported(record)):
        result = ingest(gov, session.principal, export)
        assert result.rejected == ()
    [run] = runs(session)
    return gov, session, run


@pytest.mark.parametrize("order", ORDERS)
def test_vercel_ai_sdk_agent_totals_are_not_counted_again(order: str) -> None:
    gov, session, run = record(record_vercel_otel_agent, order)
    [(key, group)] = groups(run).items()
    assert key == ("gpt-4o", "openai")
    assert (group["input"], group["output"]) == (TOTALS["input"], TOTALS["output"])
    assert as_decimal(run["cost_breakdown"]["total_cost"]) == price_of(gov, "gpt-4o", TOTALS)
    # The agent's own totals stay visible on its span, where cost does not read them.
    [agent] = [span for name, span in by_name(spans(session, run["id"]))
               if name == "invoke_agent weather"]
    assert agent["result_payload"][UNCOUNTED_USAGE] == {
        "gen_ai.usage.input_tokens": TOTALS["input"],
        "gen_ai.usage.output_tokens": TOTALS["output"],
    }
    assert "gen_ai.usage.input_tokens" not in agent["result_payload"]


@pytest.mark.parametrize("order", ORDERS)
def test_smolagents_totals_add_no_tokens_and_no_unknown_model(order: str) -> None:
    gov, _, run = record(record_smolagents, order)
    assert list(groups(run)) == [("gpt-4o", "openai")]
    [group] = groups(run).values()
    assert (group["input"], group["output"]) == (TOTALS["input"], TOTALS["output"])
    assert as_decimal(run["cost_breakdown"]["total_cost"]) == price_of(gov, "gpt-4o", TOTALS)


@pytest.mark.parametrize("aggregated", [True, False])
def test_pydantic_ai_agent_usage_counts_once(aggregated: bool) -> None:
    gov, _, run = record(lambda provider: record_pydantic_ai(provider, aggregated=aggregated))
    [(key, group)] = groups(run).items()
    assert key == ("claude-sonnet-4-5", "anthropic")
    assert (group["input"], group["output"]) == (TOTALS["input"], TOTALS["output"])
    assert as_decimal(run["cost_breakdown"]["total_cost"]) == price_of(
        gov, "claude-sonnet-4-5", TOTALS)


def test_an_agent_span_reporting_only_totals_counts_no_usage() -> None:
    def totals_only(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("totals-only")
        with tracer.start_as_current_span("invoke_agent planner", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.request.model": "gpt-4o",
            "gen_ai.usage.input_tokens": 500, "gen_ai.usage.output_tokens": 50,
        }), tracer.start_as_current_span("execute_tool search", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "search",
        }):
            pass

    _, session, run = record(totals_only)
    assert run["cost_breakdown"] is None
    [agent] = [span for name, span in by_name(spans(session, run["id"]))
               if name == "invoke_agent planner"]
    assert agent["result_payload"][UNCOUNTED_USAGE]["gen_ai.usage.input_tokens"] == 500


def test_embeddings_are_priced_and_openinference_names_their_model() -> None:
    def embed(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("embeddings")
        with tracer.start_as_current_span("retrieve", attributes={
            "openinference.span.kind": "CHAIN",
        }):
            with tracer.start_as_current_span("OpenAI embeddings", attributes={
                "openinference.span.kind": "EMBEDDING",
                "embedding.model_name": "text-embedding-3-small",
                "llm.token_count.prompt": 800, "llm.token_count.total": 800,
            }):
                pass
            with tracer.start_as_current_span("embeddings text-embedding-3-small", attributes={
                "gen_ai.operation.name": "embeddings", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "text-embedding-3-small",
                "gen_ai.usage.input_tokens": 200,
            }):
                pass

    gov, _, run = record(embed)
    [(key, group)] = groups(run).items()
    assert key == ("text-embedding-3-small", "openai")
    assert (group["input"], group["output"]) == (1000, 0)
    assert as_decimal(group["total_cost"]) == price_of(
        gov, "text-embedding-3-small", {"input": 1000}) > 0


def test_the_provider_comes_from_the_catalogue_when_the_span_names_none() -> None:
    def unnamed(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("manual")
        with tracer.start_as_current_span("answer"):
            for model in ("gpt-4o", "claude-sonnet-4-5"):
                with tracer.start_as_current_span(f"chat {model}", attributes={
                    "gen_ai.operation.name": "chat", "gen_ai.request.model": model,
                    "gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 1,
                }):
                    pass

    _, _, run = record(unnamed)
    assert list(groups(run)) == [("claude-sonnet-4-5", "anthropic"), ("gpt-4o", "openai")]


def test_the_vercel_ai_sdk_legacy_telemetry_is_typed_counted_once_and_priced() -> None:
    gov, session, run = record(record_vercel_legacy)
    assert groups(run).keys() == {("gpt-4o-mini", "openai"), ("text-embedding-3-small", "openai")}
    chat = groups(run)[("gpt-4o-mini", "openai")]
    assert (chat["input"], chat["output"]) == (TOTALS["input"], TOTALS["output"])
    assert groups(run)[("text-embedding-3-small", "openai")]["input"] == 12
    expected = price_of(gov, "gpt-4o-mini", TOTALS) + price_of(
        gov, "text-embedding-3-small", {"input": 12})
    assert as_decimal(run["cost_breakdown"]["total_cost"]) == expected
    assert run["span_schema_counts"]["by_name"] == {
        "otel:span": 1, "ai:generate_text": 1, "ai:generate_text.do_generate": 2, "ai:tool_call": 1,
        "ai:embed": 1, "ai:embed.do_embed": 1,
    }
    recorded = dict(by_name(spans(session, run["id"])))
    call = recorded["ai.generateText.doGenerate"]
    assert call["payload"]["gen_ai.provider.name"] == "openai"
    assert call["payload"]["ai.prompt.messages"]["$sensitive"] == "string"
    assert recorded["ai.toolCall"]["payload"]["ai.toolCall.args"]["$sensitive"] == "string"
    assert recorded["ai.generateText"]["result_payload"][UNCOUNTED_USAGE] == {
        "ai.usage.promptTokens": TOTALS["input"],
        "ai.usage.completionTokens": TOTALS["output"],
    }
    # Model calls send their prompt to the provider: the run's risk says so.
    assert "external_communication" in run["risk_score"]["allowed_actions"]


def test_each_span_names_the_agent_that_took_it() -> None:
    def handoff(provider: TracerProvider) -> None:
        tracer = provider.get_tracer("agents")
        # Under a GenAI agent, the OpenAI Agents SDK through OpenInference: an AGENT span
        # per agent, named by agent.name.
        with tracer.start_as_current_span("invoke_agent triage", attributes={
            "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "triage",
        }), tracer.start_as_current_span("Billing agent", attributes={
            "openinference.span.kind": "AGENT", "agent.name": "Billing agent",
            "graph.node.id": "Billing agent",
        }), tracer.start_as_current_span("chat gpt-4o", attributes={
            "gen_ai.operation.name": "chat", "gen_ai.request.model": "gpt-4o",
        }):
            pass

    _, session, run = record(handoff)
    recorded = dict(by_name(spans(session, run["id"])))
    agents = {name: span["payload"]["otel.span"]["agent"] for name, span in recorded.items()}
    assert agents == {
        "invoke_agent triage": "triage", "Billing agent": "Billing agent", "chat gpt-4o": None,
    }
    # The run's tree (the console's) shows each span's summary: the agent, then the span.
    summaries = {
        name: session.details("agent_spans/show", agent_span_id=span["id"])["summary"]
        for name, span in recorded.items()
    }
    assert summaries == {
        "invoke_agent triage": "triage: invoke_agent triage",
        "Billing agent": "Billing agent: Billing agent", "chat gpt-4o": "chat gpt-4o",
    }
    by_id = {span["id"]: name for name, span in recorded.items()}
    assert by_id[recorded["chat gpt-4o"]["parent_span_id"]] == "Billing agent"


def _tools(provider: TracerProvider) -> None:
    tracer = provider.get_tracer("assistant")
    with tracer.start_as_current_span("invoke_agent assistant", attributes={
        "gen_ai.operation.name": "invoke_agent",
    }):
        for tool in ("read_calendar", "send_email"):
            with tracer.start_as_current_span(f"execute_tool {tool}", attributes={
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": tool,
            }):
                pass


def test_each_tool_takes_its_own_type_once_declared() -> None:
    gov, session = new_governance()
    ingest(gov, session.principal, exported(_tools))
    [first] = runs(session)
    assert first["span_schema_counts"]["by_name"]["gen_ai:execute_tool"] == 2

    # The user declares send_email alone, keeping the defaults for everything else.
    from governance_core.otel import DEFAULT_SPAN_TYPES

    send_email = {
        "name": "tool:send_email", "params_schema": {"type": "object"},
        "data_risk": {"action_profile": {"external_communication": "allowed"},
                      "params_data_categories": {"contact_information": "included"}},
    }
    session.call("agent_instances/register", agent_id=first["agent_id"],
                 agent_version={"external_identifier": "2.1.0"},
                 agent_schema_version={"external_identifier": "assistant-2.1.0",
                                       "span_type_schemas": [*DEFAULT_SPAN_TYPES, send_email]})
    ingest(gov, session.principal, exported(_tools))
    [second] = [run for run in runs(session)
                if run["id"] != first["id"] and run["external_identifier"]]
    assert second["span_schema_counts"]["by_name"] == {
        "gen_ai:invoke_agent": 1, "gen_ai:execute_tool": 1, "tool:send_email": 1,
    }
    assert second["risk_score"]["all_data_categories"] == ["contact_information"]
    recorded = dict(by_name(spans(session, second["id"])))
    assert recorded["execute_tool send_email"]["schema_known"] is True
    assert recorded["execute_tool read_calendar"]["schema_name"] == "gen_ai:execute_tool"
