"""``Governance``: the one object an embedder needs.

It holds the injected parts (store, clock, ids, configuration, the registry of operations),
authenticates callers, and runs operations from its registry with scope checks, idempotency
and one transaction each (a savepoint when nested in another's, as bulk items are).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from datetime import datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import attrs

from governance_core import policies
from governance_core.caches import BoundedCache, Caches
from governance_core.client import AccountOperations, Issued
from governance_core.clock import Clock, SystemClock, format_timestamp
from governance_core.contention import Contention
from governance_core.context import Config, Context, KnownToken, Principal
from governance_core.credentials import TOKEN_PREFIX, hash_secret
from governance_core.domain.batch import WriteBatch, keeps_settings, writes_run_records
from governance_core.domain.runs import PreparedChecks
from governance_core.encryption import cipher_from_key
from governance_core.errors import (
    BadAuthToken,
    GovernanceError,
    NotAuthenticated,
    NotFound,
    NotPermitted,
    WriteConflict,
)
from governance_core.fields import Fields
from governance_core.idempotency import IdempotentRequest, resolve_key
from governance_core.ids import IdFactory
from governance_core.operations import default_registry
from governance_core.policies.detective import judge_and_keep
from governance_core.recording import Run
from governance_core.registry import Operation, Registry
from governance_core.repository import FirstReads, Tables
from governance_core.rules.cost import load_catalogue
from governance_core.storage import open_store
from governance_core.storage.protocol import (
    BatchedWrites,
    Filter,
    Store,
    TakesTurns,
)
from governance_core.storage.write_behind import WriteBehindStore

__all__ = ["WRITE_ATTEMPTS", "Bootstrap", "Governance", "Session"]

LAST_USED_RESOLUTION = timedelta(minutes=1)
WRITE_ATTEMPTS = 8
"""How many times a write operation runs before a :class:`WriteConflict` is let through."""
_BACKOFF_SECONDS = 0.002

_T = TypeVar("_T")


@attrs.frozen
class Bootstrap:
    """What :meth:`Governance.bootstrap` made; ``token`` is the only copy of the secret."""

    account_id: str
    admin_user_id: str
    environment_id: str
    risk_profile_id: str
    token: str
    token_id: str


class Governance:
    """The library's facade over one store.

    ``Governance.open(location)`` opens (or creates) the store at a path or URL;
    ``Governance(store, clock=..., ids=..., registry=...)`` injects every part, for tests
    and for other adapters. ``registry`` defaults to every operation of
    :mod:`governance_core.operations`.
    """

    def __init__(
        self,
        store: Store,
        *,
        clock: Clock = SystemClock,
        ids: IdFactory | None = None,
        config: Config | None = None,
        registry: Registry | None = None,
    ) -> None:
        self.store: Store = store
        self.tables = Tables(store)
        """Every table of :attr:`store`, by name."""
        # Operations work through it: a run rewritten by many spans of a bulk request is
        # written once, and a store reached over the network gets a transaction's writes
        # together.
        self._operations_store = WriteBehindStore(
            store, every_transaction=isinstance(store, BatchedWrites)
        )
        # Shared by every operation's context: its tables are made once, not once a call.
        self._operation_tables = Tables(self._operations_store)
        self.clock = clock
        self.ids = ids or IdFactory()
        self.config = config or Config()
        self.registry = registry if registry is not None else default_registry()
        self.caches = Caches()
        # By token hash and the store's change mark of tokens and accounts: the token as
        # authentication checks it.
        self._tokens: BoundedCache[tuple[str, Hashable], KnownToken] = BoundedCache()
        self._writing = threading.local()
        self._turns = store if isinstance(store, TakesTurns) else None
        # Where writers run side by side: how often this process's writes collided lately.
        self._contention = Contention() if self._turns is not None else None

    @classmethod
    def open(
        cls,
        location: str | Path,
        *,
        encryption_key: str | None = None,
        price_overrides: Mapping[str, Any] | str | Path | None = None,
        **parts: Any,
    ) -> Governance:
        """A facade over the store at ``location``: a path or URL (see ``open_store``).

        A file path, ``":memory:"`` or ``sqlite:///path`` is SQLite; ``postgresql://...`` is
        PostgreSQL (:func:`~governance_core.storage.open_store`).

        ``encryption_key`` (a Fernet key from :func:`governance_core.encryption.generate_key`,
        or several separated by commas, the first encrypting) encrypts sensitive values at
        rest; without one (and without a ``config`` naming a cipher) storing a sensitive value
        raises :class:`~governance_core.encryption.EncryptionKeyMissing`. ``price_overrides``
        (a mapping, or the path of a JSON file) is laid over the packaged price snapshot.
        Each is a shortcut for a :class:`Config` field (``cipher=cipher_from_key(key)``,
        ``pricing=load_catalogue(overrides)``) and refines a ``config`` given as well.
        """
        config: Config = parts.pop("config", None) or Config()
        if encryption_key is not None:
            config = attrs.evolve(config, cipher=cipher_from_key(encryption_key))
        if price_overrides is not None:
            config = attrs.evolve(config, pricing=load_catalogue(price_overrides))
        return cls(open_store(location), config=config, **parts)

    def close(self) -> None:
        """Close the store."""
        self.store.close()

    def __enter__(self) -> Governance:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # -- callers -------------------------------------------------------------------------
    def context(self, principal: Principal | None) -> Context:
        """A fresh operation context for ``principal``, stamped with the clock's now.

        Made inside :meth:`transaction` (or a batch operation), it shares that transaction's
        :class:`~governance_core.domain.batch.WriteBatch`.
        """

        def invoke(
            name: str, params: Mapping[str, Any], prepared: object = None
        ) -> dict[str, Any]:
            return self._run(
                self._operation(name), principal, params, resolve_key(params), prepared
            )

        return Context(
            self._operations_store, self.ids, self.config, principal, None, self.clock,
            self.registry, invoke, self.caches,
            # Inside a transaction that keeps its runs' rollups to its end, that one's.
            write_batch=getattr(self._writing, "batch", None),
            settings_mark=getattr(self._writing, "settings_mark", None),
            tables=self._operation_tables,
        )

    def _operation(self, name: str) -> Operation:
        try:
            return self.registry[name]
        except KeyError:
            raise NotFound(f"unknown operation {name!r}") from None

    def authenticate(self, token: str | None) -> Principal:
        """The caller a bearer token stands for, or ``not_authenticated``/``bad_authtoken``.

        A token that failed too often lately is refused ``temporarily_unavailable`` (rate
        limited) without being looked up (:mod:`governance_core.rate_limits`).
        """
        return self._authenticate(token)[0]

    def _authenticate(self, token: str | None) -> tuple[Principal, Hashable | None]:
        """:meth:`authenticate`, with the change mark of the settings it read (see ``_token``)."""
        if not token:
            raise NotAuthenticated()
        token_hash = hash_secret(token)
        attempts, key = self.caches.failed_attempts, ("token", token_hash)
        attempts.check(self.clock, key)
        try:
            if not token.startswith(TOKEN_PREFIX):
                raise BadAuthToken("the access token is malformed")
            known, mark = self._token(token_hash)
            now = self.clock()
            if known.status != "active":
                raise BadAuthToken(f"the access token is {known.status}")
            if known.expires_at is not None and known.expires_at <= now:
                raise BadAuthToken("the access token has expired")
        except BadAuthToken:
            attempts.fail(self.clock, key)
            raise
        last_used = known.last_used_at
        if last_used is None or now - last_used >= LAST_USED_RESOLUTION:
            token_id, admin_user_id = known.principal.token_id, known.principal.admin_user_id
            assert token_id is not None, "a token's caller always names the token"
            self._retrying(lambda: self._record_use(token_id, admin_user_id, now))
        return known.principal, mark

    def _token(self, token_hash: str) -> tuple[KnownToken, Hashable | None]:
        """The stored token with ``token_hash``, as a :class:`KnownToken`; else bad_authtoken.

        The token and its account are read again unless the store can tell that no token or
        account changed since they were last read
        (:class:`~governance_core.storage.protocol.ChangeMarks`): a suspended or revoked
        token stops working at once in every process. The same mark covers the risk profiles
        and policies (the settings a span write and a decision apply): it is returned, None
        where the store keeps no marks, for the call to look them up by (:meth:`call`).
        """
        def read() -> KnownToken:
            found = self.tables.api_tokens.query([Filter("token_hash", "eq", token_hash)])
            if not found:
                raise BadAuthToken()
            account = self.tables.accounts.get(found[0]["account_id"])
            if account is None:
                raise BadAuthToken()
            return KnownToken.of(found[0], account["partition"])

        tables = self.tables
        mark = tables.change_mark(
            tables.api_tokens, tables.accounts, tables.risk_profiles, tables.policies
        )
        if mark is None:
            return read(), None
        kept = self._tokens.get((token_hash, mark), read)
        assert kept is not None
        return kept, mark

    def _record_use(self, token_id: str, admin_user_id: str | None, now: datetime) -> None:
        """Stamp the token's ``last_used_at`` and its admin user's ``last_active_at``."""
        stamp = format_timestamp(now)
        with self.store.transaction():
            # Re-read inside the transaction: a suspend or profile update committed since the
            # token was looked up must not be overwritten by this stamp.
            token = self.tables.api_tokens.get(token_id)
            if token is not None:
                self.tables.api_tokens.put({**token, "last_used_at": stamp})
            admin = self.tables.admin_users.get(admin_user_id) if admin_user_id else None
            if admin is not None:
                self.tables.admin_users.put({**admin, "last_active_at": stamp})

    def session(self, token: str) -> Session:
        """Typed access as the holder of ``token``."""
        return Session(self, self.authenticate(token))

    def as_account(self, account_id: str, *, admin_user_id: str | None = None) -> Session:
        """Trusted in-process access to an account, without a token (for embedders)."""
        account = self.tables.accounts.get(account_id)
        if account is None:
            raise NotFound("account not found")
        principal = Principal(account_id, account["partition"], "account", None, admin_user_id)
        return Session(self, principal)

    # -- running operations --------------------------------------------------------------
    def call(
        self,
        operation: str,
        params: Mapping[str, Any] | None = None,
        *,
        token: str | None = None,
        principal: Principal | None = None,
        idempotency_keys: Iterable[str | None] = (),
        prepared: object = None,
    ) -> dict[str, Any]:
        """Run ``operation`` (a bulk ``_type`` name) and return its JSON-ready envelope.

        ``params`` holds the path, query and body members together (body bare or
        ``details``-wrapped). The caller is ``token``, or an already known ``principal``.
        ``idempotency_keys`` are further places a key was given (a header, a query).
        ``prepared`` is what :meth:`prepare` answered for these very ``params`` (for a call
        made inside :meth:`transaction`, which prepares nothing itself); without it a write
        called outside any transaction is prepared here, before its transaction opens.
        Failures raise a :class:`~governance_core.errors.GovernanceError`.
        """
        op = self._operation(operation)
        mark = None
        if principal is None and op.authenticated:
            principal, mark = self._authenticate(token)
        key = resolve_key(params, idempotency_keys) if op.idempotent else None
        writing = self._writing
        if getattr(writing, "calling", False):
            # A call made by an operation of another: the outer call's settings mark stands.
            return self._run(op, principal, params or {}, key, prepared)
        writing.calling = True
        inside = getattr(writing, "active", False)
        if inside:
            # Within Governance.transaction(): the mark it read as it began, unless a call in it
            # wrote a setting (a mark read inside an open transaction means nothing: a count
            # the transaction moved could come back if it rolled back).
            mark = getattr(writing, "settings_mark", None)
        elif mark is None and principal is not None and op.write and (
            op.batch or writes_run_records(op.name)
        ):
            # A known caller (a Session) read no mark. A write of a run's records applies the
            # settings, and their mark is one small read where a risk profile's and the
            # policies' versions would be two.
            tables = self.tables
            mark = tables.change_mark(tables.risk_profiles, tables.policies)
        writing.settings_mark = mark
        try:
            return self._run(op, principal, params or {}, key, prepared)
        finally:
            writing.calling = False
            if not inside:
                writing.settings_mark = None

    def prepare(
        self, operation: str, params: Mapping[str, Any], *, principal: Principal
    ) -> object:
        """The work ``operation`` can do on ``params`` before its transaction, or None.

        For a caller that runs the operation later inside :meth:`transaction` (where nothing
        is prepared): compute this first, outside it, and pass it to :meth:`call` as
        ``prepared`` with the same ``params``. It reads without a transaction, writes
        nothing, and never raises for bad parameters (the call reports them); the operation
        re-checks that what it was computed from is still current before using it.
        """
        op = self._operation(operation)
        if principal.scope not in op.scopes:
            return None
        return self._prepare(op, principal, params)

    def _prepare(
        self, op: Operation, principal: Principal | None, params: Mapping[str, Any]
    ) -> object:
        if op.prepare is None or (
            op.prepares_reads and not self._operations_store.reads_together
        ):
            return None
        try:
            return op.prepare(self.context(principal), Fields(params))
        except GovernanceError:
            # The handler reads the same parameters and names what is wrong with them.
            return None

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One transaction around several calls: each call's writes are a savepoint of it.

        A call inside it is never re-run alone after a
        :class:`~governance_core.errors.WriteConflict` (the conflict spoilt the whole
        transaction): the conflict leaves the block, for its caller to run it again or answer
        ``temporarily_unavailable``. The calls in it apply the risk profiles and policies as
        they stood when it began (the store's change mark is read once, before it opens),
        until one of them changes a setting.
        """
        writing = self._writing
        outer = getattr(writing, "active", False)
        owns_mark = not outer and not getattr(writing, "calling", False)
        if owns_mark:
            # Read before the transaction opens: the calls in it apply the risk profiles and
            # policies as they stood then (under this mark), as a single call does.
            tables = self.tables
            writing.settings_mark = tables.change_mark(tables.risk_profiles, tables.policies)
        writing.active = True
        try:
            with self._batch(defers=True) as owned, self._operations_store.batch():
                yield
                if owned is not None:
                    owned.keep()
        finally:
            writing.active = outer
            if owns_mark:
                writing.settings_mark = None

    def turn(self, name: str) -> AbstractContextManager[None]:
        """Hold the store's turn ``name`` around the transaction the block opens.

        Transactions under one turn run one at a time, in every process on the store
        (:class:`~governance_core.storage.protocol.TakesTurns`); on a store without turns
        (SQLite, whose writers take turns anyway; memory) the block runs as it is.
        """
        return nullcontext() if self._turns is None else self._turns.turn(name)

    @contextmanager
    def _batch(self, *, defers: bool) -> Iterator[WriteBatch | None]:
        """A new :class:`WriteBatch` for an outermost transaction (None inside another).

        Its span writes are judged by the policies in observe and enforce mode as they are
        recorded (detective mode: :func:`~governance_core.policies.detective.judge_and_keep`),
        unless ``config.judge_recorded_spans`` is off. The caller keeps it before committing.
        """
        if getattr(self._writing, "batch", None) is not None:
            yield None
            return
        judge = judge_and_keep if self.config.judge_recorded_spans else None
        self._writing.batch = WriteBatch(defers=defers, judge=judge)
        try:
            yield self._writing.batch
        finally:
            self._writing.batch = None

    def _retrying(self, write: Callable[[], _T]) -> _T:
        """Run ``write``, again after a short jittered pause each time it raises WriteConflict.

        A conflict rolled the whole transaction back, so running it again is safe; it runs
        again alone (:meth:`~governance_core.storage.protocol.TakesTurns.alone`: no other
        transaction beside it, on a store whose writers run side by side). After
        :data:`WRITE_ATTEMPTS` runs it is raised (``temporarily_unavailable``). A write nested
        in another (a bulk item) is not re-run by itself: its transaction is the outer one's,
        which is re-run whole.
        """
        if getattr(self._writing, "active", False):
            return write()
        self._writing.active = True
        # Where writers run side by side: while most writes collide, the first run goes alone
        # too (contention.py); the outcome of a first run side by side is counted.
        counted = self._contention
        alone_first = counted is not None and counted.runs_alone(time.monotonic())
        try:
            for attempt in range(1, WRITE_ATTEMPTS):
                first_side_by_side = attempt == 1 and not alone_first
                try:
                    with nullcontext() if first_side_by_side else self._alone():
                        result = write()
                except WriteConflict:
                    # What it collided with may have changed a setting: looked up again.
                    self._writing.settings_mark = None
                    if first_side_by_side and counted is not None:
                        counted.record(True, time.monotonic())
                    time.sleep(random.uniform(0, _BACKOFF_SECONDS * 2**attempt))
                else:
                    if first_side_by_side and counted is not None:
                        counted.record(False, time.monotonic())
                    return result
            with self._alone():
                return write()
        finally:
            self._writing.active = False

    def _alone(self) -> AbstractContextManager[None]:
        # Where writers run side by side (PostgreSQL), a write that collided runs again alone:
        # re-run beside the same writers it would mostly collide again.
        return nullcontext() if self._turns is None else self._turns.alone()

    def _run(
        self,
        op: Operation,
        principal: Principal | None,
        params: Mapping[str, Any],
        key: str | None,
        prepared: object = None,
    ) -> dict[str, Any]:
        if principal is not None and principal.scope not in op.scopes:
            raise NotPermitted(f"a {principal.scope} token may not call {op.name}")
        batch: WriteBatch | None = getattr(self._writing, "batch", None)
        keeps = op.batch or keeps_settings(op.name, write=op.write)
        if not keeps:
            # It may change a ruleset or a policy: the settings mark read before it is stale,
            # for the rest of the call and of the transaction around it.
            self._writing.settings_mark = None
        if batch is not None and not op.defers_rollups:
            # It may read or change what the rollups are made of: they are kept first.
            batch.keep(keep_rulesets=keeps)
        if not op.write:
            return op.handler(self.context(principal), Fields(params))
        if prepared is None and not getattr(self._writing, "active", False):
            # Before the transaction, and once: a write run again after a conflict uses it
            # too (the handler re-checks what it was computed from).
            prepared = self._prepare(op, principal, params)
        return self._retrying(lambda: self._write(op, principal, params, key, prepared))

    def _write(
        self,
        op: Operation,
        principal: Principal | None,
        params: Mapping[str, Any],
        key: str | None,
        prepared: object = None,
    ) -> dict[str, Any]:
        """Run a write operation in one transaction, replaying a known idempotency key."""
        store = self._operations_store
        # A batch keeps its runs' rollups once, at its end; a single span write, as it goes
        # (its batch only has the spans it records judged at its end).
        batching = op.batch or op.defers_rollups
        with self._batch(defers=op.batch) if batching else nullcontext() as owned:
            ctx = self.context(principal)
            ctx.prepared = prepared
            with store.batch() if op.batch else store.transaction():
                response = self._respond(op, ctx, params, key)
                if owned is not None:
                    owned.keep()
                return response

    def _respond(
        self, op: Operation, ctx: Context, params: Mapping[str, Any], key: str | None
    ) -> dict[str, Any]:
        """Run ``op``'s handler, or replay the response stored under its idempotency key.

        What the write will read first (its idempotency record, and what its preparation
        names: a span write's run and agent, a decision's run, its agent's cost of the day and
        the run's last allowed tool call) is read together, where the store reads several in
        one round trip.
        """
        principal = ctx.principal
        request = (
            None if key is None or principal is None or not op.idempotent
            else IdempotentRequest(principal.account_id, op.name, key, params)
        )
        first = ctx.prepared.reads if isinstance(ctx.prepared, PreparedChecks) else ctx.prepared
        if isinstance(first, FirstReads) and (first.records or first.queries):
            self._operations_store.read_ahead_records(
                first.records if request is None
                else [(ctx.tables.idempotency_keys.name, request.record_id), *first.records],
                first.queries,
            )
        if request is None:
            return op.handler(ctx, Fields(params))
        replay = request.replay(ctx)
        if replay is not None:
            return replay
        response = op.handler(ctx, Fields(params))
        request.remember(ctx, response)
        return response

    def accept_invite(self, token: str, *, name: str | None = None) -> Issued:
        """Accept an admin user invite; its token is the credential, no session is needed.

        Answers the new admin user and an account token belonging to them, shown this once.
        """
        envelope = self.call("admin_user_invites/accept", {"token": token, "name": name})
        return Issued(details=envelope["details"], token=envelope["token"])

    # -- set-up --------------------------------------------------------------------------
    def bootstrap(
        self,
        *,
        account_name: str = "Default account",
        admin_email: str = "admin@example.com",
        admin_name: str | None = None,
    ) -> Bootstrap:
        """Create an account and everything it starts with, in one transaction.

        That is its admin user, a default environment, a default risk profile and an account
        token belonging to that admin user; the token's secret is returned once, here.
        """
        from governance_core.operations.accounts import create_account

        def create() -> dict[str, Any]:
            with self._operations_store.transaction():
                return create_account(
                    self.context(None),
                    account_name=account_name,
                    admin_email=admin_email,
                    admin_name=admin_name,
                )

        return Bootstrap(**self._retrying(create))


