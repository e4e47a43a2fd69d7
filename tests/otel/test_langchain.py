"""LangChain, instrumented by OpenInference, exported over OTLP to a real server (no network).

A small tool-calling agent: a fake chat model (langchain_core's ``GenericFakeChatModel``,
reporting token usage and an OpenAI model name) asks for a tool call, the tool runs, and the
model answers. The run, its tool span and its cost must be what the agent did.
"""

from __future__ import annotations

from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from openinference.instrumentation.langchain import LangChainInstrumentor
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from governance_core.service import Bootstrap, Governance
from tests.http.server import Served
from tests.otel.traces import as_decimal, runs, spans

pytestmark = pytest.mark.slow

MODEL = "gpt-4o-mini"
USAGE = ({"input_tokens": 120, "output_tokens": 15}, {"input_tokens": 160, "output_tokens": 8})


class FakeOpenAIChat(GenericFakeChatModel):
    """A fake chat model that names its model and provider as LangChain's OpenAI model does."""

    model_name: str = MODEL

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> Any:
        params = super()._get_ls_params(stop=stop, **kwargs)
        params["ls_provider"] = "openai"
        params["ls_model_name"] = self.model_name
        return params


@tool
def lookup_order(order_id: int) -> str:
    """Look up an order's delivery status."""
    return f"order {order_id}: shipped"


def replies() -> Iterator[AIMessage]:
    first, second = USAGE
    yield AIMessage(
        content="", tool_calls=[{"name": "lookup_order", "args": {"order_id": 42}, "id": "c1"}],
        usage_metadata={**first, "total_tokens": sum(first.values())},
    )
    yield AIMessage(content="Order 42 has shipped.",
                    usage_metadata={**second, "total_tokens": sum(second.values())})


@pytest.fixture
def provider(server: Served, accounts: dict[str, Bootstrap]) -> Iterator[TracerProvider]:
    exporter = OTLPSpanExporter(
        endpoint=server.base_url + "/v1/traces",
        headers={"Authorization": f"Bearer {accounts['langchain'].token}"},
    )
    traced = TracerProvider(resource=Resource.create({"service.name": "support-bot"}))
    traced.add_span_processor(BatchSpanProcessor(exporter))
    instrumentor = LangChainInstrumentor()
    instrumentor.instrument(tracer_provider=traced)
    try:
        yield traced
    finally:
        instrumentor.uninstrument()
        traced.shutdown()


def test_a_langchain_agent_is_recorded_with_its_tool_span_and_cost(
    provider: TracerProvider, accounts: dict[str, Bootstrap], reader: Governance,
) -> None:
    model = FakeOpenAIChat(messages=replies())

    def agent(question: str) -> str:
        messages: list[BaseMessage] = [HumanMessage(question)]
        reply = model.invoke(messages)
        messages.append(reply)
        messages += [lookup_order.invoke(call) for call in reply.tool_calls]
        return str(model.invoke(messages).content)

    answer = RunnableLambda(agent).with_config(run_name="support_agent").invoke("Order 42?")
    assert answer == "Order 42 has shipped."
    assert provider.force_flush()

    session = reader.session(accounts["langchain"].token)
    [run] = runs(session)
    assert run["status"] == "complete"
    assert run["span_schema_counts"]["by_name"] == {
        "openinference:agent": 1, "openinference:llm": 2, "openinference:tool": 1,
    }
    recorded = spans(session, run["id"])
    [root] = [span for span in recorded if span["schema_name"] == "openinference:agent"]
    [tool_span] = [span for span in recorded if span["schema_name"] == "openinference:tool"]
    assert root["parent_span_id"] is None
    assert tool_span["parent_span_id"] == root["id"]
    assert tool_span["payload"]["tool.name"] == "lookup_order"
    # What the tool was given and answered is kept as sensitive values.
    assert tool_span["payload"]["input.value"]["$sensitive"] == "string"
    assert "value" not in tool_span["payload"]["input.value"]
    shown = session.details("agent_spans/show", agent_span_id=tool_span["id"])
    assert "shipped" in shown["result_payload"]["output.value"]["value"]

    price = reader.config.pricing.lookup(MODEL, "openai")
    assert price is not None
    assert price.input_cost_per_token is not None and price.output_cost_per_token is not None
    tokens_in = sum(usage["input_tokens"] for usage in USAGE)
    tokens_out = sum(usage["output_tokens"] for usage in USAGE)
    [group] = run["cost_breakdown"]["groups"]
    assert (group["model_name"], group["provider"]) == (MODEL, "openai")
    assert (group["input"], group["output"]) == (tokens_in, tokens_out)
    expected: Decimal = (
        tokens_in * price.input_cost_per_token + tokens_out * price.output_cost_per_token
    )
    assert as_decimal(run["cost_breakdown"]["total_cost"]) == expected
    # A tool call declares no data risk until the user declares it; the model calls do.
    per_type = {row["schema_name"] for row in run["risk_score"]["per_type"]}
    assert per_type == {"openinference:agent", "openinference:llm", "openinference:tool"}
    types = session.details(
        "agent_schema_versions/show", agent_schema_version_id=run["agent_schema_version_id"],
    )["span_type_schemas"]
    assert types["openinference:tool"].get("data_risk") is None
    assert types["openinference:llm"]["data_risk"]["action_profile"][
        "external_communication"] == "allowed"
