"""Token groups kept on span writes: a span's old usage out, its new usage in."""

from __future__ import annotations

from typing import Any

from governance_core.rules.cost import Usage
from governance_core.rules.token_groups import apply_usage, stored_token_groups, token_groups


def span(payload: dict[str, Any], result: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"payload": payload, "result_payload": result, "purpose": "activity"}


GPT = {"model": "gpt-4o", "provider": "openai"}


def test_a_new_span_adds_its_usage_and_counts_itself() -> None:
    after = span({**GPT, "tokens": {"input": 10, "output": 2, "cacheRead": 3}})
    assert token_groups({}, None, after) == {"token_groups": [
        {"model_name": "gpt-4o", "provider": "openai", "input": 10, "output": 2,
         "cache_read": 3, "spans": 1},
    ]}


def test_a_span_without_usage_changes_nothing() -> None:
    assert token_groups({"token_groups": []}, None, span({"prompt": "hi"})) == {}


def test_a_rewrite_replaces_the_spans_contribution() -> None:
    before = span({**GPT, "tokens": {"input": 10, "output": 2}})
    instance = token_groups({}, None, before)
    after = span({**GPT}, {"usage": {"input_tokens": 30, "output_tokens": 4}})
    moved = token_groups(instance, before, after)["token_groups"]
    assert [(g["input"], g["output"], g["spans"]) for g in moved] == [(30, 4, 1)]


def test_an_unchanged_usage_is_no_change() -> None:
    before = span({**GPT, "tokens": {"input": 10, "output": 2}})
    instance = token_groups({}, None, before)
    assert token_groups(instance, before, dict(before, status="complete")) == {}


def test_a_group_without_spans_is_dropped_and_groups_stay_sorted() -> None:
    groups = apply_usage([], None, Usage("b-model", None, 1, 1, 0))
    groups = apply_usage(groups, None, Usage("a-model", "x", 2, 0, 0))
    groups = apply_usage(groups, None, Usage("a-model", None, 3, 0, 0))
    assert [(g["model_name"], g["provider"]) for g in groups] == [
        ("a-model", None), ("a-model", "x"), ("b-model", None),
    ]
    groups = apply_usage(groups, Usage("b-model", None, 1, 1, 0), Usage("a-model", "x", 1, 0, 0))
    assert [(g["model_name"], g["provider"], g["input"], g["spans"]) for g in groups] == [
        ("a-model", None, 3, 1), ("a-model", "x", 3, 2),
    ]
    assert [g.input for g in stored_token_groups({"token_groups": groups})] == [3, 3]


def test_usage_without_a_model_goes_to_the_unknown_group() -> None:
    groups = apply_usage([], None, Usage(None, None, 5, 1, 0))
    assert groups[0]["model_name"] == "unknown" and groups[0]["provider"] is None
