"""Agent deployments: an agent bound to an environment, naming its current version."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.domain.supplied_ids import claim_id, read_supplied_id
from governance_core.envelopes import details_envelope
from governance_core.errors import Conflict
from governance_core.fields import Fields
from governance_core.models.agents import AgentDeployment
from governance_core.operations.common import (
    equality_filters,
    list_response,
    load,
    resolve_ref,
    save,
    tenant,
)
from governance_core.registry import operation
from governance_core.repository import Filter
from governance_core.views import view_of

__all__ = [
    "SORTABLE",
    "deployment_details",
    "find_deployment",
    "register_deployment",
]

SORTABLE = ("id", "inserted_at")


def deployment_details(deployment: AgentDeployment) -> dict[str, Any]:
    """Return the interface's AgentDeployment_Details."""
    return view_of(deployment)


def find_deployment(ctx: Context, agent_id: str, environment_id: str) -> AgentDeployment | None:
    """Return the deployment of the agent in the environment, if any (there is at most one)."""
    found = ctx.tables.agent_deployments.query([
        tenant(ctx),
        Filter("agent_id", "eq", agent_id),
        Filter("environment_id", "eq", environment_id),
    ], limit=1)
    return from_record(AgentDeployment, found[0]) if found else None


def register_deployment(
    ctx: Context, *, agent_id: str, environment_id: str, version_id: str, make_current: bool
) -> AgentDeployment:
    """Return the agent's deployment in the environment, made when missing.

    With ``make_current``, ``version_id`` becomes its current version.
    """
    deployment = find_deployment(ctx, agent_id, environment_id)
    current = version_id if make_current else None
    if deployment is None:
        deployment = AgentDeployment(
            id=ctx.new_id(), account_id=ctx.account_id, agent_id=agent_id,
            environment_id=environment_id, inserted_at=ctx.now, updated_at=ctx.now,
            current_version_id=current,
        )
        save(ctx, ctx.tables.agent_deployments, deployment)
    elif make_current and deployment.current_version_id != version_id:
        deployment = attrs.evolve(deployment, current_version_id=version_id, updated_at=ctx.now)
        save(ctx, ctx.tables.agent_deployments, deployment)
    return deployment


def _read_current_version(ctx: Context, fields: Fields, agent_id: str | None) -> str | None:
    """Read ``current_version_id``: null, or a version of the deployment's own agent."""
    version_id = fields.id("current_version_id")
    version = resolve_ref(ctx, fields, "current_version_id", "agent_version", version_id)
    if version is not None and agent_id is not None and version["agent_id"] != agent_id:
        fields.errors.invalid(
            "current_version_id", "current_version_id must be a version of the deployment's agent"
        )
    return version_id


@operation("agent_deployments/list", write=False)
def list_deployments(ctx: Context, fields: Fields) -> dict[str, Any]:
    """List agent deployments; filters ``agent_id``, ``environment_id``."""
    filters = equality_filters(fields, ids=("agent_id", "environment_id"))
    return list_response(
        ctx, fields, ctx.tables.agent_deployments, sortable=SORTABLE, filters=filters,
        summarize=lambda record: deployment_details(from_record(AgentDeployment, record)),
    )


@operation("agent_deployments/show", write=False)
def show_deployment(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Fetch an agent deployment."""
    deployment = load(
        ctx, AgentDeployment, ctx.tables.agent_deployments, fields.raw("agent_deployment_id")
    )
    return details_envelope(deployment_details(deployment))


@operation("agent_deployments/create", write=True)
def create_deployment(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Deploy an agent to an environment (one deployment per agent and environment)."""
    requested = read_supplied_id(ctx, fields)
    agent_id = fields.id("agent_id", required=True)
    environment_id = fields.id("environment_id", required=True)
    agent = resolve_ref(ctx, fields, "agent_id", "agent", agent_id)
    resolve_ref(ctx, fields, "environment_id", "environment", environment_id)
    current_version_id = _read_current_version(ctx, fields, agent_id if agent else None)
    fields.done()
    assert agent_id is not None and environment_id is not None
    if find_deployment(ctx, agent_id, environment_id) is not None:
        raise Conflict("the agent already has a deployment in this environment")
    deployment = AgentDeployment(
        id=claim_id(ctx, requested), account_id=ctx.account_id, agent_id=agent_id,
        environment_id=environment_id, inserted_at=ctx.now, updated_at=ctx.now,
        current_version_id=current_version_id,
    )
    save(ctx, ctx.tables.agent_deployments, deployment)
    return details_envelope(deployment_details(deployment))


@operation("agent_deployments/update", write=True)
def update_deployment(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Set (or clear, with null) a deployment's current version."""
    deployment = load(
        ctx, AgentDeployment, ctx.tables.agent_deployments, fields.raw("agent_deployment_id")
    )
    current_version_id = deployment.current_version_id
    if fields.has("current_version_id"):
        current_version_id = _read_current_version(ctx, fields, deployment.agent_id)
    fields.done()
    if current_version_id != deployment.current_version_id:
        deployment = attrs.evolve(
            deployment, current_version_id=current_version_id, updated_at=ctx.now
        )
        save(ctx, ctx.tables.agent_deployments, deployment)
    return details_envelope(deployment_details(deployment))
