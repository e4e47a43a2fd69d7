from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.errors import ValidationErrors
from governance_core.rules import cost as cost_module
from governance_core.rules.cost import (
    UNKNOWN_MODEL,
    ModelPrice,
    PricingCatalogue,
    TokenGroup,
    Usage,
    cost_breakdown,
    extract_usage,
    load_catalogue,
    resolved_provider,
)

D = Decimal


@pytest.fixture(scope="module")
def catalogue() -> PricingCatalogue:
    return load_catalogue()


# --------------------------------------------------------------------------- extract_usage


def test_python_langchain_form_usage_in_result_model_in_payload() -> None:
    usage = extract_usage(
        {"model_name": "gpt-4o", "provider": "openai"},
        {
            "token_usage": {
                "prompt_tokens": 1000,
                "completion_tokens": 200,
                "total_tokens": 1200,
                "prompt_tokens_details": {"cached_tokens": 400},
            }
        },
    )
    assert usage == Usage("gpt-4o", "openai", input=600, output=200, cache_read=400)


def test_typescript_token_usage_in_payload() -> None:
    usage = extract_usage(
        {"token_usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}},
        None,
    )
    assert usage == Usage(None, None, 12, 3, 0)
    assert usage.token_group() == TokenGroup(UNKNOWN_MODEL, None, 12, 3, 0)


def test_tokens_form_is_taken_as_it_is() -> None:
    usage = extract_usage(
        {
            "model": "claude-sonnet-4-5",
            "provider": "anthropic",
            "tokens": {"input": 50, "output": 7, "cacheRead": 900, "cacheWrite": 100},
        },
        {},
    )
    assert usage == Usage("claude-sonnet-4-5", "anthropic", 50, 7, 900)


def test_usage_form_and_ai_sdk_literal_inputs_keys() -> None:
    usage = extract_usage(
        {"inputs": {"ai.model.id": "gpt-4o-mini", "ai.model.provider": "openai.chat"}},
        {"usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 30}},
    )
    assert usage == Usage("gpt-4o-mini", "openai.chat", 10, 2, 30)
    langchain = extract_usage(
        {"inputs": {"langchain.model.name": "gpt-4"}}, {"usage": {"output_tokens": 1}}
    )
    assert langchain == Usage("gpt-4", None, 0, 1, 0)


@pytest.mark.parametrize(
    "payload",
    [
        {
            "gen_ai.request.model": "gemini-2.5-pro",
            "gen_ai.provider.name": "gcp.gemini",
            "gen_ai.usage.input_tokens": 100,
            "gen_ai.usage.output_tokens": 20,
            "gen_ai.usage.cache_read.input_tokens": 60,
        },
        {
            "gen_ai": {
                "request": {"model": "gemini-2.5-pro"},
                "provider": {"name": "gcp.gemini"},
                "usage": {
                    "input_tokens": 100, "output_tokens": 20, "cache_read": {"input_tokens": 60}
                },
            }
        },
        {
            "gen_ai.request": {"model": "gemini-2.5-pro"},
            "gen_ai.provider.name": "gcp.gemini",
            "gen_ai.usage": {
                "input_tokens": 100, "output_tokens": 20, "cache_read.input_tokens": 60
            },
        },
    ],
    ids=["literal", "nested", "mixed"],
)
def test_opentelemetry_keys_literal_or_nested_subtract_cached(payload: dict[str, Any]) -> None:
    assert extract_usage(payload, None) == Usage("gemini-2.5-pro", "gcp.gemini", 40, 20, 60)


def test_result_payload_wins_and_forms_are_never_summed() -> None:
    payload = {"model": "a", "usage": {"input_tokens": 1000, "output_tokens": 1000}}
    result = {"model": "b", "tokens": {"input": 1, "output": 2}}
    assert extract_usage(payload, result) == Usage("b", None, 1, 2, 0)
    both_forms = {
        "tokens": {"input": 5, "output": 5},
        "token_usage": {"prompt_tokens": 9, "completion_tokens": 1},
    }
    assert extract_usage(both_forms, None) == Usage(None, None, 9, 1, 0)


def test_model_from_the_usage_payload_first_then_the_other() -> None:
    usage = extract_usage(
        {"model": "from-payload", "provider": "p1"},
        {"model_name": "from-result", "tokens": {"input": 1}},
    )
    assert usage == Usage("from-result", "p1", 1, 0, 0)


@pytest.mark.parametrize(
    "counts",
    [
        {"prompt_tokens": -5, "completion_tokens": "7"},
        {"prompt_tokens": True, "completion_tokens": 1.5},
        {"prompt_tokens": None, "completion_tokens": float("inf")},
        {"prompt_tokens": 10**30, "completion_tokens": [1]},
    ],
)
def test_unreadable_counts_are_ignored(counts: dict[str, Any]) -> None:
    assert extract_usage({"token_usage": counts}, None) is None


def test_partly_readable_counts_and_whole_floats() -> None:
    usage = extract_usage(
        {"token_usage": {"prompt_tokens": 10.0, "completion_tokens": "x",
                         "prompt_tokens_details": {"cached_tokens": 25}}},
        None,
    )
    # More cached than prompt tokens is inconsistent data: input floors at 0.
    assert usage == Usage(None, None, 0, 0, 25)


def test_no_usage() -> None:
    assert extract_usage({"model": "gpt-4o"}, {"usage": "lots"}) is None
    assert extract_usage(None, None) is None
    assert extract_usage([1, 2], "text") is None
    assert extract_usage({"usage": {}}, {"tokens": None}) is None


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3)
    | st.dictionaries(
        st.sampled_from(
            ["usage", "tokens", "token_usage", "gen_ai", "gen_ai.usage", "input", "output",
             "prompt_tokens", "input_tokens", "cacheRead", "model", "provider", "inputs",
             "ai.model.id", "cached_tokens", "prompt_tokens_details", "x"]
        ),
        children,
        max_size=4,
    ),
    max_leaves=15,
)


