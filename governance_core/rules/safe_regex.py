"""Regular expressions from untrusted schemas, run only where their cost is bounded (pure).

JSON Schema ``pattern`` and ``patternProperties`` hold regular expressions that callers
write, and Python's backtracking ``re`` takes exponential time on some of them (``^(a+)+$``
against ``"aaaa...b"``) without releasing the interpreter. A check cannot be interrupted once
it runs, so the decision is taken before: each pattern is parsed once and given a worst-case
estimate of the backtracking paths it may explore on a subject of length ``n``. A search runs
only when that estimate stays under :data:`CHECK_BUDGET`, and the searches of one validation
share :data:`VALIDATION_BUDGET`; any other search is skipped and reported as not checked.

The estimate is deliberately pessimistic: every way a quantifier can divide the subject
counts as a path, a quantified group that can itself match in several ways counts as
exponential, and an unanchored pattern is tried at every start position.
"""

from __future__ import annotations

import functools
import math
import re
import warnings
from typing import Any

import attrs

with warnings.catch_warnings():
    # The parser Python's own ``re`` uses; its public alias is deprecated, not the parser.
    warnings.simplefilter("ignore", DeprecationWarning)
    import sre_constants as sc
    import sre_parse

__all__ = [
    "CHECK_BUDGET",
    "MAX_PATTERN_LENGTH",
    "VALIDATION_BUDGET",
    "GuardedPattern",
    "RegexBudget",
    "guarded",
]

CHECK_BUDGET = 2**20
"""Most estimated paths one search may explore (about 30 ms at worst on these machines)."""

VALIDATION_BUDGET = 2**22
"""Most estimated paths all the searches of one payload validation may explore together."""

MAX_PATTERN_LENGTH = 1000
"""Longer patterns are never run."""

MAX_SUBJECT_LENGTH = 1 << 24
"""The longest subject :attr:`GuardedPattern.max_length` is computed up to."""

_LOG_CHECK_BUDGET = math.log2(CHECK_BUDGET)
_REPEATS = {sc.MAX_REPEAT, sc.MIN_REPEAT, sc.POSSESSIVE_REPEAT}
_GROUP_REFS = {sc.GROUPREF, sc.GROUPREF_IGNORE, sc.GROUPREF_LOC_IGNORE, sc.GROUPREF_UNI_IGNORE}
_ANCHORS = {sc.AT_BEGINNING, sc.AT_BEGINNING_STRING}


@attrs.frozen
class GuardedPattern:
    """A parsed pattern and what it may cost: searched only on subjects up to ``max_length``.

    ``compiled`` is None when Python cannot compile the pattern (it is then never run).
    """

    source: str
    compiled: re.Pattern[str] | None
    tree: Any = attrs.field(repr=False)
    max_length: int

    def log_cost(self, length: int) -> float:
        """Estimate log2 of the paths a search of a ``length``-character subject explores."""
        if self.tree is None:
            return math.inf
        return _log_cost(self.tree, length)


@functools.lru_cache(maxsize=2048)
def guarded(pattern: str) -> GuardedPattern:
    """Parse, compile and measure ``pattern`` (cached by its text)."""
    if len(pattern) > MAX_PATTERN_LENGTH:
        return GuardedPattern(pattern, None, None, -1)
    try:
        compiled = re.compile(pattern)
        tree = sre_parse.parse(pattern)
    except (re.error, RecursionError, OverflowError, ValueError):
        return GuardedPattern(pattern, None, None, -1)
    return GuardedPattern(pattern, compiled, tree, _max_length(tree))


class RegexBudget:
    """The paths one validation may still spend on searches, and the patterns it skipped."""

    def __init__(self, total: int = VALIDATION_BUDGET) -> None:
        self.remaining = total
        self.skipped: set[str] = set()

    def search(self, pattern: str, subject: str) -> bool | None:
        """Search ``subject`` for ``pattern``: found or not, or None when that is too costly."""
        guard = guarded(pattern)
        if guard.compiled is None or len(subject) > guard.max_length:
            self.skipped.add(pattern)
            return None
        cost = 2 ** guard.log_cost(len(subject))
        if cost > self.remaining:
            self.skipped.add(pattern)
            return None
        self.remaining -= int(cost)
        return guard.compiled.search(subject) is not None


def _max_length(tree: Any) -> int:
    """Find the longest subject whose estimated cost stays within :data:`CHECK_BUDGET`."""
    if _log_cost(tree, 0) > _LOG_CHECK_BUDGET:
        return -1
    low, high = 0, MAX_SUBJECT_LENGTH
    while low < high:
        middle = (low + high + 1) // 2
        if _log_cost(tree, middle) <= _LOG_CHECK_BUDGET:
            low = middle
        else:
            high = middle - 1
    return low


def _log_cost(tree: Any, n: int) -> float:
    starts = 0.0 if _anchored(tree) else math.log2(n + 1)
    return starts + _log_paths(tree, n)


def _anchored(tree: Any) -> bool:
    if tree.state.flags & sc.SRE_FLAG_MULTILINE or not len(tree.data):
        return False
    op, value = tree.data[0]
    return bool(op == sc.AT and value in _ANCHORS)


def _log_paths(items: Any, n: int) -> float:
    """Estimate log2 of the ways ``items`` can match within a subject of length ``n``."""
    total = 0.0
    for op, value in items:
        if op in _REPEATS:
            total += _repeat_paths(value, n)
        elif op == sc.SUBPATTERN:
            total += _log_paths(value[-1], n)
        elif op == sc.ATOMIC_GROUP:
            total += _log_paths(value, n)
        elif op == sc.BRANCH:
            total += _log_sum(_log_paths(branch, n) for branch in value[1])
        elif op in (sc.ASSERT, sc.ASSERT_NOT):
            total += _log_paths(value[1], n)
        elif op == sc.GROUPREF_EXISTS:
            total += _log_sum(_log_paths(branch, n) for branch in value[1:] if branch is not None)
        elif op in _GROUP_REFS:
            total += math.log2(n + 1)
    return total


def _repeat_paths(value: Any, n: int) -> float:
    low, high, body = value
    body_paths = _log_paths(body, n)
    body_low, body_high = body.getwidth()
    bounded = high != sc.MAXREPEAT
    if body_paths > 0 or body_low != body_high:
        # The body itself can match in several ways: every division of the subject between
        # iterations is another path, exponentially many.
        unbounded = n + body_paths
        return min(unbounded, high * (math.log2(n + 1) + body_paths)) if bounded else unbounded
    most = min(high, n) if bounded else n
    return math.log2(max(most - low + 1, 1))


def _log_sum(values: Any) -> float:
    logs = list(values)
    if not logs:
        return 0.0
    top: float = max(logs)
    return top + math.log2(sum(2.0 ** (value - top) for value in logs))
