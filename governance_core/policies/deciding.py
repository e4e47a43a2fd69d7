"""Deciding an action: the run's request, the account's policies, the outcome, the approval.

Everything here runs in the caller's write transaction (``decisions/decide``). The request a
policy sees is built from the run's stored aggregates, never from its spans: cost and tokens
from its token groups and kept ``total_cost``, risk from its per-type span counts, counts
from ``span_counts``, ``tool_calls`` from the number of the run's last allowed tool call (one
indexed read, however many there were), and the agent's cost today by one read by key of
the day cost the store keeps for its runs started today (UTC), however many there were.

The account's policies are read again only when they changed: one grouped read (their
number and the sum of their versions; a version only grows and policies are never
deleted) tells, in every process on the same database, whether the compiled set kept for
the account is current.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

import attrs

from governance_core.caches import Caches
from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.context import Context
from governance_core.domain.alerts import find_alert, raise_alert
from governance_core.domain.risk import Rulesets, instance_risk_score, span_type_data_risks
from governance_core.domain.runs import run_hint, run_schema_version
from governance_core.errors import NotImplementedOperation
from governance_core.policies.engine import (
    CompiledSet,
    CompiledSource,
    Evaluation,
    attributes_read,
    cedar_value,
    compile_source,
    engine_available,
    require_engine,
)
from governance_core.policies.schema import KIND_ACTIONS, RESOURCE_TYPES, UNKNOWN
from governance_core.repository import (
    Filter,
    FirstReads,
    Query,
    Record,
    SortKey,
    day_cost,
    tenant_filter,
)
from governance_core.rules.risk import Ruleset, parse_ruleset, score_run
from governance_core.storage.schema import day_cost_id

__all__ = [
    "ALLOWED",
    "DEFAULT_APPROVAL_TTL",
    "POLICY_DENIED",
    "Action",
    "ActivePolicies",
    "Scope",
    "Verdict",
    "action_digest",
    "active_policies",
    "approval_status",
    "compile_policies",
    "decide_action",
    "decision_reads",
    "decision_record",
    "judge",
    "last_tool_call_query",
    "micro_usd",
    "policy_context",
    "policy_request",
    "principal_entity",
    "raise_policy_denied",
    "resource_attributes",
    "resource_entity",
    "run_request",
    "run_tool_calls",
    "verdict_of",
]

POLICY_DENIED = "policy_denied"
"""The alert raised on a run the first time an enforce-mode policy denies it an action."""

DEFAULT_APPROVAL_TTL = timedelta(hours=1)
"""How long an approval waits for a person before it expires (and counts as rejected)."""

_MICRO = Decimal(1_000_000)
_LIVE_MODES = ("enforce", "observe")


@attrs.frozen
class Action:
    """What a run asks to do: a kind, a name, its arguments and the span type it records."""

    kind: str
    name: str
    args: Mapping[str, Any] = attrs.field(factory=dict)
    span_type: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The action as stored and shown."""
        return {
            "kind": self.kind, "name": self.name, "args": dict(self.args),
            "span_type": self.span_type,
        }


def action_digest(run_id: str, action: Action) -> str:
    """The digest an approval binds: the run, kind, name and arguments (canonical JSON)."""
    text = json.dumps(
        [run_id, action.kind, action.name, action.args],
        sort_keys=True, separators=(",", ":"), ensure_ascii=False,
    )
    return hashlib.sha256(text.encode()).hexdigest()


@attrs.frozen
class Scope:
    """The policies that hold one run in their scope, by id, and whether any only observes."""

    records: Mapping[str, Record]
    observing: bool


@attrs.frozen
class ActivePolicies:
    """An account's enforce and observe policies, compiled into one set."""

    records: Mapping[str, Record]
    sources: Mapping[str, CompiledSource]
    compiled: CompiledSet | None
    needs: frozenset[str]
    """Every attribute name the policies read: a figure none reads is not computed."""
    _scopes: dict[tuple[str, str], Scope] = attrs.field(
        factory=dict, init=False, eq=False, repr=False
    )

    def reads(self, *names: str) -> bool:
        """Whether any policy reads any of the attributes ``names``."""
        return not self.needs.isdisjoint(names)

    def in_scope(self, instance: Record) -> Scope:
        """The policies whose scope holds the run (an empty list in a scope means all).

        Kept per environment and agent, which are all a scope names.
        """
        key = (instance["environment_id"], instance["agent_id"])
        found = self._scopes.get(key)
        if found is None:
            records = {}
            for policy_id, record in self.records.items():
                scope = record.get("scope") or {}
                environments, agents = scope.get("environment_ids"), scope.get("agent_ids")
                if environments and key[0] not in environments:
                    continue
                if agents and key[1] not in agents:
                    continue
                records[policy_id] = record
            observing = any(record["mode"] == "observe" for record in records.values())
            found = Scope(records, observing)
            if len(self._scopes) >= _KEPT_SCOPES:
                self._scopes.clear()
            self._scopes[key] = found
        return found