@settings(max_examples=200, deadline=None)
@given(payload=JSON, result=JSON)
def test_extract_usage_never_raises_and_counts_are_sane(payload: object, result: object) -> None:
    usage = extract_usage(payload, result)
    if usage is not None:
        assert min(usage.input, usage.output, usage.cache_read) >= 0
        assert all(type(n) is int for n in (usage.input, usage.output, usage.cache_read))


def _reference_lookup(value: object, parts: tuple[str, ...]) -> object:
    """Decisions 10's dotted paths, as written: the longest literal key first at each level."""
    if not parts:
        return value
    if not isinstance(value, dict):
        return _path_missing
    for cut in range(len(parts), 0, -1):
        key = ".".join(parts[:cut])
        if key in value:
            found = _reference_lookup(value[key], parts[cut:])
            if found is not _path_missing:
                return found
    return _path_missing


_path_missing = cost_module._MISSING
NESTED_KEYS = st.sampled_from(["a", "b", "c", "a.b", "b.c", "a.b.c", "d"])
NESTED = st.recursive(
    st.integers(0, 9) | st.none(),
    lambda children: st.dictionaries(NESTED_KEYS, children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(value=NESTED, dotted=st.sampled_from(["a", "a.b", "a.b.c", "b.c.d", "a.b.c.d", "d"]))
def test_a_dotted_path_is_followed_literal_key_first(value: object, dotted: str) -> None:
    expected = _reference_lookup(value, tuple(dotted.split(".")))
    assert cost_module._follow(value, cost_module._routes(dotted)) is expected


# --------------------------------------------------------------------------- catalogue


def test_snapshot_version_and_real_prices(catalogue: PricingCatalogue) -> None:
    assert catalogue.version.startswith("litellm-")
    assert len(catalogue.models) > 1000
    # If a snapshot refresh changes these, update the hand-computed figures below too.
    assert catalogue.lookup("gpt-4o") == ModelPrice(
        D("2.5e-6"), D("1e-5"), D("1.25e-6"), 128000, "openai"
    )
    assert catalogue.lookup("claude-sonnet-4-5") == ModelPrice(
        D("3e-6"), D("1.5e-5"), D("3e-7"), 200000, "anthropic"
    )
    gemini = catalogue.lookup("gemini/gemini-2.5-pro")
    assert gemini == ModelPrice(D("1.25e-6"), D("1e-5"), D("1.25e-7"), 1048576, "gemini")
    # Models LiteLLM has since dropped stay in the snapshot: clients still report them.
    assert catalogue.lookup("claude-3-5-sonnet-20241022") is not None


def test_lookup_order(catalogue: PricingCatalogue) -> None:
    gpt = catalogue.lookup("gpt-4o")
    assert catalogue.lookup("GPT-4o") == gpt
    assert catalogue.lookup("my-gateway/gpt-4o") == gpt
    # The exact name wins over provider/model, which is tried next.
    assert catalogue.lookup("gemini-2.5-pro", "gemini") == catalogue.lookup("gemini-2.5-pro")
    assert catalogue.lookup("gemini-2.5-pro") != catalogue.lookup("gemini/gemini-2.5-pro")
    mistral = catalogue.lookup("mistral/mistral-large-latest")
    assert mistral is not None
    assert catalogue.lookup("mistral-large-latest", "mistral") == mistral
    assert catalogue.lookup("Mistral-Large-Latest", "MISTRAL") == mistral
    assert catalogue.lookup("mistral-large-latest") is None
    assert catalogue.lookup("no-such-model-anywhere", "nobody") is None
    tiny = PricingCatalogue("t", {"Acme/Model": ModelPrice(D(1)), "model": ModelPrice(D(2))})
    # Every candidate is tried exactly before any is tried ignoring case.
    assert tiny.lookup("acme/model") == ModelPrice(D(2))
    assert tiny.lookup("acme/MODEL") == ModelPrice(D(1))
    assert tiny.lookup("other/MODEL") == ModelPrice(D(2))
    assert tiny.lookup("Model", "Acme") == ModelPrice(D(1))
    assert tiny.lookup("Model", "acme") == ModelPrice(D(2))


def test_overrides_from_mapping_and_file(tmp_path: Path, catalogue: PricingCatalogue) -> None:
    table = {
        "gpt-4o": {"cache_read_input_token_cost": None},
        "acme-llm": {"input_cost_per_token": 0.001, "output_cost_per_token": 0.002,
                     "context_limit": 4096, "provider": "acme"},
    }
    custom = load_catalogue(table)
    assert custom.version == catalogue.version + "+overrides"
    gpt = custom.lookup("gpt-4o")
    assert gpt is not None
    assert gpt.cache_read_input_token_cost is None
    assert gpt.input_cost_per_token == D("2.5e-6")
    assert custom.lookup("acme-llm") == ModelPrice(D("0.001"), D("0.002"), None, 4096, "acme")
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    assert load_catalogue(path) == custom
    assert load_catalogue(str(path)).lookup("acme-llm") == custom.lookup("acme-llm")
    assert load_catalogue() is catalogue


def test_bad_overrides_name_model_and_field() -> None:
    with pytest.raises(ValidationErrors) as raised:
        load_catalogue(
            {
                "m": {"input_cost_per_token": -1, "context_limit": 1.5, "colour": "red"},
                "n": 3,
            }
        )
    errors = raised.value.errors
    inner = errors["m"]
    assert isinstance(inner, ValidationErrors)
    assert set(inner.errors) == {"input_cost_per_token", "context_limit", "colour"}
    assert errors["n"].code == "invalid_value"


# --------------------------------------------------------------------------- breakdown


def test_hand_computed_costs_for_three_real_models(catalogue: PricingCatalogue) -> None:
    gpt = extract_usage(
        {"model_name": "gpt-4o", "provider": "openai"},
        {"token_usage": {"prompt_tokens": 1000, "completion_tokens": 200,
                         "prompt_tokens_details": {"cached_tokens": 400}}},
    )
    claude = extract_usage(
        {"model": "claude-sonnet-4-5", "provider": "anthropic"},
        {"usage": {"input_tokens": 2000, "output_tokens": 500,
                   "cache_read_input_tokens": 10000}},
    )
    gemini = extract_usage(
        {"gen_ai.request.model": "gemini/gemini-2.5-pro",
         "gen_ai.usage.input_tokens": 10000, "gen_ai.usage.output_tokens": 1000,
         "gen_ai.usage.cache_read.input_tokens": 8000},
        None,
    )
    assert gpt and claude and gemini
    breakdown = cost_breakdown(
        [gemini.token_group(), gpt.token_group(), claude.token_group(), gpt.token_group()],
        catalogue,
    )
    by_model = {group["model_name"]: group for group in breakdown["groups"]}
    assert list(by_model) == ["claude-sonnet-4-5", "gemini/gemini-2.5-pro", "gpt-4o"]

    # gpt-4o, two identical spans: 1200 uncached input at $2.50/M, 400 output at $10/M,
    # 800 cached at $1.25/M.
    assert by_model["gpt-4o"] == {
        "model_name": "gpt-4o", "provider": "openai",
        "input": 1200, "output": 400, "cache_read": 800,
        "input_cost": D("0.003"), "output_cost": D("0.004"), "cache_read_cost": D("0.001"),
        "total_cost": D("0.008"), "context_limit": 128000,
        "pricing_version": catalogue.version,
    }
    # claude-sonnet-4-5: 2000 x $3/M + 500 x $15/M + 10000 cached x $0.30/M.
    claude_row = by_model["claude-sonnet-4-5"]
    assert (claude_row["input_cost"], claude_row["output_cost"], claude_row["cache_read_cost"]) == (
        D("0.006"), D("0.0075"), D("0.003")
    )
    assert claude_row["total_cost"] == D("0.0165")
    # gemini-2.5-pro: 10000 input of which 8000 cached, so 2000 x $1.25/M, 1000 x $10/M,
    # 8000 x $0.125/M.
    gemini_row = by_model["gemini/gemini-2.5-pro"]
    assert (gemini_row["input"], gemini_row["cache_read"]) == (2000, 8000)
    assert gemini_row["total_cost"] == D("0.0025") + D("0.01") + D("0.001")
    assert gemini_row["context_limit"] == 1048576

    assert breakdown["input"] == 1200 + 2000 + 2000
    assert breakdown["cache_read"] == 800 + 10000 + 8000
    assert breakdown["total_cost"] == D("0.008") + D("0.0165") + D("0.0135")
    assert breakdown["input_cost"] == D("0.003") + D("0.006") + D("0.0025")


def test_unknown_model_and_missing_cache_price() -> None:
    catalogue = PricingCatalogue(
        "test-1",
        {"known": ModelPrice(D("0.01"), D("0.02"), None, 1000, "x"),
         "unnamed": ModelPrice(D("0.01"), D("0.02"), D("0.001"), None, None)},
    )
    breakdown = cost_breakdown(
        [
            TokenGroup("mystery", None, 5, 5, 5),
            TokenGroup("known", "x", 10, 0, 0),
            TokenGroup("unnamed", None, 1, 1, 0),
        ],
        catalogue,
    )
    rows = breakdown["groups"]
    assert [(r["model_name"], r["provider"]) for r in rows] == [
        ("known", "x"), ("mystery", None), ("unnamed", None)
    ]
    assert rows[0]["output_cost"] == 0
    assert rows[0]["cache_read_cost"] == 0
    assert rows[0]["total_cost"] == D("0.1")
    assert rows[1]["total_cost"] is None
    assert rows[1]["context_limit"] is None
    assert rows[1]["pricing_version"] == "test-1"
    assert rows[2]["cache_read_cost"] == 0 and rows[2]["total_cost"] == D("0.03")
    # Sums of the known costs: the only known cache costs are the 0 of groups without cache.
    assert breakdown["cache_read_cost"] == 0
    assert breakdown["total_cost"] == D("0.13")
    assert breakdown["cache_read"] == 5

    uncached_price = cost_breakdown([TokenGroup("known", "x", 1, 1, 3)], catalogue)
    assert uncached_price["groups"][0]["cache_read_cost"] is None
    assert uncached_price["total_cost"] == D("0.03")


def test_a_group_naming_no_provider_takes_the_catalogues(catalogue: PricingCatalogue) -> None:
    breakdown = cost_breakdown(
        [
            TokenGroup("gpt-4o", None, 100, 10, 0),
            TokenGroup("gpt-4o", "openai", 50, 5, 0),
            TokenGroup("claude-sonnet-4-5", None, 1, 1, 0),
            TokenGroup("gpt-4o", "azure", 7, 0, 0),
            TokenGroup("mystery", None, 1, 0, 0),
        ],
        catalogue,
    )
    rows = {(r["model_name"], r["provider"]): r for r in breakdown["groups"]}
    assert list(rows) == [
        ("claude-sonnet-4-5", "anthropic"), ("gpt-4o", "azure"), ("gpt-4o", "openai"),
        ("mystery", None),
    ]
    # The span that named none and the span that named openai are one group.
    assert (rows[("gpt-4o", "openai")]["input"], rows[("gpt-4o", "openai")]["output"]) == (
        150, 15)
    overridden = load_catalogue({"gpt-4o": {"provider": "my-gateway"}})
    assert resolved_provider("gpt-4o", None, overridden) == "my-gateway"
    assert resolved_provider("gpt-4o", "openai", overridden) == "openai"


@settings(max_examples=100, deadline=None)
@given(
    model=st.sampled_from(["gpt-4o", "GPT-4O", "openai/gpt-4o", "claude-sonnet-4-5",
                           "text-embedding-3-small", "mystery", "x/mystery"]),
    provider=st.one_of(st.none(), st.text(min_size=1, max_size=12)),
)
def test_the_provider_is_kept_when_named_and_else_the_catalogues(
    model: str, provider: str | None, catalogue: PricingCatalogue,
) -> None:
    resolved = resolved_provider(model, provider, catalogue)
    if provider is not None:
        assert resolved == provider
    else:
        price = catalogue.lookup(model)
        assert resolved == (price.provider if price else None)
    assert resolved_provider(model, resolved, catalogue) == resolved


def test_embeddings_are_priced_by_their_input_tokens(catalogue: PricingCatalogue) -> None:
    price = catalogue.lookup("text-embedding-3-small")
    assert price is not None and price.input_cost_per_token == D("2E-8")
    breakdown = cost_breakdown([TokenGroup("text-embedding-3-small", None, 1_000_000, 0, 0)],
                               catalogue)
    [row] = breakdown["groups"]
    assert row["provider"] == "openai"
    assert (row["input_cost"], row["output_cost"], row["total_cost"]) == (
        D("0.02"), 0, D("0.02"))


def test_no_groups_and_only_unknown_models() -> None:
    catalogue = PricingCatalogue("v", {})
    assert cost_breakdown([], catalogue) == {
        "input": 0, "output": 0, "cache_read": 0, "input_cost": None, "output_cost": None,
        "cache_read_cost": None, "total_cost": None, "groups": [],
    }
    only_unknown = cost_breakdown([TokenGroup("m", None, 1, 2, 3)], catalogue)
    assert only_unknown["total_cost"] is None
    assert only_unknown["input"] == 1


TOKEN_GROUPS = st.lists(
    st.builds(
        TokenGroup,
        model_name=st.sampled_from(["gpt-4o", "claude-sonnet-4-5", "mystery", "gpt-4o-mini"]),
        provider=st.sampled_from([None, "openai", "anthropic"]),
        input=st.integers(0, 10**7),
        output=st.integers(0, 10**7),
        cache_read=st.integers(0, 10**7),
    ),
    max_size=12,
)


def _sum(values: list[Decimal | None]) -> Decimal | None:
    known = [v for v in values if v is not None]
    return sum(known, D(0)) if known else None


@settings(max_examples=100, deadline=None)
@given(groups=TOKEN_GROUPS, data=st.data())
def test_totals_are_the_sum_of_groups_in_any_order(
    groups: list[TokenGroup], data: st.DataObject, catalogue: PricingCatalogue
) -> None:
    breakdown = cost_breakdown(groups, catalogue)
    rows = breakdown["groups"]
    for field in ("input", "output", "cache_read"):
        assert breakdown[field] == sum(getattr(g, field) for g in groups)
        assert breakdown[field] == sum(row[field] for row in rows)
    for field in ("input_cost", "output_cost", "cache_read_cost", "total_cost"):
        assert breakdown[field] == _sum([row[field] for row in rows])
    for row in rows:
        assert row["total_cost"] == _sum(
            [row["input_cost"], row["output_cost"], row["cache_read_cost"]]
        )
    assert len({(r["model_name"], r["provider"]) for r in rows}) == len(rows)
    assert cost_breakdown(data.draw(st.permutations(groups)), catalogue) == breakdown
