"""Agent schema versions: list, show, and finding or creating one by content at registration."""

from __future__ import annotations

from typing import Any

from governance_core.context import Context
from governance_core.envelopes import ready_envelope
from governance_core.fields import Fields
from governance_core.models.agents import AgentSchemaVersion
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load_record,
    save,
    tenant,
)
from governance_core.registry import operation
from governance_core.repository import Filter, Record
from governance_core.rules.schemas import DeclaredSchemas
from governance_core.views import model_view

__all__ = [
    "SORTABLE",
    "current_deployment_refs",
    "find_or_create_schema_version",
    "schema_version_details",
    "schema_version_full",
]

SORTABLE = ("id", "inserted_at", "external_identifier")


def current_deployment_refs(ctx: Context, schema_version_id: str) -> list[str]:
    """Return the ids of the deployments whose current version uses this schema version."""
    versions = ctx.tables.agent_versions.query(
        [tenant(ctx), Filter("agent_schema_version_id", "eq", schema_version_id)]
    )
    if not versions:
        return []
    deployments = ctx.tables.agent_deployments.query(
        [tenant(ctx), Filter("current_version_id", "in", [v["id"] for v in versions])]
    )
    return [d["id"] for d in deployments]


def schema_version_full(ctx: Context, record: Record) -> dict[str, Any]:
    """Return the full form (the playground's): every schema map, with its validations.

    It is the view without ``environment_id``, which only the fetch form shows.
    """
    full = model_view(
        AgentSchemaVersion, record,
        current_agent_deployment_refs=current_deployment_refs(ctx, record["id"]),
    )
    del full["environment_id"]
    return full


def schema_version_details(ctx: Context, record: Record) -> dict[str, Any]:
    """Return the fetch form (AgentSchemaVersion_Details).

    That is the view plus ``current_version``: a current version of one of the agent's
    deployments uses it.
    """
    refs = current_deployment_refs(ctx, record["id"])
    return model_view(
        AgentSchemaVersion, record, current_agent_deployment_refs=refs,
        current_version=bool(refs),
    )


def find_or_create_schema_version(
    ctx: Context,
    *,
    agent_id: str,
    environment_id: str,
    external_identifier: str,
    declared: DeclaredSchemas,
) -> Record:
    """Return the agent's schema version with this content, made (and checked) when new.

    The same content registered twice is one schema version, whatever its
    ``external_identifier`` says the second time.
    """
    digest = declared.content_hash()
    found = ctx.tables.agent_schema_versions.query(
        [tenant(ctx), Filter("agent_id", "eq", agent_id), Filter("content_hash", "eq", digest)],
        limit=1,
    )
    if found:
        return found[0]
    checked = declared.checked()
    schema_version = AgentSchemaVersion(
        id=ctx.new_id(), account_id=ctx.account_id, agent_id=agent_id,
        external_identifier=external_identifier, content_hash=digest, inserted_at=ctx.now,
        updated_at=ctx.now, environment_id=environment_id, **checked,
    )
    return save(ctx, ctx.tables.agent_schema_versions, schema_version)


@operation("agent_schema_versions/list", write=False)
def list_schema_versions(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agent schema versions; filter ``agent_id``."""
    filters = equality_filters(fields, ids=("agent_id",))
    return list_response(
        ctx, fields, ctx.tables.agent_schema_versions, sortable=SORTABLE, filters=filters,
        summarize=lambda record: schema_version_details(ctx, record),
    )


@operation("agent_schema_versions/show", write=False)
def show_schema_version(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent schema version (fetch form)."""
    record = load_record(
        ctx, ctx.tables.agent_schema_versions, fields.raw("agent_schema_version_id")
    )
    # A view of the stored record: JSON already, so its schemas are not walked again.
    return ready_envelope(schema_version_details(ctx, record))
