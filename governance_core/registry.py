"""The operation registry: one table of named operations, served by HTTP and by bulk alike.

An operation is a function ``handler(ctx, fields) -> envelope`` marked with
:func:`operation` under its bulk ``_type`` name (``"teams/create"``). Marking registers
nothing: a :class:`Registry` is built explicitly from the modules that hold the handlers
(:func:`governance_core.operations.default_registry`) and held by the
:class:`~governance_core.service.Governance` that serves it. The service authenticates,
checks scope, applies idempotency and opens the transaction; the handler reads its members
and does the work.

An operation may also name a ``prepare`` function, ``prepare(ctx, fields) -> value``: the
service calls it with the same parameters before the write transaction opens (never inside
one), and the handler finds its value as ``ctx.prepared``. It does the work that needs no
lock (checking payloads against their schemas, from records read without a transaction), so
the transaction holds the store's writer only for the writes. What it answers is only ever
a shortcut: the handler re-checks that what the value was computed from is still current,
and does the work itself when it is not, or when there is no value (a parameter that does
not parse, an operation run inside another's transaction).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from types import ModuleType
from typing import Any

import attrs

from governance_core.context import Context, TokenScope
from governance_core.fields import Fields

__all__ = [
    "ACCOUNT",
    "ANY_SCOPE",
    "INGESTION",
    "Handler",
    "Operation",
    "Preparer",
    "Registry",
    "operation",
]

ACCOUNT: frozenset[TokenScope] = frozenset({"account"})
INGESTION: frozenset[TokenScope] = frozenset({"agent_deployment"})
ANY_SCOPE: frozenset[TokenScope] = ACCOUNT | INGESTION


Handler = Callable[[Context, Fields], dict[str, Any]]
Preparer = Callable[[Context, Fields], object]
"""Work an operation does before its transaction: ``prepare(ctx, fields) -> value`` (or None)."""


@attrs.frozen
class Operation:
    """A registered operation.

    ``write`` operations run in a transaction and, when ``idempotent`` (every one but bulk,
    whose items carry their own keys), store their response under the request's key. A
    ``batch`` operation (bulk) writes many records in that transaction: they are kept and
    written together as it commits. ``prepare`` (see the module) runs before the transaction.
    A ``defers_rollups`` operation (a span write) leaves its runs' rollups to the end of its
    transaction (:class:`~governance_core.domain.batch.WriteBatch`): any other operation
    run in the same transaction has them kept first, so it reads them current. The
    ``prepare`` of a ``prepares_reads`` operation names only what its transaction will read
    first (:class:`~governance_core.repository.FirstReads`): it runs only where the store
    reads them together, one round trip for all (the write-behind store's
    :attr:`~governance_core.storage.write_behind.WriteBehindStore.reads_together`: on
    PostgreSQL; SQLite reads in process, and naming them costs it more than it saves).
    """

    name: str
    handler: Handler
    write: bool
    scopes: frozenset[TokenScope]
    authenticated: bool = True
    idempotent: bool = True
    batch: bool = False
    prepare: Preparer | None = None
    defers_rollups: bool = False
    prepares_reads: bool = False

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
    batch: bool = False,
    prepare: Preparer | None = None,
    defers_rollups: bool = False,
    prepares_reads: bool = False,
) -> Callable[[Handler], Handler]:
    """Mark ``handler`` as operation ``name``, for a :class:`Registry` built from its module.

    ``prepare`` is the operation's work before its transaction (see the module);
    ``defers_rollups`` and ``prepares_reads`` see :class:`Operation`.
    """

    def mark(handler: Handler) -> Handler:
        described = Operation(
            name, handler, write, frozenset(scopes), authenticated, idempotent, batch, prepare,
            defers_rollups, prepares_reads,
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
