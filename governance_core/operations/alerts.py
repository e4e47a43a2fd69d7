"""Alerts: raise, clear, show, list, count (decisions 7 and 8).

A run has at most one alert per name. Raising creates it (version 1), updates a raised one
(the version moves only when something changed) or raises a cleared one again; clearing
moves it to cleared. Every raise and clear is also recorded as an alert-purpose span, which
no span metric counts, and the run's ``raised_alert_count`` is kept on each write.
"""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.domain.alerts import ALERT_SCHEMAS, clear_alert, find_alert, raise_alert
from governance_core.domain.runs import (
    NAME_MAX,
    PreparedChecks,
    entry_in,
    in_reach,
    prepare_checks,
    system_checks,
)
from governance_core.domain.sensitive_values import (
    SplitValues,
    keep_values,
    may_reveal,
    reveal,
    split_member,
)
from governance_core.envelopes import details_envelope, success
from governance_core.errors import AlertUnknown, InvalidValue, NotFound
from governance_core.fields import Fields
from governance_core.models.agents import ALERT_SEVERITIES, Alert
from governance_core.models.description import sensitive_fields
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    reach_filters,
    read_instance_ref,
    tenant,
)
from governance_core.registry import ANY_SCOPE, operation
from governance_core.repository import Filter, Record
from governance_core.rules.states import ALERT, states
from governance_core.views import view_of

__all__ = [
    "SEVERITIES",
    "SORTABLE",
    "STATUSES",
    "alert_details",
    "prepare_raise",
]

SEVERITIES = ALERT_SEVERITIES
STATUSES = states(ALERT)
SORTABLE = ("id", "raised_at", "cleared_at", "severity", "name")


def alert_details(alert: Alert) -> dict[str, Any]:
    """Return the interface's Alert details."""
    return view_of(alert)


def prepare_raise(ctx: Context, fields: Fields) -> PreparedChecks | None:
    """Check a raise's payload against its alert schema, and render its summary, beforehand.

    The payload is read as :func:`raise_operation` reads it (its sensitive values split out).
    """
    instance_id = fields.id("agent_instance_id", required=True)
    name = fields.str("name", required=True, max_length=NAME_MAX)
    payload = fields.object("payload") or {}
    if fields.bool("payload_sensitive_encoding"):
        payload, _ = split_member(fields, "payload", payload)
    if fields.errors or instance_id is None or name is None:
        return None
    return prepare_checks(ctx, instance_id, lambda schema_version: {
        (ALERT_SCHEMAS, name): system_checks(
            entry_in(schema_version, ALERT_SCHEMAS, name), payload
        ),
    })


