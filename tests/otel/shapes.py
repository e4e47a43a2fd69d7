"""Traces shaped as real instrumentations send them, recorded with the OpenTelemetry SDK.

Each ``record_*`` function makes the spans one library makes, with its attribute names and
nesting (read from the library's source), so the tests recording them need no network and
no model. Spans are exported as they end, children before their parent, as with the SDK's
span processors.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import SpanKind

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.ids import SeededIds
from governance_core.otel import Span
from governance_core.otel.exporter import from_readable_span
from governance_core.service import Governance, Session
from governance_core.storage import MemoryStore
from tests.otel.traces import memory_batches

CHATS = ({"input": 1000, "output": 200}, {"input": 1400, "output": 90})
"""The two model calls each agent trace makes: their input and output tokens."""

TOTALS = {
    "input": sum(chat["input"] for chat in CHATS), "output": sum(chat["output"] for chat in CHATS),
}


def exported(record: Callable[[TracerProvider], None]) -> list[Span]:
    """The plain spans ``record`` makes, in the order the SDK exports them."""
    return [from_readable_span(span) for batch in memory_batches(record) for span in batch]


def record_vercel_otel_agent(provider: TracerProvider) -> None:
    """``@ai-sdk/otel``: ``invoke_agent`` with the agent's totals over two ``chat`` calls."""
    tracer = provider.get_tracer("ai-sdk-otel", "1.0.0")
    with tracer.start_as_current_span("invoke_agent weather", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
        "gen_ai.usage.input_tokens": TOTALS["input"],
        "gen_ai.usage.output_tokens": TOTALS["output"],
    }):
        for chat in CHATS:
            with tracer.start_as_current_span("chat gpt-4o", kind=SpanKind.CLIENT, attributes={
                "gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                "gen_ai.request.model": "gpt-4o", "gen_ai.response.model": "gpt-4o-2024-08-06",
                "gen_ai.usage.input_tokens": chat["input"],
                "gen_ai.usage.output_tokens": chat["output"],
            }):
                pass
        with tracer.start_as_current_span("execute_tool get_weather", attributes={
            "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
        }):
            pass


def record_smolagents(provider: TracerProvider) -> None:
    """OpenInference for smolagents: an AGENT span with the run's totals over step CHAINs.

    The model's spans name the model (``llm.model_name``) and no provider, as smolagents'
    ``OpenAIServerModel`` is traced; the agent span names no model.
    """
    tracer = provider.get_tracer("openinference.instrumentation.smolagents", "0.1.43")
    with tracer.start_as_current_span("CodeAgent.run", attributes={
        "openinference.span.kind": "AGENT", "input.value": "What is the weather in Paris?",
        "llm.token_count.prompt": TOTALS["input"],
        "llm.token_count.completion": TOTALS["output"],
        "llm.token_count.total": TOTALS["input"] + TOTALS["output"],
    }):
        for step, chat in enumerate(CHATS, start=1):
            with tracer.start_as_current_span(f"Step {step}", attributes={
                "openinference.span.kind": "CHAIN",
            }):
                with tracer.start_as_current_span("OpenAIServerModel.generate", attributes={
                    "openinference.span.kind": "LLM", "llm.model_name": "gpt-4o",
                    "llm.token_count.prompt": chat["input"],
                    "llm.token_count.completion": chat["output"],
                    "llm.token_count.total": chat["input"] + chat["output"],
                }):
                    pass
                if step == 1:
                    with tracer.start_as_current_span("get_weather", attributes={
                        "openinference.span.kind": "TOOL", "tool.name": "get_weather",
                    }):
                        pass


def record_pydantic_ai(provider: TracerProvider, *, aggregated: bool = True) -> None:
    """pydantic-ai: ``invoke_agent`` with ``gen_ai.aggregated_usage.*`` (or, with
    ``use_aggregated_usage_attribute_names=False``, ``gen_ai.usage.*``) over ``chat`` spans."""
    tracer = provider.get_tracer("pydantic-ai", "1.0.0")
    prefix = "gen_ai.aggregated_usage." if aggregated else "gen_ai.usage."
    with tracer.start_as_current_span("invoke_agent support", attributes={
        "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "support",
        "agent_name": "support", "model_name": "claude-sonnet-4-5",
        prefix + "input_tokens": TOTALS["input"], prefix + "output_tokens": TOTALS["output"],
    }):
        for chat in CHATS:
            with tracer.start_as_current_span("chat claude-sonnet-4-5", attributes={
                "gen_ai.operation.name": "chat", "gen_ai.system": "anthropic",
                "gen_ai.request.model": "claude-sonnet-4-5",
                "gen_ai.usage.input_tokens": chat["input"],
                "gen_ai.usage.output_tokens": chat["output"],
            }):
                pass


