"""Run cost breakdowns through real spans: every usage form, finishes, prices on read."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance_core.context import Config
from governance_core.rules.cost import extract_usage, load_catalogue
from governance_core.service import Bootstrap, Governance
from tests.core.insight_world import InsightWorld, insight_world, register_insight_run
from tests.core.runs import fresh_caller, make_agent

# The snapshot's prices of the three models, pinned so that a snapshot refresh cannot move
# the hand-computed figures below (USD per token).
PRICES = load_catalogue({
    "gpt-4o": {"input_cost_per_token": 2.5e-6, "output_cost_per_token": 1e-5,
               "cache_read_input_token_cost": 1.25e-6, "context_limit": 128000},
    "claude-sonnet-4-5": {"input_cost_per_token": 3e-6, "output_cost_per_token": 1.5e-5,
                          "cache_read_input_token_cost": 3e-7, "context_limit": 200000},
    "gpt-4o-mini": {"input_cost_per_token": 1.5e-7, "output_cost_per_token": 6e-7,
                    "cache_read_input_token_cost": 7.5e-8, "context_limit": 128000},
})


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> InsightWorld:
    gov.config = Config(pricing=PRICES)
    return insight_world(gov, boot)


def cost(world: InsightWorld) -> Any:
    return world.show()["cost_breakdown"]


def group(breakdown: dict[str, Any], model: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [g for g in breakdown["groups"] if g["model_name"] == model]
    assert len(found) == 1
    return found[0]


def test_no_breakdown_until_a_span_reports_usage(world: InsightWorld) -> None:
    assert cost(world) is None
    world.span("llm", payload={"model": "gpt-4o", "prompt": "no usage here"})
    assert cost(world) is None


def test_three_models_in_four_forms_priced_by_hand(world: InsightWorld) -> None:
    # Python LangChain: model in the payload, usage (cached tokens included) in the result.
    first = world.span("llm", status="active",
                       payload={"model_name": "gpt-4o", "provider": "openai"})
    world.finish(first["id"], result_payload={"token_usage": {
        "prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
        "prompt_tokens_details": {"cached_tokens": 400},
    }})
    # TypeScript: created finished, usage in the payload.
    world.span("llm", payload={"model_name": "gpt-4o", "provider": "openai", "token_usage": {
        "prompt_tokens": 500, "completion_tokens": 100, "total_tokens": 600,
    }})
    world.span("llm", payload={"model": "claude-sonnet-4-5", "provider": "anthropic"},
               result_payload={"usage": {"input_tokens": 2000, "output_tokens": 500,
                                         "cache_read_input_tokens": 1000}})
    world.span("llm", payload={"model": "gpt-4o-mini", "provider": "openai", "tokens": {
        "input": 10000, "output": 2000, "cacheRead": 4000, "cacheWrite": 0,
    }})
    breakdown = cost(world)
    assert [g["model_name"] for g in breakdown["groups"]] == [
        "claude-sonnet-4-5", "gpt-4o", "gpt-4o-mini",
    ]
    gpt4o = group(breakdown, "gpt-4o")
    assert (gpt4o["provider"], gpt4o["input"], gpt4o["output"], gpt4o["cache_read"]) == (
        "openai", 1300, 400, 400,
    )
    # 1300 x 2.5e-6, 400 x 1e-5, 400 x 1.25e-6
    assert (gpt4o["input_cost"], gpt4o["output_cost"], gpt4o["cache_read_cost"]) == (
        0.00325, 0.004, 0.0005,
    )
    assert gpt4o["total_cost"] == 0.00775 and gpt4o["context_limit"] == 128000
    assert gpt4o["pricing_version"] == PRICES.version
    claude = group(breakdown, "claude-sonnet-4-5")
    assert (claude["input"], claude["output"], claude["cache_read"]) == (2000, 500, 1000)
    assert claude["total_cost"] == 0.0138  # 0.006 + 0.0075 + 0.0003
    mini = group(breakdown, "gpt-4o-mini")
    assert mini["total_cost"] == 0.003  # 0.0015 + 0.0012 + 0.0003
    assert (breakdown["input"], breakdown["output"], breakdown["cache_read"]) == (
        13300, 2900, 5400,
    )
    assert breakdown["input_cost"] == 0.01075
    assert breakdown["output_cost"] == 0.0127
    assert breakdown["cache_read_cost"] == 0.0011
    assert breakdown["total_cost"] == 0.02455


def test_opentelemetry_and_ai_sdk_forms(world: InsightWorld) -> None:
    world.span("llm", payload={
        "gen_ai.request.model": "gpt-4o-mini", "gen_ai.provider.name": "openai",
        "gen_ai.usage.input_tokens": 600, "gen_ai.usage.output_tokens": 50,
        "gen_ai": {"usage": {"cache_read": {"input_tokens": 100}}},
    })
    world.span("llm", payload={
        "inputs": {"ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai"},
        "tokens": {"input": 400, "output": 50},
    })
    mini = group(cost(world), "gpt-4o-mini")
    assert (mini["input"], mini["output"], mini["cache_read"]) == (900, 100, 100)


def test_a_span_finished_with_usage_counts_once_with_its_latest_payloads(
    world: InsightWorld,
) -> None:
    # The create reports one usage, the finish's result another: the result's wins.
    span = world.span("llm", status="active", payload={
        "model": "gpt-4o", "token_usage": {"prompt_tokens": 100, "completion_tokens": 10},
    })
    assert group(cost(world), "gpt-4o")["input"] == 100
    world.finish(span["id"], result_payload={
        "model": "gpt-4o", "usage": {"input_tokens": 300, "output_tokens": 30},
    })
    breakdown = cost(world)
    assert (breakdown["input"], breakdown["output"]) == (300, 30)
    # A finish without a result keeps the create's usage, counted once.
    kept = world.span("llm", status="active", payload={
        "model": "gpt-4o", "tokens": {"input": 7, "output": 3},
    })
    world.finish(kept["id"])
    assert (cost(world)["input"], cost(world)["output"]) == (307, 33)


def test_a_finish_naming_another_model_moves_the_span_to_that_group(
    world: InsightWorld,
) -> None:
    span = world.span("llm", status="active", payload={
        "model": "gpt-4o", "tokens": {"input": 10, "output": 1},
    })
    world.finish(span["id"], result_payload={
        "model": "claude-sonnet-4-5", "usage": {"input_tokens": 20, "output_tokens": 2},
    })
    breakdown = cost(world)
    assert [g["model_name"] for g in breakdown["groups"]] == ["claude-sonnet-4-5"]
    assert (breakdown["input"], breakdown["output"]) == (20, 2)


def test_termination_and_idempotent_replays_do_not_count_again(world: InsightWorld) -> None:
    body = {"agent_instance_id": world.instance_id, "schema_name": "llm", "status": "active",
            "payload": {"model": "gpt-4o", "tokens": {"input": 50, "output": 5}}}
    first = world.caller.call("agent_spans/create", {**body, "idempotency_key": "span-key-1"})
    again = world.caller.call("agent_spans/create", {**body, "idempotency_key": "span-key-1"})
    assert first == again
    world.caller.call("agent_instances/terminate", agent_instance_id=world.instance_id,
                      reason="operator stop")
    assert (cost(world)["input"], cost(world)["output"]) == (50, 5)


def test_unknown_models_count_tokens_without_costs(world: InsightWorld) -> None:
    world.span("llm", payload={"model": "in-house-llm-7b", "tokens": {"input": 10, "output": 2}})
    world.span("llm", payload={"tokens": {"input": 5, "output": 1}})
    breakdown = cost(world)
    assert [g["model_name"] for g in breakdown["groups"]] == ["in-house-llm-7b", "unknown"]
    for row in breakdown["groups"]:
        assert row["total_cost"] is None and row["context_limit"] is None
    assert (breakdown["input"], breakdown["total_cost"]) == (15, None)


def test_quality_and_alert_spans_carry_no_cost(world: InsightWorld) -> None:
    usage = {"model": "gpt-4o", "tokens": {"input": 10, "output": 2}}
    world.caller.call("agent_instances/record_quality", agent_instance_id=world.instance_id,
                      name="review", payload=usage)
    world.caller.call("alerts/raise", agent_instance_id=world.instance_id, name="quiet",
                      severity="info", payload=usage)
    assert cost(world) is None


def test_prices_are_applied_on_read(world: InsightWorld) -> None:
    world.span("llm", payload={"model": "gpt-4o", "tokens": {"input": 1000, "output": 0}})
    assert cost(world)["total_cost"] == 0.0025
    world.gov.config = Config(pricing=load_catalogue({"gpt-4o": {"input_cost_per_token": 1e-5}}))
    assert cost(world)["total_cost"] == 0.01


MODELS = st.sampled_from([
    ("gpt-4o", "openai"), ("claude-sonnet-4-5", "anthropic"), ("gpt-4o-mini", None),
    ("in-house", None),
])
COUNT = st.integers(min_value=0, max_value=10**7)


@st.composite
def usage_payload(draw: st.DrawFn) -> dict[str, Any]:
    """A payload naming a model and reporting usage in one of the clients' forms."""
    (model, provider), form = draw(MODELS), draw(st.sampled_from(["openai", "anthropic", "ts"]))
    prompt, completion, cached = draw(COUNT), draw(COUNT), draw(COUNT)
    payload: dict[str, Any] = {"model": model}
    if provider is not None:
        payload["provider"] = provider
    if form == "openai":
        payload["token_usage"] = {"prompt_tokens": prompt, "completion_tokens": completion,
                                  "prompt_tokens_details": {"cached_tokens": cached}}
    elif form == "anthropic":
        payload["usage"] = {"input_tokens": prompt, "output_tokens": completion,
                            "cache_read_input_tokens": cached}
    else:
        payload["tokens"] = {"input": prompt, "output": completion, "cacheRead": cached}
    return payload


