"""Policies: Cedar text deciding an account's actions (create, update, show, list, validate).

``policies/test`` back-tests text over the runs already recorded. Account tokens only. Every
operation needs the Cedar engine (the ``policies`` extra) and answers ``not_implemented``
naming it when it is missing.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.envelopes import ready_envelope, success
from governance_core.fields import Fields
from governance_core.models.policies import MODES, Policy
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    resolve_ref,
    save,
)
from governance_core.policies.backtest import (
    BACKTEST_MODES,
    BacktestWindow,
    Draft,
    backtest_policy,
)
from governance_core.policies.engine import check_source, require_engine
from governance_core.registry import operation
from governance_core.repository import Record
from governance_core.views import model_view

__all__ = ["BACKTEST_DAYS", "BACKTEST_LIMIT", "SORTABLE", "SOURCE_MAX", "policy_details"]

SORTABLE = ("id", "name", "updated_at", "inserted_at")
SOURCE_MAX = 100_000
"""The most characters of policy text (without surrounding white space)."""
BACKTEST_DAYS = (1, 90, 7)
"""``policies/test``'s ``days``: the least, the most and the default."""
BACKTEST_LIMIT = (0, 1000, 100)
"""``policies/test``'s ``limit`` on its lists of stopped runs and spans: least, most, default."""
_SENT_MAX = 10 * 1024 * 1024
_SCOPES = {"environment_ids": "environment", "agent_ids": "agent"}


def policy_details(record: Record) -> dict[str, Any]:
    """The Policy resource of a stored policy."""
    return model_view(
        Policy, record, created_at=record["inserted_at"]
    )


def _text(fields: Fields) -> str | None:
    """The ``source`` member as sent (lines are counted in it); blank is missing.

    Its length is counted without surrounding white space, as every text member's is.
    """
    value = fields.str("source", required=True, strip=False, max_length=_SENT_MAX)
    if value is None:
        return None
    if not value.strip():
        fields.errors.required("source", "source may not be blank")
        return None
    if len(value.strip()) > SOURCE_MAX:
        fields.errors.invalid("source", f"source must be 1 to {SOURCE_MAX} characters long")
        return None
    return value


def _source(fields: Fields) -> str | None:
    """The ``source`` member, checked by the engine: a problem is an error on ``source``."""
    value = _text(fields)
    if value is None:
        return None
    problems = check_source(value)
    if problems:
        fields.errors.invalid("source", "; ".join(problem.text() for problem in problems))
        return None
    return value


def _scope(ctx: Context, fields: Fields) -> dict[str, list[str]] | None:
    """The ``scope`` member: environment and agent ids of the account (empty means all).

    Errors are named ``scope -> agent_ids -> 0``; other members of the scope are ignored.
    """
    value = fields.object("scope")
    if value is None:
        return None
    nested = Fields({member: value[member] for member in _SCOPES if member in value})
    scope: dict[str, list[str]] = {}
    for member, kind in _SCOPES.items():
        ids = nested.ids(member) or []
        references = Fields({})
        for index, item in enumerate(ids):
            resolve_ref(ctx, references, str(index), kind, item)
        if references.errors:
            nested.errors.merge(member, references.errors.to_error())
        scope[member] = ids
    if nested.errors:
        fields.errors.merge("scope", nested.errors.to_error())
    return scope