@operation("alerts/raise", write=True, scopes=ANY_SCOPE, prepare=prepare_raise)
def raise_operation(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Raise an alert on a run (one per name: created, updated or raised again)."""
    instance = read_instance_ref(ctx, fields)
    name = fields.str("name", required=True, max_length=NAME_MAX)
    severity = fields.str("severity", required=True, choices=SEVERITIES)
    payload = fields.object("payload") or {}
    raised_at = fields.timestamp("raised_at")
    sensitive = fields.bool("payload_sensitive_encoding")
    values: SplitValues = {}
    if sensitive:
        payload, values = split_member(fields, "payload", payload)
    fields.done()
    assert instance is not None and name is not None and severity is not None
    prepared = ctx.prepared if isinstance(ctx.prepared, PreparedChecks) else None
    written = raise_alert(
        ctx, instance, name, severity, payload, raised_at=raised_at,
        sensitive_encoding=sensitive, prepared=prepared,
    )
    # Values kept for an earlier payload of the alert are replaced, or forgotten.
    keep_values(ctx, written.alert.id, {"payload": values})
    return details_envelope(alert_details(written.alert))


def _run_acted_on(ctx: Context, instance_id: str) -> Record:
    """The caller's run ``instance_id``, answered like a path id.

    The run is the resource clearing acts on, so a malformed, unknown, another account's or
    (for an ingestion token) out-of-reach id is ``not_found``, never a field error.
    """
    instance = load_record(ctx, ctx.tables.agent_instances, instance_id.strip())
    if not in_reach(ctx, instance):
        raise NotFound("agent_instance not found")
    return instance


def _instance_of_bare_body(ctx: Context, body: object) -> Record:
    """Return the run a bare JSON body names; errors stand at the top level (no field)."""
    if not isinstance(body, str):
        raise InvalidValue("the body must be an agent instance id, or an object")
    return _run_acted_on(ctx, body)


def _instance_of_member(ctx: Context, fields: Fields) -> Record | None:
    """Return the run the ``agent_instance_id`` member names.

    A missing member or one that is not a string is a field error (collected, None answered);
    a string that names no run of the caller is ``not_found``.
    """
    value = fields.raw("agent_instance_id")
    if isinstance(value, str) and value.strip():
        return _run_acted_on(ctx, value)
    fields.str("agent_instance_id", required=True)  # records why it is missing or no string
    return None


@operation("alerts/clear", write=True, scopes=ANY_SCOPE)
def clear_operation(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Clear a raised alert.

    The body is ``{agent_instance_id, name}``, or a bare instance id with the name in the
    query; without a name, the run's only raised alert is cleared. Either way the run is
    answered like a path id: one the caller cannot see is ``not_found``.
    """
    if fields.body is not None:
        instance: Record | None = _instance_of_bare_body(ctx, fields.body)
    else:
        instance = _instance_of_member(ctx, fields)
    name = fields.str("name", max_length=NAME_MAX)
    fields.done()
    assert instance is not None
    if name is not None:
        alert = find_alert(ctx, instance["id"], name)
        if alert is None:
            raise AlertUnknown(f"the run has no alert named {name!r}")
    else:
        raised = ctx.tables.alerts.query(
            [tenant(ctx), Filter("agent_instance_id", "eq", instance["id"]),
             Filter("status", "eq", "raised")],
            limit=2,
        )
        if not raised:
            raise AlertUnknown("the run has no raised alert")
        if len(raised) > 1:
            fields.errors.required("name", "the run has several raised alerts: name one")
            fields.done()
        alert = from_record(Alert, raised[0])
    return details_envelope(alert_details(clear_alert(ctx, instance, alert).alert))


def _load_alert(ctx: Context, alert_id: object) -> Alert:
    record = load_record(ctx, ctx.tables.alerts, alert_id)
    principal = ctx.principal
    assert principal is not None
    if principal.is_ingestion and (
        record["agent_id"] != principal.agent_id
        or record["environment_id"] != principal.environment_id
    ):
        raise NotFound("alert not found")
    return from_record(Alert, record)


def _filters(ctx: Context, fields: Fields) -> list[Filter]:
    """Read the list and count filters; an ingestion token is held to its own reach."""
    filters = equality_filters(
        fields,
        ids=("agent_instance_id", "agent_id", "environment_id"),
        choices={"status": STATUSES, "severity": SEVERITIES},
    )
    alert_name = fields.str("name", max_length=NAME_MAX)
    if alert_name:
        filters.append(Filter("name", "eq", alert_name))
    return filters + reach_filters(ctx)


@operation("alerts/show", write=False, scopes=ANY_SCOPE)
def show_alert(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an alert (``redacted`` withholds sensitive values)."""
    alert = _load_alert(ctx, fields.raw("alert_id"))
    redacted = fields.bool("redacted")
    fields.done()
    details = alert_details(alert)
    if alert.payload_sensitive_encoding and may_reveal(ctx, redacted):
        details.update(reveal(
            ctx, alert.id, {name: details[name] for name in sensitive_fields(Alert)}
        ))
    return details_envelope(details)


@operation("alerts/list", write=False, scopes=ANY_SCOPE)
def list_alerts(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List alerts.

    Filters ``agent_instance_id``, ``agent_id``, ``environment_id``, ``status``, ``severity``,
    ``name``.
    """
    return list_response(
        ctx, fields, ctx.tables.alerts, sortable=SORTABLE, filters=_filters(ctx, fields),
        summarize=lambda record: alert_details(from_record(Alert, record)),
    )


@operation("alerts/count", write=False, scopes=ANY_SCOPE)
def count_alerts(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Count alerts, with the list's filters: ``{status, count}``."""
    filters = _filters(ctx, fields)
    fields.done()
    return success(count=ctx.tables.alerts.count([tenant(ctx), *filters]))
