"""Recording spans as agents do, for the tests of back-testing and the detective judge."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from governance_core.clock import FixedClock, format_timestamp
from tests.policies.support import RunWorld

READS_EVERY_FIGURE = (
    "forbid (principal, action, resource) when {"
    " context.run.cost_micro_usd < 0 && context.run.input_tokens < 0"
    " && context.run.output_tokens < 0 && context.run.risk_score < 0"
    ' && context.run.risk_level == "x" && context.run.peak_classification == "x"'
    ' && context.run.data_categories.contains("x") && context.run.span_count < 0'
    " && context.run.tool_calls < 0 && context.run.elapsed_ms < 0"
    " && context.agent.cost_today_micro_usd < 0 };"
)
"""A policy that reads every figure of the request (and matches nothing)."""


def record(
    world: RunWorld,
    run_id: str,
    schema_name: str,
    payload: dict[str, Any] | None = None,
    *,
    result: dict[str, Any] | None = None,
    started_at: str | None = None,
    sensitive: bool = False,
) -> str:
    """Record a complete activity span on the run; its id."""
    body: dict[str, Any] = {
        "agent_instance_id": run_id, "schema_name": schema_name, "status": "complete",
        "payload": payload or {},
    }
    if result is not None:
        body["result_payload"] = result
    if started_at is not None:
        body["started_at"] = started_at
    if sensitive:
        body["sensitive_encoding"] = True
    span_id: str = world.session.details("agent_spans/create", body)["id"]
    return span_id


def model_call(world: RunWorld, run_id: str, input_tokens: int, output_tokens: int = 0) -> str:
    """Record a call of ``test-model`` (1 micro-dollar an input token, 2 an output token)."""
    return record(world, run_id, "llm", {"model": "test-model"},
                  result={"usage": {"input_tokens": input_tokens,
                                    "output_tokens": output_tokens}})


def later(world: RunWorld, delta: timedelta) -> str:
    """The timestamp ``delta`` after the world's clock now (the clock does not move)."""
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    return format_timestamp(clock.now + delta)


def advance(world: RunWorld, delta: timedelta) -> None:
    """Move the world's clock on by ``delta``."""
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    clock.advance(delta)
