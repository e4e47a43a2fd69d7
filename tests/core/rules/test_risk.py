from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.clock import SystemClock
from governance_core.context import Config, Context
from governance_core.domain.risk import run_total_score
from governance_core.errors import InvalidValue, RequiredValue, ValidationErrors
from governance_core.ids import IdFactory
from governance_core.registry import Registry
from governance_core.rules.risk import (
    ACTION_VALUES,
    ACTIONS,
    CATEGORY_VALUES,
    CLASSIFICATIONS,
    DATA_CATEGORIES,
    DEFAULT_RULESET,
    RISK_LEVELS,
    Ruleset,
    is_assessable,
    normalize_data_risk,
    parse_ruleset,
    risk_level,
    score_run,
    type_score,
)
from governance_core.storage import MemoryStore

PII_READ = {
    "action_profile": {"read_data": "allowed"},
    "params_data_categories": {"personal_identifiers": "included"},
    "result_data_categories": {"contact_information": "included"},
}
CONFIDENTIAL_READ = {
    "action_profile": {"read_data": "allowed"},
    "params_data_categories": {"organisational_confidential": "included"},
}


def error_tree(error: Exception) -> Any:
    if isinstance(error, ValidationErrors):
        return {name: error_tree(inner) for name, inner in error.errors.items()}
    assert isinstance(error, (InvalidValue, RequiredValue))
    return error.code


# --------------------------------------------------------------------------- vocabulary


def test_vocabulary_is_the_interfaces_canonical_order() -> None:
    assert len(DATA_CATEGORIES) == 17
    assert DATA_CATEGORIES[:3] == (
        "personal_identifiers", "contact_information", "financial_information"
    )
    assert DATA_CATEGORIES[-1] == "gdpr_sex_life_or_sexual_orientation"
    assert ACTIONS == (
        "create_data", "read_data", "update_data", "destroy_data",
        "financial_transactions", "external_communication",
    )
    assert CLASSIFICATIONS[0] == "unknown"
    assert CLASSIFICATIONS[-1] == "secret"
    assert RISK_LEVELS == ("low", "medium", "high", "critical")


def test_default_ruleset_weighs_every_category_and_action() -> None:
    assert all(DEFAULT_RULESET.category_weights[c] is not None for c in DATA_CATEGORIES)
    assert all(DEFAULT_RULESET.action_multipliers[a] is not None for a in ACTIONS)
    assert DEFAULT_RULESET.category_weights["personal_identifiers"] == 8
    assert DEFAULT_RULESET.category_weights["contact_information"] == 4
    assert DEFAULT_RULESET.action_multipliers["read_data"] == 1


# --------------------------------------------------------------------------- data_risk


def test_normalize_fills_every_key_with_unknown() -> None:
    normalized = normalize_data_risk({})
    assert normalized is not None
    assert list(normalized) == [
        "action_profile", "params_data_categories", "result_data_categories"
    ]
    assert list(normalized["action_profile"]) == list(ACTIONS)
    assert list(normalized["params_data_categories"]) == [*DATA_CATEGORIES, "classification"]
    assert set(normalized["result_data_categories"].values()) == {"unknown"}
    assert not is_assessable(normalized)


def test_normalize_keeps_declared_values_and_none_stays_none() -> None:
    assert normalize_data_risk(None) is None
    normalized = normalize_data_risk(
        {
            "action_profile": {"read_data": "allowed", "destroy_data": "disallowed"},
            "params_data_categories": {"classification": "secret", "minors_data": None},
            "result_data_categories": None,
        }
    )
    assert normalized is not None
    assert normalized["action_profile"]["read_data"] == "allowed"
    assert normalized["action_profile"]["destroy_data"] == "disallowed"
    assert normalized["params_data_categories"]["classification"] == "secret"
    assert normalized["params_data_categories"]["minors_data"] == "unknown"
    assert is_assessable(normalized)


