import re
from datetime import UTC, datetime, timedelta

import pfid
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.ids import (
    MAX_PARTITION,
    IdFactory,
    SeededIds,
    encode_pfid,
    encode_random_part,
    extract_partition,
    is_pfid,
    time_and_partition_text,
)

PFID = re.compile(r"^[0-7][0-9abcdefghjkmnpqrstvwxyz]{31}$")
START = datetime(2026, 1, 1, tzinfo=UTC)


@settings(max_examples=50)
@given(
    partition=st.integers(0, MAX_PARTITION),
    steps=st.lists(st.integers(-5, 5), min_size=1, max_size=50),
)
def test_ids_are_well_formed_partitioned_and_in_creation_order(
    partition: int, steps: list[int]
) -> None:
    factory = SeededIds(1)
    at = START
    made = []
    for step in steps:
        at += timedelta(milliseconds=step)
        made.append(factory.new(partition, at))
    assert all(PFID.match(i) and is_pfid(i) for i in made)
    assert all(extract_partition(i) == partition for i in made)
    assert made == sorted(made)
    assert len(set(made)) == len(made)


def test_seeded_ids_repeat_and_system_ids_differ() -> None:
    assert SeededIds(4).new(9, START) == SeededIds(4).new(9, START)
    assert IdFactory().new(9, START) != IdFactory().new(9, START)


def test_partition_is_in_range() -> None:
    factory = IdFactory()
    assert all(0 <= factory.new_partition() <= MAX_PARTITION for _ in range(100))


@settings(max_examples=200)
@given(
    st.integers(0, 2**48 - 1), st.integers(0, 2**30 - 1), st.integers(0, 2**80 - 1)
)
def test_encode_pfid_writes_what_the_pfid_package_writes(
    millis: int, partition: int, random_part: int
) -> None:
    raw = millis.to_bytes(6, "big") + partition.to_bytes(4, "big") + random_part.to_bytes(10, "big")
    assert encode_pfid(millis, partition, random_part) == pfid.encode(pfid.BinaryPfid(raw))


@settings(max_examples=200)
@given(
    st.integers(0, 2**48 - 1), st.integers(0, 2**30 - 1), st.integers(0, 2**80 - 1),
    st.booleans(),
)
def test_the_two_halves_of_a_pfid_are_what_the_pfid_package_writes(
    millis: int, partition: int, random_part: int, upper: bool
) -> None:
    raw = millis.to_bytes(6, "big") + partition.to_bytes(4, "big") + random_part.to_bytes(10, "big")
    written = str(pfid.encode(pfid.BinaryPfid(raw)))
    assert encode_random_part(random_part) == written[16:]
    head = str(pfid.encode(pfid.BinaryPfid(pfid.decode(written)[:10] + bytes(10))))[:16]
    assert time_and_partition_text(written.upper() if upper else written) == head