def record_vercel_legacy(provider: TracerProvider) -> None:
    """The Vercel AI SDK's own telemetry (``experimental_telemetry``), as ``ai`` 5 writes it.

    ``ai.generateText`` carries the totals of its ``doGenerate`` steps; a tool call sits
    between them; ``ai.embed`` wraps one ``doEmbed``; both under the request's server span.
    """
    tracer = provider.get_tracer("ai", "5.0.100")
    # One request of the application (a Next.js route) makes both calls.
    with tracer.start_as_current_span("POST /api/support", kind=SpanKind.SERVER):
        model = {"ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai.chat"}
        with tracer.start_as_current_span("ai.generateText", attributes={
            "operation.name": "ai.generateText support", "ai.operationId": "ai.generateText",
            "ai.telemetry.functionId": "support", **model,
            "ai.prompt": '{"prompt":"Where is order 42?"}',
            "ai.usage.promptTokens": TOTALS["input"],
            "ai.usage.completionTokens": TOTALS["output"],
        }):
            for step, chat in enumerate(CHATS):
                with tracer.start_as_current_span("ai.generateText.doGenerate", attributes={
                    "operation.name": "ai.generateText.doGenerate support",
                    "ai.operationId": "ai.generateText.doGenerate", **model,
                    "ai.prompt.messages": '[{"role":"user","content":"Where is order 42?"}]',
                    "gen_ai.system": "openai.chat", "gen_ai.request.model": "gpt-4o-mini",
                    "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
                    "ai.usage.promptTokens": chat["input"],
                    "ai.usage.completionTokens": chat["output"],
                    "gen_ai.usage.input_tokens": chat["input"],
                    "gen_ai.usage.output_tokens": chat["output"],
                    "ai.response.text": "Order 42 has shipped." if step else "",
                }):
                    pass
                if step == 0:
                    with tracer.start_as_current_span("ai.toolCall", attributes={
                        "operation.name": "ai.toolCall support",
                        "ai.operationId": "ai.toolCall",
                        "ai.toolCall.name": "lookupOrder", "ai.toolCall.id": "call_1",
                        "ai.toolCall.args": '{"order":42}', "ai.toolCall.result": '"shipped"',
                    }):
                        pass
        embedding = {
            "ai.model.id": "text-embedding-3-small", "ai.model.provider": "openai.embedding",
        }
        with tracer.start_as_current_span("ai.embed", attributes={
            "operation.name": "ai.embed", "ai.operationId": "ai.embed", **embedding,
            "ai.value": '"order 42"', "ai.usage.tokens": 12,
        }), tracer.start_as_current_span("ai.embed.doEmbed", attributes={
            "operation.name": "ai.embed.doEmbed", "ai.operationId": "ai.embed.doEmbed",
            **embedding, "ai.values": ['"order 42"'], "ai.usage.tokens": 12,
        }):
            pass


def new_governance(clock: FixedClock | None = None) -> tuple[Governance, Session]:
    """An in-memory store and the session of its one account."""
    gov = Governance(MemoryStore(), clock=clock or FixedClock(), ids=SeededIds(11),
                     config=Config(cipher=PlaintextForTests()))
    return gov, gov.as_account(gov.bootstrap().account_id)


def price_of(gov: Governance, model: str, tokens: dict[str, int]) -> Decimal:
    """What ``tokens`` (input and output, no cache) of ``model`` cost in the catalogue."""
    price = gov.config.pricing.lookup(model)
    assert price is not None and price.input_cost_per_token is not None
    assert price.output_cost_per_token is not None
    return (
        tokens["input"] * price.input_cost_per_token
        + tokens.get("output", 0) * price.output_cost_per_token
    )


def groups(run: dict[str, Any]) -> dict[tuple[str, str | None], dict[str, Any]]:
    """The run's cost groups by (model, provider)."""
    breakdown = run["cost_breakdown"] or {"groups": []}
    return {(group["model_name"], group["provider"]): group for group in breakdown["groups"]}


def by_name(spans: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """The run's activity spans with their OTel names."""
    for span in spans:
        if span["purpose"] == "activity":
            yield span["payload"]["otel.span"]["name"], span