def test_normalize_reports_every_bad_entry_relative_to_data_risk() -> None:
    with pytest.raises(ValidationErrors) as raised:
        normalize_data_risk(
            {
                "action_profile": {"read_data": "yes", "fly": "allowed"},
                "params_data_categories": {"classification": "top", "minors_data": "allowed"},
                "result_data_categories": [],
                "extra": 1,
            }
        )
    assert error_tree(raised.value) == {
        "action_profile": {"read_data": "invalid_value", "fly": "invalid_value"},
        "params_data_categories": {
            "classification": "invalid_value", "minors_data": "invalid_value"
        },
        "result_data_categories": "invalid_value",
        "extra": "invalid_value",
    }
    message = raised.value.errors["action_profile"]
    assert isinstance(message, ValidationErrors)
    assert "unknown, allowed, disallowed" in message.errors["read_data"].message


def test_normalize_rejects_a_non_object() -> None:
    with pytest.raises(InvalidValue):
        normalize_data_risk(["read_data"])


# --------------------------------------------------------------------------- rulesets


def test_parse_ruleset_round_trips_through_json() -> None:
    assert parse_ruleset(DEFAULT_RULESET.to_json()) == DEFAULT_RULESET
    assert parse_ruleset(DEFAULT_RULESET) is DEFAULT_RULESET


def test_parse_ruleset_missing_keys_and_nulls_count_zero() -> None:
    ruleset = parse_ruleset(
        {
            "category_weights": {"personal_identifiers": 2.5, "minors_data": None},
            "action_multipliers": {"read_data": 2},
            "thresholds": {"medium": 1, "high": 2, "critical": 3},
        }
    )
    assert ruleset.category_weights["personal_identifiers"] == Decimal("2.5")
    assert ruleset.category_weights["minors_data"] is None
    assert ruleset.category_weights["health_and_medical"] is None
    assert ruleset.to_json()["category_weights"]["health_and_medical"] is None
    assert list(ruleset.to_json()["category_weights"]) == list(DATA_CATEGORIES)
    score = type_score(
        normalize_data_risk(
            {
                "action_profile": {"read_data": "allowed", "create_data": "allowed"},
                "params_data_categories": {
                    "personal_identifiers": "included", "minors_data": "included"
                },
            }
        ),
        ruleset,
    )
    assert score == Decimal("5.0")


def test_parse_ruleset_reports_paths() -> None:
    with pytest.raises(ValidationErrors) as raised:
        parse_ruleset(
            {
                "category_weights": {"health_and_medical": -1, "nope": 1, "minors_data": True},
                "action_multipliers": {"read_data": "1"},
                "thresholds": {"medium": 10, "high": 10, "critical": 0},
                "other": {},
            }
        )
    assert error_tree(raised.value) == {
        "category_weights": {
            "health_and_medical": "invalid_value",
            "nope": "invalid_value",
            "minors_data": "invalid_value",
        },
        "action_multipliers": {"read_data": "invalid_value"},
        "thresholds": {"high": "invalid_value", "critical": "invalid_value"},
        "other": "invalid_value",
    }


def test_parse_ruleset_requires_members_and_thresholds() -> None:
    with pytest.raises(ValidationErrors) as raised:
        parse_ruleset({"thresholds": {"medium": 1, "critical": float("nan")}})
    assert error_tree(raised.value) == {
        "category_weights": "required_value",
        "action_multipliers": "required_value",
        "thresholds": {"high": "required_value", "critical": "invalid_value"},
    }
    with pytest.raises(ValidationErrors) as raised:
        parse_ruleset(
            {
                "category_weights": {},
                "action_multipliers": {},
                "thresholds": {"medium": 5, "high": 4, "critical": 10**12},
            }
        )
    assert error_tree(raised.value) == {
        "thresholds": {"high": "invalid_value", "critical": "invalid_value"}
    }
    with pytest.raises(InvalidValue):
        parse_ruleset("default")


# --------------------------------------------------------------------------- scoring


def test_worked_example_of_decisions_9() -> None:
    risks = {
        "llm": normalize_data_risk(PII_READ),
        "memo": normalize_data_risk(CONFIDENTIAL_READ),
    }
    assert type_score(risks["llm"], DEFAULT_RULESET) == 12
    assert type_score(risks["memo"], DEFAULT_RULESET) == 5
    result = score_run({"llm": 3, "memo": 1}, risks, DEFAULT_RULESET)
    assert result["total_score"] == 41
    assert result == {
        "all_data_categories": [
            "personal_identifiers", "contact_information", "organisational_confidential"
        ],
        "allowed_actions": ["read_data"],
        "any_assessable": True,
        "critical_threshold": Decimal(500),
        "peak_classification": "unknown",
        "risk_level": "medium",
        "total_score": Decimal(41),
        "per_type": [
            {
                "schema_name": "llm", "count": 3, "type_score": Decimal(12),
                "total_contribution": Decimal(36), "risk_level": "low",
            },
            {
                "schema_name": "memo", "count": 1, "type_score": Decimal(5),
                "total_contribution": Decimal(5), "risk_level": "low",
            },
        ],
    }


