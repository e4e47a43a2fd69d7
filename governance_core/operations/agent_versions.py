"""Agent versions: list, show, and finding or creating one at registration."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.envelopes import details_envelope
from governance_core.fields import Fields
from governance_core.models.agents import AgentVersion
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    save,
    tenant,
)
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.views import model_view

__all__ = [
    "SORTABLE",
    "agent_version_details",
    "find_agent_version",
    "register_agent_version",
]

SORTABLE = ("id", "inserted_at", "external_identifier")


def agent_version_details(ctx: Context, record: Record) -> dict[str, Any]:
    """Return the interface's AgentVersion details."""
    deployments = ctx.tables.agent_deployments.query(
        [tenant(ctx), Filter("current_version_id", "eq", record["id"])]
    )
    return model_view(
        AgentVersion, record,
        current_agent_deployment_refs=[d["id"] for d in deployments],
    )


def find_agent_version(ctx: Context, agent_id: str, external_identifier: str) -> Record | None:
    """Return the agent's version with ``external_identifier``, if any."""
    found = ctx.tables.agent_versions.query([
        tenant(ctx),
        Filter("agent_id", "eq", agent_id),
        Filter("external_identifier", "eq", external_identifier),
    ], limit=1)
    return found[0] if found else None


def register_agent_version(
    ctx: Context,
    existing: Record | None,
    *,
    agent_id: str,
    external_identifier: str,
    schema_version_id: str,
    described: Mapping[str, Any],
) -> Record:
    """Create the version, or bring ``existing`` up to date with what this registration says.

    ``described`` holds the members the registration sent (name, description,
    runtime_environment); a registration with other schemas moves the version to them.
    """
    if existing is None:
        version = AgentVersion(
            id=ctx.new_id(), account_id=ctx.account_id, agent_id=agent_id,
            agent_schema_version_id=schema_version_id, external_identifier=external_identifier,
            inserted_at=ctx.now, updated_at=ctx.now, **described,
        )
        return save(ctx, ctx.tables.agent_versions, version)
    version = from_record(AgentVersion, existing)
    updated = attrs.evolve(version, agent_schema_version_id=schema_version_id, **described)
    if updated == version:
        return existing
    return save(ctx, ctx.tables.agent_versions, attrs.evolve(updated, updated_at=ctx.now))


@operation("agent_versions/list", write=False)
def list_agent_versions(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agent versions; filter ``agent_id``."""
    filters = equality_filters(fields, ids=("agent_id",))
    return list_response(
        ctx, fields, ctx.tables.agent_versions, sortable=SORTABLE, filters=filters,
        summarize=lambda record: agent_version_details(ctx, record),
    )


@operation("agent_versions/show", write=False)
def show_agent_version(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent version."""
    record = load_record(ctx, ctx.tables.agent_versions, fields.raw("agent_version_id"))
    return details_envelope(agent_version_details(ctx, record))