@operation("policies/create", write=True)
def create_policy(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a policy.

    ``source`` is Cedar policy text of forbid statements (docs/policies.md); text that does
    not parse, or names attributes outside the request schema, is 422 naming ``source``.
    """
    require_engine()
    name = fields.str("name", required=True, max_length=200)
    description = fields.str("description", max_length=10_000)
    mode = fields.str("mode", choices=MODES, default="enforce", nullable=False)
    source = _source(fields)
    scope = _scope(ctx, fields)
    fields.done()
    assert name is not None and source is not None and mode is not None
    policy = Policy(
        id=ctx.new_id(), account_id=ctx.account_id, name=name, mode=mode, source=source,
        inserted_at=ctx.now, updated_at=ctx.now, description=description or None,
        scope=scope or {"environment_ids": [], "agent_ids": []},
    )
    return ready_envelope(policy_details(save(ctx, ctx.tables.policies, policy)))


@operation("policies/update", write=True)
def update_policy(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update a policy; its ``version`` grows by one when anything changed."""
    require_engine()
    record = load_record(ctx, ctx.tables.policies, fields.raw("policy_id"))
    changes: dict[str, Any] = {}
    if fields.has("name"):
        changes["name"] = fields.str("name", required=True, max_length=200)
    if fields.has("description"):
        changes["description"] = fields.str("description", max_length=10_000) or None
    if fields.has("mode"):
        changes["mode"] = fields.str("mode", choices=MODES, nullable=False)
    if fields.has("source"):
        changes["source"] = _source(fields)
    if fields.has("scope"):
        changes["scope"] = _scope(ctx, fields) or {"environment_ids": [], "agent_ids": []}
    fields.done()
    changed = {key: value for key, value in changes.items() if record.get(key) != value}
    if changed:
        record = {
            **record, **changed, "version": int(record.get("version") or 1) + 1,
            "updated_at": format_timestamp(ctx.now),
        }
        ctx.tables.policies.put(record)
    return ready_envelope(policy_details(record))


@operation("policies/show", write=False)
def show_policy(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Get a policy."""
    require_engine()
    record = load_record(ctx, ctx.tables.policies, fields.raw("policy_id"))
    return ready_envelope(policy_details(record))


@operation("policies/list", write=False)
def list_policies(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List policies; filter ``mode``."""
    require_engine()
    filters = equality_filters(fields, choices={"mode": MODES})
    return list_response(
        ctx, fields, ctx.tables.policies, sortable=SORTABLE, summarize=policy_details,
        filters=filters,
    )


@operation("policies/validate", write=False)
def validate_policy(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Check Cedar policy text without storing it: ``{status, valid, problems}``.

    Each problem is the engine's ``message`` and the ``line`` it concerns (null when no
    single line is at fault). Text with problems is a successful validation that says so.
    """
    require_engine()
    value = _text(fields)
    fields.done()
    assert value is not None
    problems = check_source(value)
    return success(valid=not problems, problems=[problem.to_json() for problem in problems])


@operation("policies/test", write=False)
def backtest_draft(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Back-test policy text over the runs of the last ``days`` days: what it would have decided.

    ``source`` is Cedar text (as ``policies/create`` takes it); with ``policy_id`` it is a new
    version of that saved policy, whose mode and scope are the defaults. ``mode``:
    ``enforce`` or ``observe`` (default the saved policy's when live, else ``enforce``);
    ``scope`` as a policy's (default the saved policy's, else all); ``days`` 1 to 90
    (default 7); ``agent_id`` and ``environment_id`` narrow the runs; ``limit`` (0 to 1000,
    default 100) bounds the listed stopped runs and spans. Answers ``{status, policy,
    window, runs, spans, outcomes, observed_outcomes, warnings, errors, stopped_runs,
    stopped_spans}``; nothing is written (docs/policies.md, "Back-testing").
    """
    require_engine()
    saved = (
        load_record(ctx, ctx.tables.policies, fields.raw("policy_id"))
        if fields.raw("policy_id") is not None else None
    )
    source = _source(fields)
    saved_mode = (saved or {}).get("mode")
    mode = fields.str(
        "mode", choices=BACKTEST_MODES, nullable=False,
        default=saved_mode if saved_mode in BACKTEST_MODES else "enforce",
    )
    scope = (
        _scope(ctx, fields) if fields.has("scope") and fields.raw("scope") is not None
        else (saved or {}).get("scope")
    ) or {"environment_ids": [], "agent_ids": []}
    low, high, default = BACKTEST_DAYS
    days = fields.int("days", minimum=low, maximum=high, default=default, nullable=False)
    agent = resolve_ref(ctx, fields, "agent_id", "agent", fields.id("agent_id"))
    environment = resolve_ref(
        ctx, fields, "environment_id", "environment", fields.id("environment_id")
    )
    low, high, default = BACKTEST_LIMIT
    limit = fields.int("limit", minimum=low, maximum=high, default=default, nullable=False)
    fields.done()
    assert source is not None and mode is not None and days is not None and limit is not None
    draft = Draft(source=source, mode=mode, scope=scope)
    if saved is not None:
        changed = (saved["source"], saved["mode"], saved.get("scope")) != (source, mode, scope)
        draft = attrs.evolve(
            draft, name=saved["name"], policy_id=saved["id"],
            version=int(saved.get("version") or 1) + (1 if changed else 0),
        )
    window = BacktestWindow(
        since=ctx.now - timedelta(days=days), until=ctx.now,
        agent_id=None if agent is None else agent["id"],
        environment_id=None if environment is None else environment["id"],
    )
    return success(**backtest_policy(ctx, draft, window, limit=limit).to_json())
