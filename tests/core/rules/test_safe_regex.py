"""Patterns from untrusted schemas: run only where their estimated cost is bounded."""

from __future__ import annotations

import re
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.rules.safe_regex import (
    CHECK_BUDGET,
    MAX_PATTERN_LENGTH,
    RegexBudget,
    guarded,
)

CATASTROPHIC = [r"^(a+)+$", r"^(a|aa)+$", r"(a*)*b", r"^(\w+\s?)*$", r"(x+x+)+y"]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_are_skipped_on_long_subjects_and_return_fast(pattern: str) -> None:
    budget = RegexBudget()
    started = time.perf_counter()
    assert budget.search(pattern, "a" * 5000 + "!") is None
    assert time.perf_counter() - started < 0.05
    assert budget.skipped == {pattern}


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_catastrophic_patterns_still_run_on_short_subjects(pattern: str) -> None:
    assert guarded(pattern).max_length >= 8
    assert RegexBudget().search(pattern, "aaa!") is not None


@pytest.mark.parametrize(
    ("pattern", "at_least"),
    [
        (r"^[a-z0-9-]+$", 1_000_000),
        (r"^\d{4}-\d{2}-\d{2}$", 1_000_000),
        (r"^[^@\s]+@[^@\s]+\.[^@\s]+$", 100),
        (r"[a-z]+", 1000),
        (r"abc", 1_000_000),
    ],
)
def test_ordinary_patterns_run_on_realistic_subjects(pattern: str, at_least: int) -> None:
    assert guarded(pattern).max_length >= at_least


def test_anchoring_makes_a_pattern_cheaper() -> None:
    assert guarded(r"^a*a*b").max_length > guarded(r"a*a*b").max_length


def test_multiline_anchor_does_not_count_as_anchored() -> None:
    assert guarded(r"(?m)^a*a*b").max_length == guarded(r"a*a*b").max_length


def test_bad_and_oversized_patterns_are_never_run() -> None:
    budget = RegexBudget()
    assert budget.search("(unclosed", "x") is None
    assert budget.search("a" * (MAX_PATTERN_LENGTH + 1), "a") is None
    assert budget.skipped == {"(unclosed", "a" * (MAX_PATTERN_LENGTH + 1)}


def test_searches_share_one_budget() -> None:
    pattern = r"^(a|b)*(c|d)*$"
    length = guarded(pattern).max_length
    subject = "a" * length
    single = 2 ** guarded(pattern).log_cost(length)
    budget = RegexBudget(total=int(single * 2.5))
    results = [budget.search(pattern, subject) for _ in range(4)]
    assert results == [True, True, None, None]


def test_within_budget_means_fast() -> None:
    # The worst pattern at the longest subject it may run on stays well under a second.
    pattern = r"^(a+)+$"
    subject = "a" * (guarded(pattern).max_length - 1) + "!"
    started = time.perf_counter()
    assert RegexBudget(total=CHECK_BUDGET).search(pattern, subject) is False
    assert time.perf_counter() - started < 0.5


@settings(max_examples=60, deadline=None)
@given(
    pattern=st.sampled_from([r"^[a-z]+$", r"\d+", r"^(ab|cd)+$", r"x?y*z", r"^(?:[a-c]+\.)+$"]),
    subject=st.text(alphabet="abcdxyz.0123", max_size=30),
)
def test_a_search_that_runs_agrees_with_re(pattern: str, subject: str) -> None:
    found = RegexBudget().search(pattern, subject)
    if found is not None:
        assert found == (re.search(pattern, subject) is not None)
