from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from governance_core.clock import format_timestamp, parse_timestamp

aware = st.datetimes(
    min_value=datetime(1, 1, 2), max_value=datetime(9999, 12, 30),
    timezones=st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)),
                               timezone(-timedelta(hours=8))]),
)


@given(aware)
def test_a_formatted_timestamp_is_utc_with_microseconds_and_reads_back(moment: datetime) -> None:
    text = format_timestamp(moment)
    assert len(text) == 27 and text.endswith("Z") and text[4] == "-" and text[19] == "."
    assert text == moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ").zfill(27)
    assert parse_timestamp(text) == moment


@given(aware, aware)
def test_formatted_timestamps_order_as_their_moments(first: datetime, second: datetime) -> None:
    assert (format_timestamp(first) < format_timestamp(second)) == (first < second)


def test_a_naive_time_is_taken_as_utc() -> None:
    assert format_timestamp(datetime(2026, 11, 21, 16, 42)) == "2026-11-21T16:42:00.000000Z"
    assert format_timestamp(datetime(999, 1, 1, tzinfo=UTC)) == "0999-01-01T00:00:00.000000Z"