SPANS = st.lists(
    st.tuples(usage_payload(), st.none() | usage_payload(), st.booleans()), max_size=8
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans=SPANS)
def test_totals_are_the_sums_of_the_groups_and_of_the_spans(
    spans: list[tuple[dict[str, Any], dict[str, Any] | None, bool]],
) -> None:
    caller = fresh_caller("memory")
    instance = register_insight_run(caller, make_agent(caller)["id"])
    expected = [0, 0, 0]
    for payload, result, finish_later in spans:
        body = {"agent_instance_id": instance["id"], "schema_name": "llm", "payload": payload}
        if finish_later:
            span = caller.details("agent_spans/create", status="active", **body)
            caller.call("agent_spans/finish", agent_span_id=span["id"], result_payload=result)
        else:
            caller.call("agent_spans/create", status="complete", result_payload=result, **body)
        usage = extract_usage(payload, result)
        assert usage is not None
        expected = [expected[0] + usage.input, expected[1] + usage.output,
                    expected[2] + usage.cache_read]
    breakdown = caller.details("agent_instances/show", agent_instance_id=instance["id"])[
        "cost_breakdown"
    ]
    if not spans:
        assert breakdown is None
        return
    groups = breakdown["groups"]
    assert [breakdown["input"], breakdown["output"], breakdown["cache_read"]] == expected
    for part in ("input", "output", "cache_read"):
        assert breakdown[part] == sum(g[part] for g in groups)
    for part in ("input_cost", "output_cost", "cache_read_cost", "total_cost"):
        known = [Decimal(str(g[part])) for g in groups if g[part] is not None]
        if known:
            assert breakdown[part] == pytest.approx(float(sum(known)), rel=1e-12)
        else:
            assert breakdown[part] is None
    assert len({(g["model_name"], g["provider"]) for g in groups}) == len(groups)
