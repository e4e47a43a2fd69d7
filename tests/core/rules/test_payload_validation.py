"""Payload checks against untrusted JSON Schemas: recorded, bounded, never raised."""

from __future__ import annotations

import itertools
import json
import time
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance_core.rules.payload_validation import (
    _NOT_SHARED,
    MAX_ERRORS,
    _checker,
    _fast_validator,
    _matches_fast,
    validate_payload,
)

PERSON = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "email": {"type": "string", "pattern": r"^[^@\s]+@[^@\s]+$"},
        "age": {"type": "integer", "minimum": 0},
    },
    "required": ["name"],
    "additionalProperties": False,
}


def test_a_matching_payload_is_valid() -> None:
    assert validate_payload(PERSON, {"name": "Ada", "email": "ada@x.test", "age": 36}) == {
        "status": "valid",
        "message": None,
    }


def test_a_mismatch_lists_errors_with_json_pointers() -> None:
    result = validate_payload(PERSON, {"age": -1, "email": "nope", "extra/key": 1})
    assert result["status"] == "invalid"
    paths = sorted(error["path"] for error in result["errors"])
    assert paths == ["", "", "/age", "/email"]
    assert result["message"] == result["errors"][0]["message"]


def test_errors_are_capped() -> None:
    schema = {"type": "array", "items": {"type": "string"}}
    result = validate_payload(schema, list(range(100)))
    assert len(result["errors"]) == MAX_ERRORS


def test_no_schema_an_invalid_schema_and_an_unresolvable_ref_are_unchecked() -> None:
    assert validate_payload(None, {})["status"] == "unchecked"
    invalid = validate_payload({"type": "nope"}, {})
    assert invalid["status"] == "unchecked"
    assert "not a valid JSON Schema" in invalid["message"]
    remote = validate_payload({"$ref": "https://schemas.example/never-fetched.json"}, {})
    assert remote["status"] == "unchecked"
    endless = validate_payload({"$ref": "#"}, {})
    assert endless["status"] == "unchecked"


def test_a_catastrophic_pattern_is_skipped_and_reported_not_hung() -> None:
    schema = {"properties": {"a": {"type": "string", "pattern": "^(a+)+$"}}}
    started = time.perf_counter()
    result = validate_payload(schema, {"a": "a" * 10_000 + "!"})
    assert time.perf_counter() - started < 0.1
    assert result == {"status": "valid", "message": None, "skipped": ["^(a+)+$"]}
    assert validate_payload(schema, {"a": "aa!"})["status"] == "invalid"


def test_pattern_properties_and_additional_properties_use_the_guard() -> None:
    schema = {
        "patternProperties": {"^(a+)+$": {"type": "integer"}},
        "additionalProperties": False,
    }
    assert validate_payload(schema, {"aaa": 1})["status"] == "valid"
    assert validate_payload(schema, {"aaa": "x"})["status"] == "invalid"
    assert validate_payload(schema, {"b": 1})["status"] == "invalid"
    # A key too long to check counts as matched: never reported, but listed as skipped.
    long_key = {"a" * 5000 + "!": 1}
    assert validate_payload(schema, long_key) == {
        "status": "valid", "message": None, "skipped": ["^(a+)+$"]
    }


