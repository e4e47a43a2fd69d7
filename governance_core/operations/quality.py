"""Quality payloads of a run: ``record_quality``, and the clients' older ``update`` form.

A run holds one quality payload per quality schema name. Each change is also recorded as a
quality-purpose span (no span metric counts it) whose payload is checked against the quality
schema of that name. A name the run's schema version does not declare is stored all the same
and flagged on that span (``schema_known`` false): evaluations are never lost.

With ``sensitive_encoding`` true, the values of a payload's ``$sensitive`` markers are kept
apart as for spans and alerts (decisions 11): the run and its quality span store the markers
without ``value``; the values are kept for the run under :func:`quality_member` of the name and
put back only by single-run reads of account tokens.
"""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.domain.runs import NAME_MAX, system_span
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
from governance_core.repository import Record

__all__ = ["set_quality"]


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


def set_quality(
    ctx: Context, instance: Record, name: str, payload: dict[str, Any] | None
) -> Record:
    """Set (or, with ``payload`` None, remove) the run's quality payload ``name``.

    Writes the quality-purpose span that records it, in the caller's transaction; returns
    the instance as stored.
    """
    payloads = dict(instance.get("quality_payloads") or {})
    if payload is None:
        payloads.pop(name, None)
    else:
        payloads[name] = payload
    return system_span(
        ctx, {**instance, "quality_payloads": payloads}, purpose="quality",
        group="quality_schemas", name=name, payload=payload or {},
        result_payload={"event": "removed" if payload is None else "recorded"}, at=ctx.now,
    )


@operation("agent_instances/record_quality", write=True, scopes=ANY_SCOPE)
def record_quality(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Record a quality payload on a run.

    The body is ``{name, payload, sensitive_encoding?}`` (``payload: null`` removes the
    name), or a bare quality schema name (payload ``{}``).
    """
    instance = load_instance(ctx, fields.raw("agent_instance_id"))
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
    fields.done()
    assert name is not None
    stored = set_quality(ctx, instance, name, payload)
    keep_values(ctx, instance["id"], {quality_member(name): values})
    return details_envelope(instance_details(ctx, stored))


@operation("agent_instances/update", write=True, scopes=ANY_SCOPE)
def update_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Update a run's quality payloads (the clients' older form).

    ``quality_payload`` maps names to payloads, merged into the run's; a null payload removes
    its name. ``sensitive_encoding`` applies to every payload of the map.
    """
    instance = load_instance(ctx, fields.raw("agent_instance_id"))
    changes: dict[str, Any] = fields.object("quality_payload") or {}
    for name, payload in changes.items():
        if not name.strip() or len(name) > NAME_MAX:
            fields.errors.invalid(
                ("quality_payload", name), f"a quality name must be 1 to {NAME_MAX} characters"
            )
        elif payload is not None and not isinstance(payload, dict):
            fields.errors.invalid(("quality_payload", name), "a quality payload must be an object")
    sensitive = fields.bool("sensitive_encoding")
    split = {
        name: _split(fields, ("quality_payload", name), payload, sensitive)
        for name, payload in changes.items()
        if payload is None or isinstance(payload, dict)
    }
    fields.done()
    for name, (payload, values) in split.items():
        instance = set_quality(ctx, instance, name, payload)
        keep_values(ctx, instance["id"], {quality_member(name): values})
    return details_envelope(instance_details(ctx, instance))
