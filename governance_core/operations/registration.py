"""Registering a run: the ``agent_instances/register`` operation and what it finds or makes.

One registration, in one transaction: the agent version (found by agent and
``external_identifier``), the schema version (found by content), the deployment (agent x
environment, its current version moved unless ``update_current_version`` is false), the
instance itself (pending), and the agent's status and ``instance_counts``.
"""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.context import Context
from governance_core.converter import from_record
from governance_core.domain.supplied_ids import claim_id, read_supplied_id
from governance_core.envelopes import details_envelope
from governance_core.errors import Conflict, InvalidAction, NotFound, NotPermitted
from governance_core.fields import Fields
from governance_core.models.agents import Agent, AgentInstance, empty_instance_counts
from governance_core.operations.agent_deployments import register_deployment
from governance_core.operations.agent_instances import PURPOSES, instance_details
from governance_core.operations.agent_schema_versions import find_or_create_schema_version
from governance_core.operations.agent_versions import find_agent_version, register_agent_version
from governance_core.operations.common import resolve_ref, save, tenant
from governance_core.registry import ANY_SCOPE, operation
from governance_core.repository import Filter, Record
from governance_core.rules.schemas import DeclaredSchemas, normalize_schemas
from governance_core.rules.states import AGENT, INSTANCE, advance, allowed, initial

__all__ = ["Registration", "register_instance"]

IDENTIFIER_MAX = 200
TEXT_MAX = 10_000
NO_SCHEMAS = DeclaredSchemas({}, {}, {})


@attrs.frozen
class Registration:
    """What a registration stored: the instance, and the version and schema version it runs."""

    instance: Record
    agent_version: Record
    schema_version: Record


@attrs.frozen
class _VersionRequest:
    external_identifier: str
    described: dict[str, Any]


@attrs.frozen
class _SchemaRequest:
    external_identifier: str | None
    declared: DeclaredSchemas


def _target(ctx: Context, fields: Fields) -> tuple[Record | None, Record | None]:
    """Resolve the agent and environment a registration is for.

    An ingestion token's own; else ``agent_id`` and ``environment_id`` (default: the
    account's default environment).
    """
    principal = ctx.principal
    assert principal is not None
    agent_id = fields.id("agent_id", required=not principal.is_ingestion)
    environment_id = fields.id("environment_id")
    if principal.is_ingestion:
        if agent_id not in (None, principal.agent_id) or environment_id not in (
            None, principal.environment_id
        ):
            raise NotPermitted("this token registers runs of its own agent and environment only")
        assert principal.agent_id is not None and principal.environment_id is not None
        agent = ctx.tables.agents.get(principal.agent_id)
        environment = ctx.tables.environments.get(principal.environment_id)
        if agent is None or environment is None:
            raise NotFound("the token's agent or environment no longer exists")
        return agent, environment
    agent = resolve_ref(ctx, fields, "agent_id", "agent", agent_id)
    if fields.raw("environment_id") is not None:
        return agent, resolve_ref(ctx, fields, "environment_id", "environment", environment_id)
    defaults = ctx.tables.environments.query(
        [tenant(ctx), Filter("is_default", "eq", True)], limit=1
    )
    if not defaults:
        fields.errors.required("environment_id", "the account has no default environment")
        return agent, None
    return agent, defaults[0]


def _read_version(fields: Fields) -> _VersionRequest | None:
    raw = fields.object("agent_version", required=True, nullable=False)
    if raw is None:
        return None
    member = Fields(raw)
    external_identifier = member.str(
        "external_identifier", required=True, max_length=IDENTIFIER_MAX
    )
    described: dict[str, Any] = {}
    for name in ("name", "description"):
        if member.has(name):
            described[name] = member.str(name, max_length=TEXT_MAX) or None
    if member.has("runtime_environment"):
        described["runtime_environment"] = member.object("runtime_environment")
    if member.errors:
        fields.errors.merge("agent_version", member.errors.to_error())
        return None
    assert external_identifier is not None
    return _VersionRequest(external_identifier, described)