def test_categories_count_once_across_params_and_result() -> None:
    both = normalize_data_risk(
        {
            "action_profile": {"read_data": "allowed", "external_communication": "allowed"},
            "params_data_categories": {"health_and_medical": "included"},
            "result_data_categories": {
                "health_and_medical": "included", "personal_identifiers": "excluded"
            },
        }
    )
    assert type_score(both, DEFAULT_RULESET) == Decimal(10) * Decimal(4)


def test_empty_run_and_unknown_types() -> None:
    empty = score_run({}, {}, DEFAULT_RULESET)
    assert empty["peak_classification"] is None
    assert empty["risk_level"] is None
    assert empty["any_assessable"] is False
    assert empty["total_score"] == 0
    assert empty["per_type"] == []

    unknown = score_run({"tool": 2, "never": 0}, {"tool": None}, DEFAULT_RULESET)
    assert unknown["peak_classification"] == "unknown"
    assert unknown["risk_level"] is None
    assert unknown["per_type"] == [
        {
            "schema_name": "tool", "count": 2, "type_score": 0,
            "total_contribution": 0, "risk_level": "low",
        }
    ]


def test_peak_classification_and_levels() -> None:
    risks = {
        "a": normalize_data_risk({"params_data_categories": {"classification": "internal"}}),
        "b": normalize_data_risk({"result_data_categories": {"classification": "restricted"}}),
        "c": normalize_data_risk({"params_data_categories": {"classification": "secret"}}),
    }
    assert score_run({"a": 1, "b": 1}, risks, DEFAULT_RULESET)["peak_classification"] == (
        "restricted"
    )
    assert score_run({"a": 1, "b": 1, "c": 0}, risks, DEFAULT_RULESET)["risk_level"] == "low"
    ruleset = DEFAULT_RULESET
    assert risk_level(Decimal("19.99"), ruleset) == "low"
    assert risk_level(Decimal(20), ruleset) == "medium"
    assert risk_level(Decimal(100), ruleset) == "high"
    assert risk_level(Decimal(500), ruleset) == "critical"


# --------------------------------------------------------------------------- properties

TYPE_NAMES = st.sampled_from(["a", "b", "c", "d", "e"])


@st.composite
def data_risks(draw: st.DrawFn) -> dict[str, Any] | None:
    if draw(st.booleans()) and draw(st.booleans()):
        return None
    raw = {
        "action_profile": draw(
            st.dictionaries(st.sampled_from(ACTIONS), st.sampled_from(ACTION_VALUES))
        ),
        "params_data_categories": draw(
            st.dictionaries(st.sampled_from(DATA_CATEGORIES), st.sampled_from(CATEGORY_VALUES))
        ),
        "result_data_categories": {
            **draw(
                st.dictionaries(
                    st.sampled_from(DATA_CATEGORIES), st.sampled_from(CATEGORY_VALUES)
                )
            ),
            "classification": draw(st.sampled_from(CLASSIFICATIONS)),
        },
    }
    return normalize_data_risk(raw)


NUMBERS = st.one_of(
    st.none(),
    st.decimals(min_value=0, max_value=100, places=2, allow_nan=False, allow_infinity=False),
)


@st.composite
def rulesets(draw: st.DrawFn) -> Ruleset:
    medium = draw(st.integers(1, 50))
    high = medium + draw(st.integers(1, 50))
    critical = high + draw(st.integers(1, 500))
    return parse_ruleset(
        {
            "category_weights": {c: draw(NUMBERS) for c in DATA_CATEGORIES},
            "action_multipliers": {a: draw(NUMBERS) for a in ACTIONS},
            "thresholds": {"medium": medium, "high": high, "critical": critical},
        }
    )


