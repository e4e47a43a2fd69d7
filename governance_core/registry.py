"""The operation registry: one table of named operations, served by HTTP and by bulk alike.

An operation is a function ``handler(ctx, fields) -> envelope`` marked with
:func:`operation` under its bulk ``_type`` name (``"teams/create"``). Marking registers
nothing: a :class:`Registry` is built explicitly from the modules that hold the handlers
(:func:`governance_core.operations.default_registry`) and held by the
:class:`~governance_core.service.Governance` that serves it. The service authenticates,
checks scope, applies idempotency and opens the transaction; the handler reads its members
and does the work.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from datetime import datetime, timedelta
from types import ModuleType
from typing import Any, Literal

import attrs

from governance_core.caches import Caches
from governance_core.clock import Clock
from governance_core.encryption import PlainCipher, ValueCipher
from governance_core.fields import Fields
from governance_core.ids import IdFactory
from governance_core.repository import Repository
from governance_core.rules.cost import PricingCatalogue, load_catalogue
from governance_core.storage.protocol import Store

__all__ = [
    "ACCOUNT",
    "ANY_SCOPE",
    "INGESTION",
    "Config",
    "Context",
    "Handler",
    "Invoke",
    "Operation",
    "Principal",
    "Registry",
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


Invoke = Callable[[str, Mapping[str, Any]], dict[str, Any]]
"""Run another registered operation as the same caller: ``invoke(name, params) -> envelope``."""


def _no_invoke(name: str, params: Mapping[str, Any]) -> dict[str, Any]:
    raise RuntimeError(f"this context cannot run {name}: it was made outside a Governance")


@attrs.define
class Context:
    """What a handler works with: injected parts, the caller, and the operation's one 'now'.

    ``now`` is read from ``clock`` when first asked for (an operation that never asks, such
    as bulk, which only runs others, moves no clock) and stays the same afterwards.
    ``caches`` keep what never changes (see :mod:`governance_core.caches`). ``registry`` is
    the table the operation was found in; ``invoke`` runs another of its
    operations as the same caller, with its own scope check, idempotency and (nested)
    transaction, as bulk items are run.
    """

    store: Store
    ids: IdFactory
    config: Config
    principal: Principal | None
    _now: datetime | None
    clock: Clock
    registry: Registry = attrs.field(factory=lambda: Registry(()))
    invoke: Invoke = _no_invoke
    caches: Caches = attrs.field(factory=Caches)

    @property
    def now(self) -> datetime:
        """The operation's one 'now'."""
        if self._now is None:
            self._now = self.clock()
        return self._now

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


Handler = Callable[[Context, Fields], dict[str, Any]]


@attrs.frozen
class Operation:
    """A registered operation.

    ``write`` operations run in a transaction and, when ``idempotent`` (every one but bulk,
    whose items carry their own keys), store their response under the request's key.
    """

    name: str
    handler: Handler
    write: bool
    scopes: frozenset[TokenScope]
    authenticated: bool = True
    idempotent: bool = True

    @property
    def summary(self) -> str:
        """The first line of the handler's docstring."""
        return (self.handler.__doc__ or self.name).strip().splitlines()[0]


_MARK = "__governance_operation__"


def operation(
    name: str,
    *,
    write: bool,
    scopes: Collection[TokenScope] = ACCOUNT,
    authenticated: bool = True,
    idempotent: bool = True,
) -> Callable[[Handler], Handler]:
    """Mark ``handler`` as operation ``name``, for a :class:`Registry` built from its module."""

    def mark(handler: Handler) -> Handler:
        described = Operation(
            name, handler, write, frozenset(scopes), authenticated, idempotent
        )
        setattr(handler, _MARK, described)
        return handler

    return mark


class Registry(Mapping[str, Operation]):
    """The operations one :class:`~governance_core.service.Governance` serves, by name."""

    def __init__(self, operations: Iterable[Operation]) -> None:
        self._operations: dict[str, Operation] = {}
        for described in operations:
            if described.name in self._operations:
                raise ValueError(f"operation {described.name} is registered twice")
            self._operations[described.name] = described

    @classmethod
    def from_modules(cls, modules: Iterable[ModuleType]) -> Registry:
        """The operations marked with :func:`operation` in ``modules`` (each defined there)."""
        found: list[Operation] = []
        for module in modules:
            for value in vars(module).values():
                described = getattr(value, _MARK, None)
                if (
                    isinstance(described, Operation)
                    and getattr(value, "__module__", None) == module.__name__
                ):
                    found.append(described)
        return cls(found)

    def __getitem__(self, name: str) -> Operation:
        return self._operations[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._operations)

    def __len__(self) -> int:
        return len(self._operations)
