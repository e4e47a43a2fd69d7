"""The span count's bucket: the runs list sorts by it from an index, then by the count."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from governance_core.domain.runs import span_bucket_count, span_count_bucket

counts = st.integers(min_value=0, max_value=10**12)


@given(counts, counts)
def test_a_larger_count_never_has_a_smaller_bucket(first: int, second: int) -> None:
    low, high = sorted((first, second))
    assert span_count_bucket(low) <= span_count_bucket(high)


@given(st.integers(min_value=100, max_value=10**12))
def test_counts_within_one_percent_share_a_bucket_or_the_next(count: int) -> None:
    # Above 100 a bucket spans from 1% (at the top of a power of ten) to 10% of the count:
    # a span write moves it a few dozen times in a run's life, not on every span.
    later = count + count // 100
    bucket = span_count_bucket(count)
    following = bucket + 1 if bucket % 100 < 99 else (bucket // 100 + 1) * 100 + 10
    assert span_count_bucket(later) in (bucket, following)


def test_known_buckets() -> None:
    assert [span_count_bucket(n) for n in (0, 9, 10, 99, 100, 109, 110, 12_345)] == [
        100, 109, 210, 299, 310, 310, 311, 512,
    ]


def _says_its_count_exactly_when_it_holds_no_other(count: int) -> None:
    bucket = span_count_bucket(count)
    holds_others = any(
        span_count_bucket(other) == bucket for other in (count - 1, count + 1) if other >= 0
    )
    assert span_bucket_count(bucket) == (None if holds_others else count), count


def test_a_bucket_says_its_count_exactly_when_it_holds_no_other() -> None:
    # The runs list reads a bucket of one count in its index's order, sorting nothing. Every
    # count to 2,000: each bucket of one count, and the first ones of several.
    for count in range(2_000):
        _says_its_count_exactly_when_it_holds_no_other(count)


@given(counts)
def test_a_large_counts_bucket_says_it_holds_several(count: int) -> None:
    _says_its_count_exactly_when_it_holds_no_other(count)