class Session(AccountOperations):
    """Access to one account as one caller, for embedders: ``call`` plus typed helpers."""

    def __init__(self, governance: Governance, principal: Principal) -> None:
        self.governance = governance
        self.principal = principal

    @property
    def account_id(self) -> str:
        """The account this session acts in."""
        return self.principal.account_id

    def call(
        self, operation: str, params: Mapping[str, Any] | None = None, **members: Any
    ) -> dict[str, Any]:
        """Run ``operation`` with ``params`` and keyword members; its envelope."""
        merged = {**(params or {}), **members}
        return self.governance.call(operation, merged, principal=self.principal)

    def details(
        self, operation: str, params: Mapping[str, Any] | None = None, **members: Any
    ) -> dict[str, Any]:
        """Run an operation that answers one resource, and return that resource."""
        result: dict[str, Any] = self.call(operation, params, **members)["details"]
        return result

    def decide(
        self,
        agent_instance_id: str,
        kind: str,
        name: str,
        args: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """Ask whether run ``agent_instance_id`` may take an action now; the Decision.

        ``kind`` is ``tool_call``, ``model_call`` or ``span``; a deny is an outcome, never an
        exception (see :func:`governance_core.policies.decide` for ``options``).
        """
        return policies.decide(self, agent_instance_id, kind, name, args, **options)

    def guard(
        self,
        agent_instance_id: str,
        kind: str,
        name: str,
        args: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> dict[str, Any]:
        """The allowing Decision, after waiting for a person's approval where one is needed.

        Raises :class:`~governance_core.policies.ActionDenied` for a deny, a rejection or an
        expiry, and :class:`~governance_core.policies.ApprovalTimedOut` when nobody resolved
        the approval in time (see :func:`governance_core.policies.guard` for ``options``).
        """
        return policies.guard(self, agent_instance_id, kind, name, args, **options)

    def run(
        self,
        *,
        agent_version: str | Mapping[str, Any],
        agent_id: str | None = None,
        environment_id: str | None = None,
        schema: Mapping[str, Any] | None = None,
        purpose: str = "live",
        external_identifier: str | None = None,
    ) -> Run:
        """Return a run to record in a ``with`` block (see :mod:`governance_core.recording`).

        It is registered and started on entering the block and finished on leaving it.
        """
        return Run(
            self, agent_version=agent_version, agent_id=agent_id, environment_id=environment_id,
            schema=schema, purpose=purpose, external_identifier=external_identifier,
        )
