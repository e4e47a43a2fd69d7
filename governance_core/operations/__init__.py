"""Operation modules, one per family; importing this package registers every operation."""

from governance_core.operations import (
    accounts,
    admin_user_invites,
    admin_users,
    agent_deployments,
    agent_instances,
    agent_schema_versions,
    agent_versions,
    agents,
    api_tokens,
    environments,
    people,
    registration,
    risk_profiles,
    teams,
)

__all__ = [
    "accounts",
    "admin_user_invites",
    "admin_users",
    "agent_deployments",
    "agent_instances",
    "agent_schema_versions",
    "agent_versions",
    "agents",
    "api_tokens",
    "environments",
    "people",
    "registration",
    "risk_profiles",
    "teams",
]