def _read_schemas(fields: Fields) -> _SchemaRequest | None:
    raw = fields.object("agent_schema_version")
    if raw is None:
        return None
    member = Fields(raw)
    external_identifier = member.str("external_identifier", max_length=IDENTIFIER_MAX) or None
    declared = normalize_schemas(member.data, member.errors, ())
    if member.errors:
        fields.errors.merge("agent_schema_version", member.errors.to_error())
    return _SchemaRequest(external_identifier, declared)


def register_instance(ctx: Context, fields: Fields) -> Registration:
    """Register a run from the clients' register body (see the module docstring).

    Field problems are ``validation_errors``; a retired agent is ``invalid_action``; an ``id``
    or an ``external_identifier`` (per agent) already used is ``conflict``; an ingestion token
    naming another agent or environment is ``not_permitted``.
    """
    agent_record, environment = _target(ctx, fields)
    requested = read_supplied_id(ctx, fields)
    purpose = fields.str("purpose", choices=PURPOSES) or "live"
    external_identifier = fields.str("external_identifier", max_length=IDENTIFIER_MAX) or None
    make_current = fields.bool("update_current_version", default=True)
    version_request = _read_version(fields)
    schema_request = _read_schemas(fields)
    fields.done()
    assert agent_record is not None and environment is not None and version_request is not None
    agent = from_record(Agent, agent_record)
    if not allowed(AGENT, agent.status, "instance"):
        raise InvalidAction("the agent is retired; reinstate it to register new runs")
    # A look-up by equality, not a count: a batch's kept runs are matched in memory, where a
    # count would first write them out (an OpenTelemetry export registers a run a trace).
    if external_identifier is not None and ctx.tables.agent_instances.query([
        tenant(ctx),
        Filter("agent_id", "eq", agent.id),
        Filter("external_identifier", "eq", external_identifier),
    ], limit=1):
        raise Conflict(
            f"the agent already has a run with external_identifier {external_identifier!r}"
        )
    instance_id = claim_id(ctx, requested)

    existing = find_agent_version(ctx, agent.id, version_request.external_identifier)
    if schema_request is None and existing is not None:
        # A registration that declares no schemas keeps the version's own.
        schema_version = ctx.tables.agent_schema_versions.get(existing["agent_schema_version_id"])
        assert schema_version is not None
    else:
        schema_version = find_or_create_schema_version(
            ctx, agent_id=agent.id, environment_id=environment["id"],
            external_identifier=(
                schema_request.external_identifier if schema_request is not None else None
            ) or version_request.external_identifier,
            declared=NO_SCHEMAS if schema_request is None else schema_request.declared,
        )
    version = register_agent_version(
        ctx, existing, agent_id=agent.id, external_identifier=version_request.external_identifier,
        schema_version_id=schema_version["id"], described=version_request.described,
    )
    deployment = register_deployment(
        ctx, agent_id=agent.id, environment_id=environment["id"], version_id=version["id"],
        make_current=make_current,
    )
    instance = save(ctx, ctx.tables.agent_instances, AgentInstance(
        id=instance_id, account_id=ctx.account_id, agent_id=agent.id,
        agent_version_id=version["id"], agent_deployment_id=deployment.id,
        environment_id=environment["id"], agent_schema_version_id=schema_version["id"],
        purpose=purpose, status=initial(INSTANCE), inserted_at=ctx.now, updated_at=ctx.now,
        external_identifier=external_identifier,
    ))
    _count_registration(ctx, agent)
    return Registration(instance, version, schema_version)


def _count_registration(ctx: Context, agent: Agent) -> None:
    status = advance(AGENT, agent.status, "instance", what="agent")
    counts = {**empty_instance_counts(), **agent.instance_counts}
    counts["pending"] += 1
    counts["total"] += 1
    updated_at = ctx.now if status != agent.status else agent.updated_at
    save(ctx, ctx.tables.agents, attrs.evolve(
        agent, status=status, instance_counts=counts, last_instance_at=ctx.now,
        updated_at=updated_at,
    ))


@operation("agent_instances/register", write=True, scopes=ANY_SCOPE)
def register(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Register a run of an agent (pending until started)."""
    registration = register_instance(ctx, fields)
    return details_envelope(instance_details(ctx, registration.instance))