def test_unevaluated_properties_are_skipped_for_keys_too_long_for_the_patterns() -> None:
    schema = {"patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}
    assert validate_payload(schema, {"aa": 1, "b": 2})["status"] == "invalid"
    result = validate_payload(schema, {"a" * 5000 + "!": 1})
    assert result["status"] == "valid"
    assert "unevaluatedProperties" in result["skipped"]


def test_unique_items_treats_one_and_one_point_zero_as_equal_and_true_as_distinct() -> None:
    schema = {"uniqueItems": True}
    assert validate_payload(schema, [{"a": 1}, {"a": 1.0}])["status"] == "invalid"
    assert validate_payload(schema, [1, True, "1"])["status"] == "valid"


def test_unique_items_on_a_large_array_is_fast() -> None:
    items: list[Any] = [{"k": index} for index in range(20_000)]
    started = time.perf_counter()
    assert validate_payload({"uniqueItems": True}, items)["status"] == "valid"
    assert time.perf_counter() - started < 1


def test_a_cached_validator_is_cheap() -> None:
    validate_payload(PERSON, {"name": "warm"})
    started = time.perf_counter()
    for index in range(200):
        validate_payload(PERSON, {"name": f"n{index}", "age": index})
    assert (time.perf_counter() - started) / 200 < 0.002


def test_key_order_of_a_schema_does_not_change_the_result() -> None:
    reordered = dict(reversed(list(PERSON.items())))
    assert validate_payload(reordered, {"name": 1}) == validate_payload(PERSON, {"name": 1})


# -- the jsonschema-rs first try agrees with jsonschema -------------------------------------
_json_scalars = (
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
)
_json_values = st.recursive(
    _json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=3), inner,
                                                                 max_size=4),
    max_leaves=12,
)
_numbers = st.integers(-100, 100) | st.floats(-100, 100, allow_nan=False)
_counts = st.integers(0, 4)
_types = st.sampled_from(["null", "boolean", "integer", "number", "string", "array", "object"])


def _shared_schemas() -> st.SearchStrategy[Any]:
    leaf = st.fixed_dictionaries({}, optional={
        "type": _types | st.lists(_types, min_size=1, max_size=3, unique=True),
        "minimum": _numbers, "maximum": _numbers,
        "exclusiveMinimum": _numbers, "exclusiveMaximum": _numbers,
        "minLength": _counts, "maxLength": _counts, "minItems": _counts, "maxItems": _counts,
        "minProperties": _counts, "maxProperties": _counts, "uniqueItems": st.booleans(),
        "const": _json_values, "enum": st.lists(_json_values, min_size=1, max_size=3),
        "required": st.lists(st.text(max_size=3), max_size=3, unique=True),
    }) | st.booleans()
    return st.recursive(leaf, lambda inner: st.fixed_dictionaries({}, optional={
        "properties": st.dictionaries(st.text(max_size=3), inner, max_size=3),
        "additionalProperties": inner, "items": inner,
        "prefixItems": st.lists(inner, min_size=1, max_size=2), "contains": inner,
        "allOf": st.lists(inner, min_size=1, max_size=2),
        "anyOf": st.lists(inner, min_size=1, max_size=2),
        "oneOf": st.lists(inner, min_size=1, max_size=2), "not": inner,
        "if": inner, "then": inner, "else": inner,
    }), max_leaves=6)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema=_shared_schemas(), payload=_json_values)
def test_the_fast_check_answers_only_what_jsonschema_would(schema: Any, payload: Any) -> None:
    checker = _checker(json.dumps(schema, sort_keys=True, separators=(",", ":")))
    if isinstance(checker, str) or checker.fast is None:
        return
    by_jsonschema = not list(itertools.islice(checker.full.iter_errors(payload), 1))
    if _matches_fast(checker.fast, payload):
        assert by_jsonschema, (schema, payload)
    assert validate_payload(schema, payload)["status"] == (
        "valid" if by_jsonschema else "invalid"
    )


@pytest.mark.parametrize("keyword", sorted(_NOT_SHARED))
def test_a_keyword_the_two_read_differently_is_left_to_jsonschema(keyword: str) -> None:
    schema = {"type": "object", "properties": {"a": {keyword: "x"}}}
    assert _fast_validator(schema) is None


def test_references_are_left_to_jsonschema() -> None:
    assert _fast_validator({"$ref": "https://example.test/schema.json"}) is None
    assert _fast_validator({"$defs": {"a": {"type": "string"}}, "$ref": "#/$defs/a"}) is None
    assert validate_payload({"$ref": "#"}, {})["status"] == "unchecked"


def test_a_word_pattern_is_read_as_python_reads_it() -> None:
    # ECMA-262's \w is ASCII; Python's is Unicode. "not" turns a disagreement into a match.
    schema = {"not": {"pattern": "^\\w+$"}}
    assert validate_payload(schema, "héllo")["status"] == "invalid"
