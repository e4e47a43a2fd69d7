"""Ending the runs of traces whose root span never arrived.

A trace's run is finished by its root span. When the root is lost (the process died before
exporting it, a sampler or a collector dropped it) the run would stay active for ever:
:func:`end_idle_runs` ends every such run that has received no span for ``idle_after``, with
the status its highest arrived spans give, and raises the alert :data:`ROOT_MISSING_ALERT`
on it to say so. Time comes from the ``Governance``'s clock, so a fixed clock makes it
deterministic. :func:`governance_core.otel.ingest` calls it for the exporting account after
an export, at most once a minute; anyone embedding the library may call it on a schedule for
every account.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any, Final

from governance_core.clock import format_timestamp
from governance_core.errors import GovernanceError, TemporarilyUnavailable
from governance_core.otel.mapping import DEFAULT_ROOT_WAIT
from governance_core.service import Governance
from governance_core.storage.protocol import Filter, Record

__all__ = [
    "DEFAULT_ROOT_WAIT",
    "ROOT_MISSING_ALERT",
    "ROOT_WAIT_VARIABLE",
    "end_idle_runs",
    "idle_run_status",
    "parse_root_wait",
]

ROOT_MISSING_ALERT: Final = "otel_root_missing"
"""The alert (severity ``warning``) raised on a run ended without its root span."""

ROOT_WAIT_VARIABLE: Final = "GOVERNANCE_OTEL_ROOT_WAIT"
"""The environment variable a server reads the root wait from (:func:`parse_root_wait`)."""

_TRACE_ID = re.compile(r"[0-9a-f]{32}")
_OPEN: Final = ["pending", "active"]
_PAGE: Final = 500
_log = logging.getLogger("governance_core.otel")


def idle_run_status(spans: list[Record]) -> str:
    """The status a run without its root takes from its activity spans.

    The spans whose parent is not among them stand in for the missing root: the run failed
    when one of them failed, else it is complete (a failure deeper down that a parent
    recovered from does not fail the run, as it would not with the root).
    """
    ids = {span["id"] for span in spans}
    highest = [span for span in spans if span.get("parent_span_id") not in ids]
    return "failed" if any(span["status"] == "failed" for span in highest) else "complete"


def parse_root_wait(text: str | None) -> timedelta | None:
    """The root wait a setting names: seconds (``1800``), ``off`` or ``0`` for none.

    Unset or blank gives :data:`DEFAULT_ROOT_WAIT`; anything else raises ``ValueError``
    naming :data:`ROOT_WAIT_VARIABLE`.
    """
    if text is None or not text.strip():
        return DEFAULT_ROOT_WAIT
    text = text.strip().lower()
    if text in ("off", "none", "never"):
        return None
    try:
        seconds = float(text)
    except ValueError:
        seconds = -1.0
    if not seconds >= 0 or seconds > 10**9:
        raise ValueError(
            f"{ROOT_WAIT_VARIABLE} must be a number of seconds from 0 to 1000000000, or off; "
            f"not {text!r}"
        )
    return timedelta(seconds=seconds) if seconds else None


def _activity_spans(governance: Governance, run_id: str) -> Iterator[Record]:
    filters = [Filter("agent_instance_id", "eq", run_id), Filter("purpose", "eq", "activity")]
    yield from governance.tables.agent_spans.iterate(filters)


def _trace_id(run: Record) -> str | None:
    """The trace id the run's external identifier may be (a run of a trace has one)."""
    trace_id = run.get("external_identifier")
    return trace_id if isinstance(trace_id, str) and _TRACE_ID.fullmatch(trace_id) else None


def _records_trace(trace_id: str, first_span: Record | None) -> bool:
    """Whether a run named ``trace_id`` records that trace: its root may then be awaited."""
    otel = (first_span or {}).get("payload", {}).get("otel.span")
    return isinstance(otel, dict) and otel.get("trace_id") == trace_id


def end_idle_runs(
    governance: Governance,
    *,
    idle_after: timedelta = DEFAULT_ROOT_WAIT,
    account_id: str | None = None,
) -> tuple[str, ...]:
    """End the trace runs idle for ``idle_after`` (of one account, or all); their ids.

    A run is ended when it is pending or active, was registered for an OpenTelemetry trace
    (its external identifier is the trace id its spans carry), and both its latest span time
    (``last_activity_span_at``, by the client's clock) and its latest write (``updated_at``,
    by this clock) are older than ``idle_after``. It is finished at its latest span time with
    :func:`idle_run_status`, and the alert :data:`ROOT_MISSING_ALERT` is raised on it with
    ``{trace_id, idle_after_seconds, message}``. Each run is ended in its own transaction with
    idempotency keys, so concurrent sweeps end it once; a run the core refuses to end is
    logged and skipped, and a busy store stops the sweep (the next one resumes it).
    """
    cutoff = format_timestamp(governance.clock() - idle_after)
    accounts = (
        [account_id] if account_id is not None
        else [account["id"] for account in governance.tables.accounts.iterate()]
    )
    ended: list[str] = []
    for account in accounts:
        # One account at a time, so each query uses the (account_id, status) index.
        if not _end_account_runs(governance, account, cutoff, idle_after, ended):
            break
    return tuple(ended)


def _end_account_runs(
    governance: Governance, account_id: str, cutoff: str, idle_after: timedelta, ended: list[str]
) -> bool:
    """End one account's idle trace runs into ``ended``; False when the store was busy."""
    filters = [
        Filter("account_id", "eq", account_id), Filter("status", "in", _OPEN),
        Filter("last_activity_span_at", "lt", cutoff),
    ]
    after: list[Filter] = []
    while True:
        # Paged on by id (the query's order), past the runs skipped and ended alike: each
        # page starts where the last ended, not by reading the skipped ones again.
        page = governance.tables.agent_instances.query([*filters, *after], limit=_PAGE)
        for run in page:
            # A run whose identifier is no trace id is not one: its spans are not read.
            trace_id = _trace_id(run)
            if run.get("updated_at", "") >= cutoff or trace_id is None:
                continue
            spans = _activity_spans(governance, run["id"])
            first = next(spans, None)
            if not _records_trace(trace_id, first):
                continue
            try:
                _end(governance, run, [first, *spans] if first else [], idle_after)
            except TemporarilyUnavailable:
                return False
            except GovernanceError as error:
                _log.warning("run %s not ended: %s", run["id"], error.message)
                continue
            ended.append(run["id"])
        if len(page) < _PAGE:
            return True
        after = [Filter("id", "gt", page[-1]["id"])]


def _end(governance: Governance, run: Record, spans: list[Record], idle_after: timedelta) -> None:
    principal = governance.as_account(run["account_id"]).principal
    seconds = int(idle_after.total_seconds())
    alert: dict[str, Any] = {
        "agent_instance_id": run["id"], "name": ROOT_MISSING_ALERT, "severity": "warning",
        "payload": {
            "trace_id": run["external_identifier"], "idle_after_seconds": seconds,
            "message": (
                f"the trace's root span never arrived: the run was ended after {seconds} s "
                "without a new span, with the status of its highest spans"
            ),
        },
        "raised_at": run["last_activity_span_at"],
        "idempotency_key": f"otel-idle-{run['id']}-alert",
    }
    finish = {
        "agent_instance_id": run["id"], "status": idle_run_status(spans),
        "timestamp": run["last_activity_span_at"],
        "idempotency_key": f"otel-idle-{run['id']}-finish",
    }
    with governance.transaction():
        governance.call("alerts/raise", alert, principal=principal)
        governance.call("agent_instances/finish", finish, principal=principal)
