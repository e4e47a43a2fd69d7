"""Quality payloads of a run: ``record_quality``, and the clients' older ``update`` form.

A run holds one quality payload per quality schema name. Each change is also recorded as a
quality-purpose span (no span metric counts it) whose payload is checked against the quality
schema of that name. A name the run's schema version does not declare is stored all the same
and flagged on that span (``schema_known`` false): evaluations are never lost.

With ``sensitive_encoding`` true, the values of a payload's ``$sensitive`` markers are kept
apart as for spans and alerts (decisions 11): the run and its quality span store the markers
without ``value``; the values are kept for the run under :func:`quality_member` of the name and
put back only by single-run reads of account tokens.

Each payload's check (and summary) is made before the operation's transaction opens
(:func:`prepare_record` and :func:`prepare_update`).
"""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.domain.runs import (
    NAME_MAX,
    QUALITY_SCHEMAS,
    PreparedChecks,
    entry_in,
    prepare_checks,
    set_quality,
    system_checks,
)
from governance_core.domain.sensitive_values import (
    SplitValues,
    keep_values,
    quality_member,
    split_member,
)
from governance_core.envelopes import details_envelope
from governance_core.errors import InvalidValue
from governance_core.fields import Fields
from governance_core.operations.agent_instances import instance_details, load_instance
from governance_core.registry import ANY_SCOPE, operation

__all__ = ["prepare_record", "prepare_update"]


def _split(
    fields: Fields, member: tuple[str, ...], payload: dict[str, Any] | None, sensitive: bool
) -> tuple[dict[str, Any] | None, SplitValues]:
    """The payload without its markers' values, and the values (when ``sensitive``)."""
    if not sensitive or payload is None:
        return payload, {}
    # Markers are reported under the member as sent: payload -> ... or quality_payload -> name.
    probe = Fields({})
    redacted, values = split_member(probe, member[-1], payload)
    if probe.errors:
        for name, problem in probe.errors.to_error().errors.items():
            fields.errors.add((*member[:-1], name), problem)
    return redacted, values


def _prepare(
    ctx: Context, instance_id: str | None, payloads: dict[str, dict[str, Any] | None]
) -> PreparedChecks | None:
    """The checks of the quality spans ``payloads`` (by name) will write, made beforehand."""
    if instance_id is None:
        return None
    return prepare_checks(ctx, instance_id, lambda schema_version: {
        (QUALITY_SCHEMAS, name): system_checks(
            entry_in(schema_version, QUALITY_SCHEMAS, name), payload or {}
        )
        for name, payload in payloads.items()
    })


def _record_members(
    fields: Fields,
) -> tuple[str | None, dict[str, Any] | None, SplitValues]:
    """A record's quality name and payload (as stored, and its sensitive values)."""
    payload: dict[str, Any] | None
    if fields.body is not None:
        bare = fields.body
        if not isinstance(bare, str) or not bare.strip() or len(bare.strip()) > NAME_MAX:
            raise InvalidValue("the body must be a quality schema name, or {name, payload}")
        name: str | None = bare.strip()
        payload = {}
    else:
        name = fields.str("name", required=True, max_length=NAME_MAX)
        removing = fields.has("payload") and fields.raw("payload") is None
        payload = None if removing else fields.object("payload") or {}
    payload, values = _split(fields, ("payload",), payload, fields.bool("sensitive_encoding"))
    return name, payload, values


def prepare_record(ctx: Context, fields: Fields) -> PreparedChecks | None:
    """Check a record's payload against its quality schema before the transaction opens."""
    instance_id = fields.raw("agent_instance_id")
    name, payload, _ = _record_members(fields)
    if fields.errors or name is None or not isinstance(instance_id, str):
        return None
    return _prepare(ctx, instance_id, {name: payload})


def _update_members(
    fields: Fields,
) -> dict[str, tuple[dict[str, Any] | None, SplitValues]]:
    """An update's payloads by quality name (as stored, and their sensitive values)."""
    changes: dict[str, Any] = fields.object("quality_payload") or {}
    for name, payload in changes.items():
        if not name.strip() or len(name) > NAME_MAX:
            fields.errors.invalid(
                ("quality_payload", name), f"a quality name must be 1 to {NAME_MAX} characters"
            )
        elif payload is not None and not isinstance(payload, dict):
            fields.errors.invalid(("quality_payload", name), "a quality payload must be an object")
    sensitive = fields.bool("sensitive_encoding")
    return {
        name: _split(fields, ("quality_payload", name), payload, sensitive)
        for name, payload in changes.items()
        if payload is None or isinstance(payload, dict)
    }


def prepare_update(ctx: Context, fields: Fields) -> PreparedChecks | None:
    """Check an update's payloads against their quality schemas before the transaction opens."""
    instance_id = fields.raw("agent_instance_id")
    split = _update_members(fields)
    if fields.errors or not isinstance(instance_id, str):
        return None
    return _prepare(ctx, instance_id, {name: payload for name, (payload, _) in split.items()})


def _prepared(ctx: Context) -> PreparedChecks | None:
    return ctx.prepared if isinstance(ctx.prepared, PreparedChecks) else None


@operation(
    "agent_instances/record_quality", write=True, scopes=ANY_SCOPE, prepare=prepare_record,
    defers_rollups=True,
)
def record_quality(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Record a quality payload on a run.

    The body is ``{name, payload, sensitive_encoding?}`` (``payload: null`` removes the
    name), or a bare quality schema name (payload ``{}``).
    """
    instance = load_instance(ctx, fields.raw("agent_instance_id"))
    name, payload, values = _record_members(fields)
    fields.done()
    assert name is not None
    stored = set_quality(ctx, instance, name, payload, _prepared(ctx))
    keep_values(ctx, instance["id"], {quality_member(name): values})
    return details_envelope(instance_details(ctx, stored))


@operation(
    "agent_instances/update", write=True, scopes=ANY_SCOPE, prepare=prepare_update,
    defers_rollups=True,
)
def update_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update a run's quality payloads (the clients' older form).

    ``quality_payload`` maps names to payloads, merged into the run's; a null payload removes
    its name. ``sensitive_encoding`` applies to every payload of the map.
    """
    instance = load_instance(ctx, fields.raw("agent_instance_id"))
    split = _update_members(fields)
    fields.done()
    prepared = _prepared(ctx)
    for name, (payload, values) in split.items():
        instance = set_quality(ctx, instance, name, payload, prepared)
        keep_values(ctx, instance["id"], {quality_member(name): values})
    return details_envelope(instance_details(ctx, instance))
