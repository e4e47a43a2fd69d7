"""The share of recent writes that collided, which decides whether a write runs alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from governance_core.contention import CONTENDED, HALF_LIFE_S, LATEST_WEIGHT, Contention

OUTCOMES = st.lists(st.tuples(st.booleans(), st.floats(0, 5)), max_size=60)
"""First runs side by side: whether each collided, and the seconds since the one before."""


def _recorded(outcomes: list[tuple[bool, float]]) -> tuple[Contention, float]:
    contention, now = Contention(), 100.0
    for collided, pause in outcomes:
        now += pause
        contention.record(collided, now)
    return contention, now


def test_writes_run_alone_while_most_collide_and_side_by_side_once_it_fades() -> None:
    contention = Contention()
    assert not contention.runs_alone(0.0), "a new process writes side by side"
    contention.record(True, 1.0)
    assert not contention.runs_alone(1.0), "one collision is not contention"
    contention.record(True, 1.1)
    assert contention.runs_alone(1.1)
    # Runs alone tell nothing of collisions: the share fades until writes go side by side.
    assert contention.runs_alone(1.1 + HALF_LIFE_S / 2)
    assert not contention.runs_alone(1.1 + 2 * HALF_LIFE_S)


def test_one_collision_in_ten_never_makes_writes_run_alone() -> None:
    contention, now = Contention(), 0.0
    for number in range(200):
        now += 0.01
        contention.record(number % 10 == 0, now)
        assert not contention.runs_alone(now)


@given(OUTCOMES)
def test_the_share_is_a_fraction_that_only_fades_without_outcomes(
    outcomes: list[tuple[bool, float]],
) -> None:
    contention, now = _recorded(outcomes)
    share = contention.share(now)
    assert 0.0 <= share <= 1.0
    assert contention.share(now + 0.5) <= share
    assert contention.share(now + HALF_LIFE_S) <= share / 2 + 1e-12


@given(OUTCOMES, st.integers(1, 20))
def test_first_runs_that_commit_bring_the_share_down(
    outcomes: list[tuple[bool, float]], committed: int,
) -> None:
    contention, now = _recorded(outcomes)
    for _ in range(committed):
        contention.record(False, now)
    assert contention.share(now) <= (1 - LATEST_WEIGHT) ** committed + 1e-12
    if (1 - LATEST_WEIGHT) ** committed < CONTENDED:
        assert not contention.runs_alone(now)
