"""The operation registry: one table of named operations, served by HTTP and by bulk alike.

An operation is a function ``handler(ctx, fields) -> envelope`` registered under its bulk
``_type`` name (``"teams/create"``). The service authenticates, checks scope, applies
idempotency and opens the transaction; the handler reads its members and does the work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from datetime import datetime, timedelta
from typing import Any, Literal

import attrs

from governance_core.clock import Clock
from governance_core.encryption import PlainCipher, ValueCipher
from governance_core.fields import Fields
from governance_core.ids import IdFactory
from governance_core.rules.cost import PricingCatalogue, load_catalogue
from governance_core.storage.protocol import Store

__all__ = [
    "ACCOUNT",
    "ANY_SCOPE",
    "INGESTION",
    "REGISTRY",
    "Config",
    "Context",
    "Handler",
    "Operation",
    "Principal",
    "TokenScope",
    "operation",
]

TokenScope = Literal["account", "agent_deployment"]
ACCOUNT: frozenset[TokenScope] = frozenset({"account"})
INGESTION: frozenset[TokenScope] = frozenset({"agent_deployment"})
ANY_SCOPE: frozenset[TokenScope] = ACCOUNT | INGESTION


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
class Config:
    """Settings an embedder or operator may change; every field has a working default.

    ``pricing`` prices token usage on read (default: the packaged LiteLLM snapshot, parsed
    once per process; ``load_catalogue(overrides)`` adds an override table). ``cipher``
    encrypts sensitive values at rest (default: none; ``cipher_from_key(key)`` for Fernet).
    """

    pricing: PricingCatalogue = attrs.field(factory=load_catalogue)
    cipher: ValueCipher = attrs.field(factory=PlainCipher)
    dormant_after: timedelta = timedelta(days=30)
    invite_ttl: timedelta = timedelta(days=7)
    base_url: str = "http://127.0.0.1:8000"


@attrs.frozen
class Context:
    """What a handler works with: injected parts, the caller, and the operation's one 'now'."""

    store: Store
    ids: IdFactory
    config: Config
    principal: Principal | None
    now: datetime
    clock: Clock

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


Handler = Callable[[Context, Fields], dict[str, Any]]


@attrs.frozen
class Operation:
    """A registered operation."""

    name: str
    handler: Handler
    write: bool
    scopes: frozenset[TokenScope]
    authenticated: bool = True

    @property
    def summary(self) -> str:
        """The first line of the handler's docstring."""
        return (self.handler.__doc__ or self.name).strip().splitlines()[0]


REGISTRY: dict[str, Operation] = {}


def operation(
    name: str,
    *,
    write: bool,
    scopes: Collection[TokenScope] = ACCOUNT,
    authenticated: bool = True,
) -> Callable[[Handler], Handler]:
    """Register ``handler`` as operation ``name``."""

    def register(handler: Handler) -> Handler:
        if name in REGISTRY:
            raise ValueError(f"operation {name} is registered twice")
        REGISTRY[name] = Operation(name, handler, write, frozenset(scopes), authenticated)
        return handler

    return register
