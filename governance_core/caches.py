"""What one process may keep of the store between operations: only what never changes.

A schema version is never changed once stored, so it is read once, and each of its span types
is prepared once (its payload checks, its score under each ruleset, and what one span of it
adds to the risk figures a policy reads under each ruleset). Each model's price per token is
worked out once per pricing catalogue. A risk profile or a policy can change in any process at
any time: an agent's ruleset and an account's policies are kept under the store's change mark
of them that a call read before its transaction
(:attr:`~governance_core.context.Context.settings_mark`), any change of either being a new
mark; without a mark they are read again by every operation that needs them, and only the
parsing of a ruleset is kept, keyed by the ruleset's JSON text (a changed ruleset is a new
key). A token and its account are kept by ``Governance`` itself, under the same mark.

Beside them, and not read from the store: the recent failed attempts to present a credential
(:mod:`governance_core.rate_limits`), and when each account's idle trace runs were last ended.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from datetime import datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Generic, TypeVar

from governance_core.models.records import Record
from governance_core.rate_limits import FailedAttempts

if TYPE_CHECKING:
    from governance_core.policies.deciding import ActivePolicies
    from governance_core.policies.recorded import TypeFacts, UnitCosts
    from governance_core.repository import RecordTable
    from governance_core.rules.cost import PricingCatalogue
    from governance_core.rules.payload_validation import SpanType
    from governance_core.rules.risk import Ruleset

__all__ = ["BoundedCache", "Caches"]

K = TypeVar("K")
V = TypeVar("V")


class BoundedCache(Generic[K, V]):
    """A dictionary that forgets everything once it holds ``size`` entries (cheap and safe)."""

    def __init__(self, size: int = 1024) -> None:
        self._size = size
        self._entries: dict[K, V] = {}
        self._lock = threading.Lock()

    def get(self, key: K, make: Callable[[], V | None]) -> V | None:
        """The value under ``key``, made by ``make`` when missing (a None is not kept)."""
        try:
            return self._entries[key]
        except KeyError:
            pass
        value = make()
        if value is not None:
            with self._lock:
                if len(self._entries) >= self._size:
                    self._entries.clear()
                self._entries[key] = value
        return value


class Caches:
    """The caches of one :class:`~governance_core.service.Governance` (one store)."""

    def __init__(self) -> None:
        self._schema_versions: BoundedCache[str, Record] = BoundedCache()
        # By schema version id and span type name: a span type's prepared payload checks.
        self.span_types: BoundedCache[tuple[str, str], SpanType] = BoundedCache()
        # By run id: the run's account, schema version id and agent id (none of which ever
        # changes), as a hint only (a write checks the run it reads in its transaction
        # against it) for the payload checks made before that transaction opens, and for the
        # records it reads as it opens.
        self.run_schema_versions: BoundedCache[str, tuple[str, str, str]] = BoundedCache()
        # By the JSON text of a stored ruleset: the ruleset, parsed.
        self.rulesets: BoundedCache[str, Ruleset] = BoundedCache()
        # By account, risk profile id (None: the account's default) and settings mark: the
        # ruleset that scores an agent of that profile.
        self.marked_rulesets: BoundedCache[tuple[str, str | None, Hashable], Ruleset] = (
            BoundedCache()
        )
        # By account and settings mark: the account's live policies, compiled.
        self.marked_policies: BoundedCache[tuple[str, Hashable], ActivePolicies] = (
            BoundedCache()
        )
        # By schema version id and a kept ruleset's identity: that ruleset (so its identity
        # stays its own while it is kept) and each span type's score under it.
        self.type_scores: BoundedCache[
            tuple[str | None, int], tuple[Ruleset, dict[str, Decimal]]
        ] = BoundedCache()
        # The same, for the judge of recorded spans: what one span of each type adds to a
        # run's risk figures (its score, categories and classification).
        self.type_facts: BoundedCache[
            tuple[str | None, int], tuple[Ruleset, dict[str, TypeFacts]]
        ] = BoundedCache()
        # By a pricing catalogue's identity: that catalogue (kept, as a ruleset above) and
        # each model's price per token under it.
        self.unit_costs: BoundedCache[int, tuple[PricingCatalogue, UnitCosts]] = BoundedCache()
        # Failed attempts to present a credential, by address and by credential.
        self.failed_attempts = FailedAttempts()
        # By account: when an export last ended the account's idle trace runs
        # (governance_core.otel.ingest), by the Governance's clock.
        self.idle_sweeps: dict[str, datetime] = {}

    def schema_version(self, table: RecordTable, schema_version_id: str) -> Record | None:
        """The schema version ``schema_version_id`` of ``table``, read once (it never changes)."""
        return self._schema_versions.get(schema_version_id, lambda: table.get(schema_version_id))