_KEPT_SCOPES = 4096
_NONE = ActivePolicies({}, {}, None, frozenset())
_RISK = ("risk_score", "risk_level", "peak_classification", "data_categories")
_DECLARED = ("categories", "actions", "classification")


class _Kept:
    """What one Governance keeps: each account's compiled policies, by their version stamp."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.by_account: dict[str, tuple[tuple[int, int | float | None], ActivePolicies]] = {}


_KEPT: weakref.WeakKeyDictionary[Caches, _Kept] = weakref.WeakKeyDictionary()
_KEPT_LOCK = threading.Lock()


def _kept(caches: Caches) -> _Kept:
    with _KEPT_LOCK:
        kept = _KEPT.get(caches)
        if kept is None:
            kept = _KEPT[caches] = _Kept()
        return kept


def active_policies(ctx: Context) -> ActivePolicies:
    """The caller's account's live policies, compiled once per change of any of them.

    Not even their versions are read again while the call's settings mark
    (:attr:`~governance_core.context.Context.settings_mark`) stays the one they were read
    under.
    """
    mark = ctx.settings_mark
    if mark is None:
        return _read_active_policies(ctx)
    found = ctx.caches.marked_policies.get(
        (ctx.account_id, mark), lambda: _read_active_policies(ctx)
    )
    assert found is not None
    return found


def _read_active_policies(ctx: Context) -> ActivePolicies:
    account = ctx.account_id
    rows = ctx.tables.policies.aggregate(sums=["version"], filters=[tenant_filter(account)])
    stamp = (rows[0].count, rows[0].sums[0]) if rows else (0, 0)
    if stamp[0] == 0:
        return _NONE
    kept = _kept(ctx.caches)
    found = kept.by_account.get(account)
    if found is not None and found[0] == stamp:
        return found[1]
    records = {
        record["id"]: record
        for record in ctx.tables.policies.query(
            [tenant_filter(account), Filter("mode", "in", list(_LIVE_MODES))],
            sort=[SortKey("id")],
        )
    }
    if records and not engine_available():
        raise NotImplementedOperation(
            "this account has policies and the Cedar engine is not installed here: install"
            " the 'policies' extra (pip install 'governance[policies]') to decide"
        )
    active = compile_policies(records)
    with kept.lock:
        if len(kept.by_account) >= 1024:
            kept.by_account.clear()
        kept.by_account[account] = (stamp, active)
    return active


def compile_policies(records: Mapping[str, Record]) -> ActivePolicies:
    """Policy records (by id, each of a live mode) compiled into one set; none: no set."""
    if not records:
        return _NONE
    require_engine()
    sources = {policy_id: compile_source(r["source"]) for policy_id, r in records.items()}
    needs = attributes_read([s.est for c in sources.values() for s in c.statements])
    return ActivePolicies(records, sources, CompiledSet(sources), needs)


def micro_usd(amount: float | int | Decimal | None) -> int:
    """An amount of US dollars in whole millionths (none: 0), as ``cost_micro_usd`` holds it."""
    if amount is None:
        return 0
    exact = amount if isinstance(amount, Decimal) else Decimal(str(amount))
    return int((exact * _MICRO).to_integral_value())


def resource_attributes(data_risk: Mapping[str, Any] | None) -> dict[str, Any]:
    """The resource's attributes from its span type's ``data_risk`` (None: declares nothing)."""
    if data_risk is None:
        return {"categories": [], "actions": [], "classification": UNKNOWN}
    scored = score_run({"_": 1}, {"_": data_risk}, _neutral_ruleset())
    return {
        "categories": scored["all_data_categories"],
        "actions": scored["allowed_actions"],
        "classification": scored["peak_classification"] or UNKNOWN,
    }


@functools.cache
def _neutral_ruleset() -> Ruleset:
    """A ruleset for reading a type's declarations alone (its scores are not used)."""
    return parse_ruleset({
        "category_weights": {}, "action_multipliers": {},
        "thresholds": {"medium": 1, "high": 2, "critical": 3},
    })