RISK_MAPS = st.dictionaries(TYPE_NAMES, data_risks(), max_size=5)
SPANS = st.lists(TYPE_NAMES, max_size=30)


def counts_of(spans: list[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for name in spans:
        counts[name] = counts.get(name, 0) + 1
    return counts


@settings(max_examples=60, deadline=None)
@given(risks=RISK_MAPS, spans=SPANS, ruleset=rulesets(), data=st.data())
def test_score_is_independent_of_span_order_and_batching(
    risks: dict[str, Any], spans: list[str], ruleset: Ruleset, data: st.DataObject
) -> None:
    expected = score_run(counts_of(spans), risks, ruleset)
    shuffled = data.draw(st.permutations(spans))
    assert score_run(counts_of(shuffled), risks, ruleset) == expected
    # Counts merged from two batches of the same spans, in reversed key order.
    cut = data.draw(st.integers(0, len(spans)))
    first, second = counts_of(spans[:cut]), counts_of(spans[cut:])
    merged = {
        name: first.get(name, 0) + second.get(name, 0)
        for name in sorted({*first, *second}, reverse=True)
    }
    assert score_run(merged, risks, ruleset) == expected


@settings(max_examples=60, deadline=None)
@given(risks=RISK_MAPS, spans=SPANS, more=SPANS, ruleset=rulesets())
def test_totals_add_up_and_never_fall(
    risks: dict[str, Any], spans: list[str], more: list[str], ruleset: Ruleset
) -> None:
    result = score_run(counts_of(spans), risks, ruleset)
    assert result["total_score"] == sum(
        (row["total_contribution"] for row in result["per_type"]), Decimal(0)
    )
    for row in result["per_type"]:
        assert row["total_contribution"] == row["type_score"] * row["count"]
        assert row["risk_level"] == risk_level(row["type_score"], ruleset)
    assert [row["schema_name"] for row in result["per_type"]] == sorted(counts_of(spans))
    later = score_run(counts_of(spans + more), risks, ruleset)
    assert later["total_score"] >= result["total_score"]
    if result["risk_level"] is not None:
        assert RISK_LEVELS.index(later["risk_level"]) >= RISK_LEVELS.index(result["risk_level"])
    assert set(result["all_data_categories"]) <= set(later["all_data_categories"])
    assert later["all_data_categories"] == [
        c for c in DATA_CATEGORIES if c in later["all_data_categories"]
    ]


@settings(max_examples=60, deadline=None)
@given(risks=RISK_MAPS, spans=SPANS, extra=st.integers(1, 20), ruleset=rulesets())
def test_a_type_declaring_only_unknown_changes_nothing(
    risks: dict[str, Any], spans: list[str], extra: int, ruleset: Ruleset
) -> None:
    before = score_run(counts_of(spans), risks, ruleset)
    silent = {**risks, "silent": normalize_data_risk({})}
    after = score_run({**counts_of(spans), "silent": extra}, silent, ruleset)
    assert after["any_assessable"] == before["any_assessable"]
    assert after["total_score"] == before["total_score"]
    assert after["risk_level"] == before["risk_level"]
    only_silent = score_run({"silent": extra}, silent, ruleset)
    assert only_silent["any_assessable"] is False
    assert only_silent["risk_level"] is None


@settings(max_examples=100, deadline=None)
@given(risks=RISK_MAPS, spans=st.lists(SPANS, min_size=1, max_size=3), ruleset=rulesets())
def test_the_kept_type_scores_add_up_to_the_full_score(
    risks: dict[str, Any], spans: list[list[str]], ruleset: Ruleset
) -> None:
    # The critical check adds up span type scores kept per schema version and ruleset; the
    # same caches serve a run as its counts grow.
    ctx = Context(MemoryStore(), IdFactory(), Config(), None, None, SystemClock, Registry([]))
    version = {"id": "v1", "span_type_schemas": {
        name: {"data_risk": data_risk} for name, data_risk in risks.items()
    }}
    ran: list[str] = []
    for batch in spans:
        ran += batch
        instance = {"span_schema_counts": counts_of(ran)}
        expected = score_run(counts_of(ran), risks, ruleset)["total_score"]
        assert run_total_score(ctx, instance, version, ruleset) == expected
