"""The detective judge: the live policies' verdict on activity spans just recorded.

A span recorded without a ``decide`` (an agent that records but does not ask, an
OpenTelemetry export) is still judged: :func:`judge_recorded` evaluates the enforce- and
observe-mode policies in the run's scope on each span, as back-testing does
(:mod:`~governance_core.policies.recorded`), the run's figures starting from its stored
aggregates before the batch and moving span by span in ``started_at`` order. It writes
nothing; :func:`keep_recorded` stores what it found, in the caller's transaction.

What a judgement holds, per span:

- the span's decision, kept only when it says something: an outcome other than ``allow``,
  an observe-mode ``observed_outcome`` other than ``allow``, a warning or a reason (an allow
  with nothing to say is not stored: every span write would write a decision);
- an action that a policy holds for approval was recorded already, so no approval is opened:
  an approved approval of the same action on the run (by digest) allows it, naming the
  approval; without one the outcome is ``deny``;
- the decision names the span (``agent_span_id``) and its action's kind, name and span type
  (its ``args`` are empty: the arguments are the span's payload); its stored ``action_kind`` is
  ``recorded:<kind>``, so the run's ``context.run.tool_calls`` (its allowed tool-call
  decides) does not count a call twice.

``alert_due`` says the run has no ``policy_denied`` alert and a decision denies under an
enforce-mode policy: :func:`keep_recorded` raises it (the first denying decision named).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

import attrs

from governance_core.context import Context
from governance_core.domain.alerts import find_alert
from governance_core.policies.deciding import (
    POLICY_DENIED,
    Action,
    Verdict,
    action_digest,
    active_policies,
    decision_record,
    raise_policy_denied,
)
from governance_core.policies.engine import engine_available
from governance_core.policies.recorded import RecordedJudge
from governance_core.repository import Filter, Record, SortKey
from governance_core.rules.aggregates import ACTIVITY

__all__ = [
    "RECORDED_KIND_PREFIX", "RecordedJudgement", "judge_and_keep", "judge_recorded",
    "keep_recorded",
]

RECORDED_KIND_PREFIX: Final = "recorded:"
"""The stored ``action_kind`` of a decision on a recorded span: ``recorded:tool_call``..."""

_UNAPPROVED: Final = " (recorded without an approval)"


@attrs.frozen
class RecordedJudgement:
    """The decisions to store for a batch of recorded spans, and whether the alert is due."""

    decisions: tuple[Record, ...] = ()
    alert_due: bool = False


def _approved(ctx: Context, run: Record, action: Action) -> Record | None:
    """An approved approval of the same action on the run (used or not), or None."""
    found = ctx.tables.approvals.query([
        Filter("agent_instance_id", "eq", run["id"]),
        Filter("digest", "eq", action_digest(run["id"], action)),
        Filter("status", "eq", "approved"),
    ], sort=[SortKey("id")], limit=1)
    return found[0] if found else None


def _settled(ctx: Context, run: Record, action: Action, verdict: Verdict
             ) -> tuple[str, list[dict[str, Any]]]:
    """The outcome and reasons of a recorded action (no approval can be opened for it)."""
    reasons = [dict(reason) for reason in verdict.reasons]
    if verdict.outcome != "pending_approval":
        return verdict.outcome, reasons
    approval = _approved(ctx, run, action)
    if approval is not None:
        return "allow", [
            {**reason, "approval_id": approval["id"]} if reason["effect"] == "approval"
            else reason
            for reason in reasons
        ]
    return "deny", [
        {**reason, "message": reason["message"] + _UNAPPROVED}
        if reason["effect"] == "approval" and reason["mode"] == "enforce" else reason
        for reason in reasons
    ]


def judge_recorded(ctx: Context, run_before: Record, spans: Sequence[Record]) -> RecordedJudgement:
    """Judge ``spans``, just recorded on the run, by the live policies of its scope.

    ``run_before`` is the run's record as stored before these spans moved its aggregates
    (its span counts, per-type counts and token groups); ``spans`` are the stored records of
    the spans created (activity spans are judged, others passed over). Reads only: the
    account's policies, the run's schema version and agent, and the approvals of a span
    held for approval. Without the Cedar engine nothing is judged.
    """
    if not engine_available():
        return RecordedJudgement()
    active = active_policies(ctx)
    if active.compiled is None:
        return RecordedJudgement()
    judge = RecordedJudge(ctx, active, earlier_runs="until_now")
    run = judge.start(run_before, stored=True)
    if run is None:
        return RecordedJudgement()
    activity = sorted(
        (span for span in spans if span.get("purpose", ACTIVITY) == ACTIVITY),
        key=lambda span: (span["started_at"], span["id"]),
    )
    decisions: list[Record] = []
    for judged in judge.judge(run, activity):
        verdict, span = judged.verdict, judged.span
        outcome, reasons = _settled(ctx, run_before, judged.action, verdict)
        if outcome == "allow" and verdict.observed_outcome in (None, "allow") and not (
            verdict.warnings or reasons
        ):
            continue
        # The arguments are the span's payload, which agent_span_id names: a decision does
        # not copy them (nor any sensitive value put back for the policies to read).
        shown = attrs.evolve(judged.action, args={})
        decisions.append(decision_record(
            ctx, run_before, shown, decision_id=ctx.new_id(), outcome=outcome,
            observed_outcome=verdict.observed_outcome, warnings=verdict.warnings,
            reasons=reasons, action_kind=RECORDED_KIND_PREFIX + judged.action.kind,
            agent_span_id=span["id"],
        ))
    alert_due = any(decision["outcome"] == "deny" for decision in decisions) and (
        find_alert(ctx, run_before["id"], POLICY_DENIED) is None
    )
    return RecordedJudgement(tuple(decisions), alert_due)


def keep_recorded(ctx: Context, run: Record, judgement: RecordedJudgement) -> Record:
    """Store the judgement's decisions and raise the alert when due; the run as stored now.

    ``run`` is the run's current record (after the spans); raising the alert rewrites it
    (its ``raised_alert_count``), so write the run on from the record returned.
    """
    for decision in judgement.decisions:
        ctx.tables.decisions.put(decision)
    if judgement.alert_due:
        first = next(d for d in judgement.decisions if d["outcome"] == "deny")
        run = raise_policy_denied(ctx, run, first)
    return run


def judge_and_keep(ctx: Context, run_before: Record, spans: Sequence[Record]) -> None:
    """Judge spans just recorded on a run and keep what the judgement says, in one go.

    What a write batch calls for each run it moved (detective mode): ``run_before`` is the
    run as it stood before the batch, ``spans`` the activity spans it created. Nothing is
    written when the policies in scope have nothing to say.
    """
    judgement = judge_recorded(ctx, run_before, spans)
    if not (judgement.decisions or judgement.alert_due):
        return
    run = ctx.tables.agent_instances.get(run_before["id"])
    assert run is not None, "the run was moved in this very transaction"
    keep_recorded(ctx, run, judgement)
