"""What an operation runs with: its caller, the settings and the injected parts.

:class:`Principal` is the caller, :class:`Config` the settings an embedder may change and
:class:`Context` what a handler or a domain function is given.

The service builds one :class:`Context` per operation; handlers and the domain read the
store, the clock, the ids and the caller from it.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal, Protocol

import attrs

from governance_core.caches import Caches
from governance_core.clock import Clock, parse_timestamp
from governance_core.encryption import NoKeyCipher, ValueCipher
from governance_core.ids import IdFactory
from governance_core.repository import Repository, Tables
from governance_core.rules.cost import PricingCatalogue, load_catalogue
from governance_core.storage.protocol import Store

if TYPE_CHECKING:
    from governance_core.registry import Registry

__all__ = ["Config", "Context", "Invoke", "KnownToken", "Principal", "TokenScope"]

TokenScope = Literal["account", "agent_deployment"]


@attrs.frozen
class Principal:
    """Who is calling: the token's account, scope and what the scope is bound to."""

    account_id: str
    partition: int
    scope: TokenScope = "account"
    token_id: str | None = None
    admin_user_id: str | None = None
    agent_id: str | None = None
    environment_id: str | None = None

    @property
    def is_ingestion(self) -> bool:
        """Whether this is an ``agent_deployment`` (ingestion) token."""
        return self.scope == "agent_deployment"


@attrs.frozen
class KnownToken:
    """A stored token as authentication checks it: the caller it stands for, and its state.

    Made once per read of the token (and kept while no token or account changes), so that
    checking a token on every call parses no timestamps and builds no caller.
    """

    principal: Principal
    status: str
    expires_at: datetime | None
    last_used_at: datetime | None

    @classmethod
    def of(cls, record: Mapping[str, Any], partition: int) -> KnownToken:
        """The token ``record`` of an account in ``partition``."""
        expires_at, last_used_at = record.get("expires_at"), record.get("last_used_at")
        return cls(
            principal=Principal(
                account_id=record["account_id"],
                partition=partition,
                scope=record["token_scope"],
                token_id=record["id"],
                admin_user_id=record.get("admin_user_id"),
                agent_id=record.get("agent_id"),
                environment_id=record.get("environment_id"),
            ),
            status=record["status"],
            expires_at=parse_timestamp(expires_at) if expires_at else None,
            last_used_at=parse_timestamp(last_used_at) if last_used_at else None,
        )


@attrs.frozen
class Config:
    """Settings an embedder or operator may change; every field has a working default.

    ``pricing`` prices token usage on read (default: the packaged LiteLLM snapshot, parsed
    once per process; ``load_catalogue(overrides)`` adds an override table). ``cipher``
    encrypts sensitive values at rest (``cipher_from_key(key)`` for Fernet; by default none,
    and storing a sensitive value is refused: ``PlaintextForTests()`` is the tests' choice).
    """

    pricing: PricingCatalogue = attrs.field(factory=load_catalogue)
    cipher: ValueCipher = attrs.field(factory=NoKeyCipher)
    dormant_after: timedelta = timedelta(days=30)
    invite_ttl: timedelta = timedelta(days=7)
    base_url: str = "http://127.0.0.1:8000"
    webhook_allowed_networks: tuple[str, ...] = ()
    """Networks webhooks may reach although not public (``10.0.0.0/8``); none by default."""
    judge_recorded_spans: bool = True
    """Detective mode: the live policies judge each activity span as it is recorded."""


class Invoke(Protocol):
    """Run another registered operation as the same caller: ``invoke(name, params) -> envelope``.

    ``prepared`` is what the operation's ``prepare`` answered for ``params`` before the
    caller's transaction opened (see :mod:`governance_core.registry`).
    """

    def __call__(
        self, name: str, params: Mapping[str, Any], prepared: object = None
    ) -> dict[str, Any]:
        """Run ``name`` with ``params``; its envelope."""


def _no_invoke(name: str, params: Mapping[str, Any], prepared: object = None) -> dict[str, Any]:
    raise RuntimeError(f"this context cannot run {name}: it was made outside a Governance")


@attrs.define
class Context:
    """What a handler works with: injected parts, the caller, and the operation's one 'now'.

    ``now`` is read from ``clock`` when first asked for (an operation that never asks, such
    as bulk, which only runs others, moves no clock) and stays the same afterwards.
    ``caches`` keep what never changes (see :mod:`governance_core.caches`). ``registry`` is
    the table the operation was found in; ``invoke`` runs another of its
    operations as the same caller, with its own scope check, idempotency and (nested)
    transaction, as bulk items are run. ``prepared`` is what the operation's ``prepare``
    answered before its transaction opened (None when it has none, or nothing was prepared).
    ``write_batch`` is what the span writes of its transaction share and leave to its end,
    when it runs in a batch (:class:`~governance_core.domain.batch.WriteBatch`: a bulk
    request, or :meth:`~governance_core.service.Governance.transaction`).
    ``settings_mark`` is the store's change mark of the risk profiles and policies (among
    others) read as the call authenticated, before its transaction, while nothing the call
    ran since can have changed either (None: unknown): the rulesets and the policies are kept
    under it, so that a span write or a decision reads neither again while no process
    changed them. ``tables`` are :attr:`store`'s (made on first use unless given: a
    ``Governance`` gives every context the same).
    """

    store: Store
    ids: IdFactory
    config: Config
    principal: Principal | None
    _now: datetime | None
    clock: Clock
    registry: Registry
    invoke: Invoke = _no_invoke
    caches: Caches = attrs.field(factory=Caches)
    prepared: object = None
    write_batch: object = None
    settings_mark: Hashable | None = None
    _tables: Tables | None = attrs.field(default=None, eq=False, repr=False)

    @property
    def now(self) -> datetime:
        """The operation's one 'now'."""
        if self._now is None:
            self._now = self.clock()
        return self._now

    @property
    def tables(self) -> Tables:
        """Every table of :attr:`store`, by name (:class:`~governance_core.repository.Tables`)."""
        if self._tables is None or self._tables.store is not self.store:
            self._tables = Tables(self.store)
        return self._tables

    @property
    def repo(self) -> Repository:
        """Typed access to the run family's records in :attr:`store`."""
        return Repository(self.store)

    @property
    def account_id(self) -> str:
        """The caller's account (operations that need no caller never ask)."""
        assert self.principal is not None, "this operation needs an authenticated caller"
        return self.principal.account_id

    def new_id(self, partition: int | None = None) -> str:
        """A new id in the caller's account partition."""
        if partition is None:
            assert self.principal is not None
            partition = self.principal.partition
        return self.ids.new(partition, self.now)