def _elapsed_ms(instance: Record, now: datetime) -> int:
    started = instance.get("started_at") or instance.get("inserted_at")
    if not started:
        return 0
    return max(0, int((now - parse_timestamp(started)).total_seconds() * 1000))


def run_request(
    ctx: Context,
    instance: Record,
    action: Action,
    active: ActivePolicies,
    needs: frozenset[str] | None = None,
    tool_calls: int | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The request a policy sees for ``action`` by the run ``instance``, and its entities.

    ``needs`` names the attributes the policies to be evaluated read (all of ``active``'s
    unless said): a figure none of them reads is neither computed nor sent (the decision
    keeps the outcome and reasons, not the request). ``tool_calls`` is the run's
    (:func:`run_tool_calls`) when the caller has read it already.
    """
    wanted = active.needs if needs is None else needs

    def reads(*names: str) -> bool:
        return not wanted.isdisjoint(names)

    agent: Record = {}
    if reads("external_identifier", *_RISK):
        agent = ctx.tables.agents.get(instance["agent_id"]) or {}
    span_type = action.name if action.kind == "span" else action.span_type
    declares = span_type is not None and reads(*_DECLARED)
    schema_version = run_schema_version(ctx, instance) if declares or reads(*_RISK) else None
    risk: Mapping[str, Any] = {}
    if reads(*_RISK):
        ruleset = Rulesets(ctx).for_agent(instance["agent_id"], agent)
        risk = instance_risk_score(instance, schema_version, ruleset) or {}
    groups = instance.get("token_groups") or []
    counts = instance.get("span_counts") or {}
    if not reads("tool_calls"):
        tool_calls = 0
    elif tool_calls is None:
        tool_calls = run_tool_calls(ctx, instance["id"])
    cost_today = 0
    if reads("cost_today_micro_usd"):
        cost_today = micro_usd(day_cost(ctx.tables, instance["agent_id"], _today(ctx)))
    figures: dict[str, Callable[[], Any]] = {
        "cost_micro_usd": lambda: micro_usd(instance.get("total_cost")),
        "input_tokens": lambda: sum(
            int(g.get("input") or 0) + int(g.get("cache_read") or 0) for g in groups
        ),
        "output_tokens": lambda: sum(int(g.get("output") or 0) for g in groups),
        "risk_score": lambda: int(Decimal(str(risk.get("total_score") or 0))),
        "risk_level": lambda: risk.get("risk_level") or UNKNOWN,
        "peak_classification": lambda: risk.get("peak_classification") or UNKNOWN,
        "data_categories": lambda: list(risk.get("all_data_categories") or []),
        "span_count": lambda: int(counts.get("total") or 0),
        "tool_calls": lambda: tool_calls,
        "elapsed_ms": lambda: _elapsed_ms(instance, ctx.now),
    }
    # As in detective mode, ``context.run`` holds only the figures some policy names.
    run = {name: figure() for name, figure in figures.items() if name in wanted}
    declared = resource_attributes(
        span_type_data_risks(schema_version).get(span_type) if declares and span_type else None
    )
    return policy_request(instance, agent, action, run, cost_today, declared, wanted)


def policy_request(
    instance: Record,
    agent: Mapping[str, Any],
    action: Action,
    run: Mapping[str, Any],
    cost_today: int,
    declared: Mapping[str, Any],
    needs: Collection[str] | None = None,
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Cedar request of ``action`` by the run ``instance`` of ``agent``, and its entities.

    ``run`` holds ``context.run``, ``cost_today`` the agent's cost today (micro-dollars),
    ``declared`` the resource's attributes (:func:`resource_attributes`) and ``needs`` what
    the policies read (:func:`policy_context`).
    """
    principal = principal_entity(instance, agent)
    resource = resource_entity(action, declared)
    request = {
        "principal": principal["uid"],
        "action": {"type": "Action", "id": KIND_ACTIONS[action.kind]},
        "resource": resource["uid"],
        "context": policy_context(action, run, cost_today, needs),
    }
    return request, [principal, resource]


def principal_entity(instance: Record, agent: Mapping[str, Any]) -> dict[str, Any]:
    """The request's principal, ``Agent::"<agent_id>"``, with its attributes."""
    return {"uid": {"type": "Agent", "id": instance["agent_id"]}, "parents": [], "attrs": {
        "environment_id": instance["environment_id"],
        "external_identifier": agent.get("external_identifier") or "",
        "deployment_id": instance.get("agent_deployment_id") or "",
    }}


def resource_entity(action: Action, declared: Mapping[str, Any]) -> dict[str, Any]:
    """The request's resource (``Tool``, ``Model`` or ``SpanType``) with ``declared``."""
    return {
        "uid": {"type": RESOURCE_TYPES[action.kind], "id": action.name}, "parents": [],
        "attrs": dict(declared),
    }


def policy_context(
    action: Action,
    run: Mapping[str, Any],
    cost_today: int,
    needs: Collection[str] | None = None,
) -> dict[str, Any]:
    """The request's ``context``: ``args``, ``run`` and ``agent``.

    With ``needs`` (every attribute name the policies read), a member no policy names is
    left out: a policy cannot tell (each name it reads is in ``needs``), and the engine
    reads less. A record named whole keeps all its members.
    """
    agent = {"cost_today_micro_usd": cost_today}
    if needs is None:
        return {"args": cedar_value(dict(action.args)), "run": dict(run), "agent": agent}
    # The arguments are converted only when read: they are the largest member.
    kept: dict[str, Any] = {"args": cedar_value(dict(action.args))} if "args" in needs else {}
    for name, record in (("run", run), ("agent", agent)):
        if name in needs:
            kept[name] = dict(record)
            continue
        members = {key: item for key, item in record.items() if key in needs}
        if members:
            kept[name] = members
    return kept


@attrs.frozen
class Verdict:
    """What the policies said: the outcome, what observe mode would add, warnings, reasons.

    ``errors`` counts the matching statements that failed to evaluate (fail closed).
    """

    outcome: str
    observed_outcome: str | None
    warnings: tuple[str, ...]
    reasons: tuple[dict[str, Any], ...]
    errors: int = 0


ALLOWED = Verdict("allow", None, (), ())
"""The verdict where no policy has anything to say."""


def _strongest(kinds: Sequence[str]) -> str:
    if "deny" in kinds:
        return "deny"
    if "approval" in kinds:
        return "pending_approval"
    return "allow"


def run_tool_calls(ctx: Context, run_id: str) -> int:
    """How many tool calls the service allowed the run so far: one indexed read.

    Each allowed call is stored numbered (``tool_call_number``; a store opened from before
    calls were numbered has its stored ones numbered as it opens), so the run's last one says
    how many there were, however many: the read (:func:`last_tool_call_query`) finds it at
    the end of its index range.
    """
    query = last_tool_call_query(run_id)
    last = ctx.tables.decisions.query(query.filters, query.sort, query.offset, query.limit)
    return int(last[0]["tool_call_number"]) if last else 0


def last_tool_call_query(run_id: str) -> Query:
    """The query of the run ``run_id``'s last allowed tool call (:func:`run_tool_calls`)."""
    return Query("decisions", (
        Filter("agent_instance_id", "eq", run_id),
        Filter("action_kind", "eq", "tool_call"),
        Filter("outcome", "eq", "allow"),
        Filter("tool_call_number", "ge", 1),
    ), (SortKey("tool_call_number", descending=True),), limit=1)


def decision_reads(ctx: Context, run_id: str, action_kind: str) -> FirstReads | None:
    """What a decision of an ``action_kind`` action by the run ``run_id`` reads first.

    The run; its agent's cost of the day (the agent known from
    :func:`~governance_core.domain.runs.run_hint`); for a tool call, the run's last allowed
    one. None when the run is not the caller's. For the store to read them together as the
    decision's transaction opens: each is read whether the policies in scope need it or
    not, since knowing which they need takes reading the run first.
    """
    hint = run_hint(ctx, run_id)
    if hint is None:
        return None
    tables = ctx.tables
    day = day_cost_id(hint[2], _today(ctx))
    return FirstReads(
        ((tables.agent_instances.name, run_id), (tables.agent_day_costs.name, day)),
        (last_tool_call_query(run_id),) if action_kind == "tool_call" else (),
    )


def _today(ctx: Context) -> str:
    """The UTC day of ``ctx``'s now (``YYYY-MM-DD``): the day a daily budget sums."""
    return format_timestamp(ctx.now)[:10]


def judge(
    ctx: Context,
    instance: Record,
    action: Action,
    active: ActivePolicies,
    tool_calls: int | None = None,
) -> Verdict:
    """Evaluate ``action`` against the policies in the run's scope and combine them.

    Deny wins over pending approval, which wins over allow; a forbid with ``@warn`` adds a
    warning and never blocks; observe-mode policies change only ``observed_outcome``.
    ``tool_calls`` is the run's, when the caller has read it.
    """
    scope = active.in_scope(instance)
    compiled = active.compiled
    if not scope.records or compiled is None:
        return ALLOWED
    kind = action.kind
    needs = compiled.needs_of(
        ("Agent", instance["agent_id"]), ("Action", KIND_ACTIONS[kind]),
        (RESOURCE_TYPES[kind], action.name),
    )
    if needs is None:
        # No statement can hold the request: it matches nothing, so nothing need be read.
        return verdict_of(active, scope, Evaluation((), {}))
    request, entities = run_request(ctx, instance, action, active, needs, tool_calls)
    return verdict_of(active, scope, compiled.evaluate(request, entities))


def verdict_of(active: ActivePolicies, scope: Scope, evaluation: Evaluation) -> Verdict:
    """Combine what one evaluation matched into a verdict of the policies of ``scope``.

    Statements of other policies of ``active`` are passed over.
    """
    scoped = scope.records
    if not evaluation.matched and not evaluation.errors:
        return Verdict("allow", "allow" if scope.observing else None, (), ())
    hits = list(dict.fromkeys([*evaluation.matched, *evaluation.errors]))
    enforced: list[str] = []
    observed: list[str] = []
    warnings: list[str] = []
    reasons: list[dict[str, Any]] = []
    for policy_id, index in hits:
        record = scoped.get(policy_id)
        if record is None:
            continue
        statement = active.sources[policy_id].statements[index]
        error = evaluation.errors.get((policy_id, index))
        if statement.warning is not None:
            warnings.append(statement.warning or f"policy {record['name']!r} warns")
            continue
        kind = "approval" if statement.approval is not None else "deny"
        message = (
            statement.approval or statement.reason or f"forbidden by policy {record['name']!r}"
        )
        if error is not None:
            message += f" (the policy could not be evaluated, which blocks: {error})"
        (enforced if record["mode"] == "enforce" else observed).append(kind)
        reasons.append({
            "policy_id": policy_id, "policy_version": record["version"], "message": message,
            "mode": record["mode"], "effect": kind,
        })
    failed = sum(1 for key in evaluation.errors if key[0] in scoped)
    return Verdict(
        _strongest(enforced),
        _strongest(enforced + observed) if scope.observing else None,
        tuple(warnings), tuple(reasons), failed,
    )


def approval_status(record: Record, now: datetime) -> str:
    """An approval's status as read now: a pending one past ``expires_at`` is ``expired``."""
    status: str = record["status"]
    if status == "pending" and parse_timestamp(record["expires_at"]) <= now:
        return "expired"
    return status


def _consume(ctx: Context, instance: Record, digest: str, decision_id: str) -> Record | None:
    """Take the run's approved, unused approval of this action, once; None when there is none.

    The read and the write are in the decision's transaction: on SQLite the writer lock, on
    PostgreSQL a serializable transaction (two that take the same approval cannot both
    commit; the loser runs again and finds it used) make the use happen once.
    """
    for record in ctx.tables.approvals.query([
        Filter("agent_instance_id", "eq", instance["id"]),
        Filter("digest", "eq", digest),
        Filter("status", "eq", "approved"),
    ], sort=[SortKey("id")]):
        if record.get("consumed_at") is None:
            used = {
                **record, "consumed_at": format_timestamp(ctx.now),
                "consumed_by_decision_id": decision_id, "updated_at": format_timestamp(ctx.now),
            }
            ctx.tables.approvals.put(used)
            return used
    return None


def _pending(ctx: Context, instance: Record, digest: str) -> Record | None:
    for record in ctx.tables.approvals.query([
        Filter("agent_instance_id", "eq", instance["id"]),
        Filter("digest", "eq", digest),
        Filter("status", "eq", "pending"),
    ], sort=[SortKey("id")]):
        if approval_status(record, ctx.now) == "pending":
            return record
    return None


def decide_action(
    ctx: Context, instance: Record, action: Action, *, approval_ttl: timedelta | None = None
) -> Record:
    """Decide ``action`` for the run ``instance``, store the decision and answer its record.

    A pending approval outcome uses an approved approval of the same action once (then the
    outcome is ``allow``), else joins the action's pending approval, else opens one that
    expires after ``approval_ttl``. The first enforce-mode deny of a run raises
    :data:`POLICY_DENIED` on it.
    """
    active = active_policies(ctx)
    # A tool call allowed is numbered after the run's others: read whatever the policies say.
    tool_calls = run_tool_calls(ctx, instance["id"]) if action.kind == "tool_call" else None
    verdict = judge(ctx, instance, action, active, tool_calls)
    decision_id = ctx.new_id()
    outcome, approval_id = verdict.outcome, None
    reasons = [dict(reason) for reason in verdict.reasons]
    if outcome == "pending_approval":
        digest = action_digest(instance["id"], action)
        used = _consume(ctx, instance, digest, decision_id)
        if used is not None:
            outcome = "allow"
            reasons = [
                {**reason, "approval_id": used["id"]} if reason["effect"] == "approval"
                else reason
                for reason in reasons
            ]
        else:
            pending = _pending(ctx, instance, digest)
            if pending is None:
                pending = _open_approval(
                    ctx, instance, action, digest, decision_id, reasons,
                    approval_ttl or DEFAULT_APPROVAL_TTL,
                )
            approval_id = pending["id"]
    decision = decision_record(
        ctx, instance, action, decision_id=decision_id, outcome=outcome,
        observed_outcome=verdict.observed_outcome, warnings=verdict.warnings, reasons=reasons,
        approval_id=approval_id,
        tool_call_number=None if tool_calls is None or outcome != "allow" else tool_calls + 1,
    )
    ctx.tables.decisions.put(decision)
    if outcome == "deny" and find_alert(ctx, instance["id"], POLICY_DENIED) is None:
        raise_policy_denied(ctx, instance, decision)
    return decision


def decision_record(
    ctx: Context,
    instance: Record,
    action: Action,
    *,
    decision_id: str,
    outcome: str,
    observed_outcome: str | None,
    warnings: Sequence[str],
    reasons: Sequence[Mapping[str, Any]],
    approval_id: str | None = None,
    action_kind: str | None = None,
    agent_span_id: str | None = None,
    tool_call_number: int | None = None,
) -> Record:
    """The record a decision of ``action`` for the run ``instance`` is stored as, decided now.

    ``action_kind`` is the stored kind the run's ``tool_calls`` count reads (the action's
    own kind unless said); ``agent_span_id`` names the recorded span a decision judged;
    ``tool_call_number`` numbers an allowed tool call among its run's (:func:`run_tool_calls`).
    """
    now = format_timestamp(ctx.now)
    return {
        "id": decision_id, "account_id": instance["account_id"],
        "agent_instance_id": instance["id"], "agent_id": instance["agent_id"],
        "environment_id": instance["environment_id"], "action": action.to_json(),
        "action_kind": action_kind or action.kind, "outcome": outcome,
        "observed_outcome": observed_outcome, "warnings": list(warnings),
        "reasons": [dict(reason) for reason in reasons], "approval_id": approval_id,
        "agent_span_id": agent_span_id, "decided_at": now, "inserted_at": now,
        "tool_call_number": tool_call_number,
    }


def raise_policy_denied(ctx: Context, instance: Record, decision: Record) -> Record:
    """Raise :data:`POLICY_DENIED` on the run for the denying ``decision``; the run as stored.

    The caller checks it is the run's first (``find_alert``); the alert names the decision,
    its action and the enforce-mode policies that denied it.
    """
    action = decision["action"]
    return raise_alert(ctx, instance, POLICY_DENIED, "error", {
        "decision_id": decision["id"], "action_kind": action["kind"],
        "action_name": action["name"],
        "policy_ids": sorted({
            r["policy_id"] for r in decision["reasons"] if r["mode"] == "enforce"
        }),
    }).instance


def _open_approval(
    ctx: Context,
    instance: Record,
    action: Action,
    digest: str,
    decision_id: str,
    reasons: list[dict[str, Any]],
    ttl: timedelta,
) -> Record:
    now = format_timestamp(ctx.now)
    record = {
        "id": ctx.new_id(), "account_id": instance["account_id"],
        "agent_instance_id": instance["id"], "agent_id": instance["agent_id"],
        "environment_id": instance["environment_id"], "decision_id": decision_id,
        "action": action.to_json(), "digest": digest, "status": "pending",
        "expires_at": format_timestamp(ctx.now + ttl), "inserted_at": now, "updated_at": now,
        "reasons": [r for r in reasons if r["effect"] == "approval"],
        "resolved_at": None, "resolved_by": None, "resolution_reason": None,
        "consumed_at": None, "consumed_by_decision_id": None,
    }
    ctx.tables.approvals.put(record)
    return record
