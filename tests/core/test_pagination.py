"""Lists: the pagination arithmetic of decisions 6, page and sorting parameters, paging."""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.clock import FixedClock
from governance_core.pagination import PageRequest, pagination_output
from tests.core.accounts_world import World, fails, field_codes


@settings(max_examples=300, deadline=None)
@given(
    offset=st.integers(min_value=0, max_value=500),
    page_size=st.integers(min_value=1, max_value=100),
    item_count=st.integers(min_value=0, max_value=600),
)
def test_pagination_output_follows_decisions_6(
    offset: int, page_size: int, item_count: int
) -> None:
    page_length = max(0, min(page_size, item_count - offset))
    out = pagination_output(PageRequest(offset, page_size), item_count, page_length)
    assert out == {
        "item_count": item_count,
        "item_start": offset + 1 if page_length else 0,
        "item_end": offset + page_length if page_length else 0,
        "page_count": math.ceil(item_count / page_size),
        "page_index": offset // page_size + 1,
        "page_offset": offset,
        "page_size": page_size,
        "next_page_offset": offset + page_size if offset + page_size < item_count else None,
        "previous_page_offset": max(0, offset - page_size) if offset > 0 else None,
    }
    # Properties a client pages by.
    if page_length:
        assert out["item_end"] - out["item_start"] + 1 == page_length
        assert out["item_end"] <= item_count
    if out["next_page_offset"] is not None:
        assert out["item_end"] < item_count
        assert out["next_page_offset"] == out["item_end"]
    if offset % page_size == 0 and item_count and offset < item_count:
        assert out["page_index"] <= out["page_count"]
    assert (out["previous_page_offset"] is None) == (offset == 0)


def _teams(world: World, **params: Any) -> dict[str, Any]:
    return world.gov.call("teams/list", params, principal=world.a.principal)


def _make_teams(world: World, count: int) -> None:
    for index in range(count):
        world.a.session.create_team(name=f"team {index:02d}")


def test_defaults_are_offset_0_and_page_size_25_with_no_sorting(world: World) -> None:
    _make_teams(world, 29)
    out = _teams(world)
    assert len(out["summaries"]) == 25
    assert out["sorting"] is None
    assert out["pagination"] == {
        "item_count": 30, "item_start": 1, "item_end": 25, "page_count": 2, "page_index": 1,
        "page_offset": 0, "page_size": 25, "next_page_offset": 25, "previous_page_offset": None,
    }
    ids = [s["id"] for s in out["summaries"]]
    assert ids == sorted(ids)


def test_paging_visits_every_item_once(world: World) -> None:
    _make_teams(world, 22)
    seen: list[str] = []
    offset: int | None = 0
    while offset is not None:
        out = _teams(world, **{"pagination[offset]": str(offset), "pagination[page_size]": "7"})
        seen.extend(s["id"] for s in out["summaries"])
        offset = out["pagination"]["next_page_offset"]
    assert len(seen) == len(set(seen)) == 23
    assert seen == sorted(seen)


def test_a_page_past_the_end_is_empty(world: World) -> None:
    out = _teams(world, pagination={"offset": 50, "page_size": 10})
    assert out["summaries"] == []
    assert out["pagination"]["item_start"] == out["pagination"]["item_end"] == 0
    assert out["pagination"]["previous_page_offset"] == 40


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"pagination[page_size]": 0}, "pagination[page_size]"),
        ({"pagination[page_size]": 101}, "pagination[page_size]"),
        ({"pagination[page_size]": "ten"}, "pagination[page_size]"),
        ({"pagination[offset]": -1}, "pagination[offset]"),
        ({"pagination[offset]": "-5"}, "pagination[offset]"),
        ({"sorting": "inserted_at_or_not"}, "sorting"),
        ({"sorting": "-email"}, "sorting"),
        ({"sorting": {"field": "email"}}, "sorting[field]"),
        ({"sorting[field]": "name", "sorting[direction]": "up"}, "sorting[direction]"),
        ({"sorting[field]": "name", "sorting[nulls]": "middle"}, "sorting[nulls]"),
    ],
)
def test_bad_list_parameters_are_named(world: World, params: dict[str, Any], field: str) -> None:
    error = fails(world.gov.call, "teams/list", params, principal=world.a.principal)
    assert field_codes(error) == {field: "invalid_value"}


@pytest.mark.parametrize("size", [1, 100])
def test_page_size_bounds_are_accepted(world: World, size: int) -> None:
    assert _teams(world, **{"pagination[page_size]": size})["pagination"]["page_size"] == size


def test_sorting_by_a_name_in_both_syntaxes(world: World) -> None:
    for name in ("b", "c", "a"):
        world.a.session.create_team(name=name)
    short = _teams(world, sorting="-name")
    long = _teams(world, **{"sorting[field]": "name", "sorting[direction]": "desc"})
    nested = _teams(world, sorting={"field": "name", "direction": "desc"})
    assert [s["name"] for s in short["summaries"]] == ["c", "b", "a", "Core"]
    assert short["summaries"] == long["summaries"] == nested["summaries"]
    assert short["sorting"] == {"field": "name", "direction": "desc", "nulls": "auto"}
    ascending = _teams(world, sorting="name")
    assert [s["name"] for s in ascending["summaries"]] == ["Core", "a", "b", "c"]


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_nulls_first_and_last(world: World, direction: str) -> None:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    world.a.session.create_api_token(description="never used")
    clock.advance(timedelta(minutes=5))
    world.gov.call("teams/list", token=world.a.api_token)  # stamps the spare token's use
    tokens = world.a.session.list_api_tokens()["summaries"]
    used = {t["id"] for t in tokens if t["last_used_at"] is not None}
    assert used and len(used) < len(tokens)
    for nulls in ("first", "last"):
        out = world.gov.call("api_tokens/list", {
            "sorting[field]": "last_used_at", "sorting[direction]": direction,
            "sorting[nulls]": nulls,
        }, principal=world.a.principal)
        stamps = [s["last_used_at"] for s in out["summaries"]]
        nulls_at_front = stamps[: stamps.count(None)] == [None] * stamps.count(None)
        assert nulls_at_front == (nulls == "first")
        assert out["sorting"] == {"field": "last_used_at", "direction": direction, "nulls": nulls}
        present = [s for s in stamps if s is not None]
        assert present == sorted(present, reverse=direction == "desc")
