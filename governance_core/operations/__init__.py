"""Operation modules, one per family; importing this package registers every operation."""

from governance_core.operations import (
    accounts,
    admin_user_invites,
    admin_users,
    api_tokens,
    environments,
    people,
    risk_profiles,
    teams,
)

__all__ = [
    "accounts",
    "admin_user_invites",
    "admin_users",
    "api_tokens",
    "environments",
    "people",
    "risk_profiles",
    "teams",
]
