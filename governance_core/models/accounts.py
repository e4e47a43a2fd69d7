"""Accounts and who acts in them: admin users, invites, tokens, people, teams, environments."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

from governance_core.models.description import described, enum, resource
from governance_core.rules.states import TOKEN, states

__all__ = [
    "ACCOUNT_PURPOSES",
    "Account",
    "AdminUser",
    "AdminUserInvite",
    "ApiToken",
    "ENVIRONMENT_PURPOSES",
    "Environment",
    "Person",
    "RiskProfile",
    "TOKEN_SCOPES",
    "Team",
    "TeamMembership",
]

ACCOUNT_PURPOSES = ("business", "personal", "nonprofit", "education", "government")
"""What an account is for."""

ENVIRONMENT_PURPOSES = ("production", "staging", "development", "testing", "other")
"""What an environment is for."""

TOKEN_SCOPES = ("account", "agent_deployment")
"""What an API token reaches: its whole account, or one agent deployment's runs."""


@resource("account")
@attrs.frozen
class Account:
    """A tenant: everything else belongs to exactly one account."""

    id: str
    account_id: str = attrs.field(metadata=described(shown=False))
    name: str = attrs.field(metadata=described(column=True))
    partition: int = attrs.field(metadata=described(column=True, shown=False))
    purpose: str = attrs.field(metadata=described(notation=enum(*ACCOUNT_PURPOSES), column=True))
    inserted_at: datetime
    updated_at: datetime
    organisation_name: str | None = None
    promo_code: str | None = attrs.field(default=None, metadata=described(column=True))
    website: str | None = attrs.field(default=None, metadata=described(column=True))


@resource("admin_user", switchable_account_summaries="list:obj")
@attrs.frozen
class AdminUser:
    """A login that manages an account."""

    id: str
    account_id: str
    email: str = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime
    name: str | None = attrs.field(default=None, metadata=described(column=True))
    job_title: str | None = attrs.field(default=None, metadata=described(column=True))
    last_active_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    profile_completed_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True)
    )
    email_vouched: bool = attrs.field(default=False, metadata=described(shown=False))
    """Whether the email was given by the operator (bootstrap), so it may link accounts."""


@resource("admin_user_invite", invite_url="str", token="str?")
@attrs.frozen
class AdminUserInvite:
    """An invitation for a new admin user; only a hash of its token is stored."""

    id: str
    account_id: str
    email: str = attrs.field(metadata=described(column=True))
    status: str = attrs.field(metadata=described(column=True, managed=True))
    token_hash: str = attrs.field(metadata=described(column=True, shown=False))
    expires_at: datetime = attrs.field(metadata=described(column=True))
    invited_by_admin_user_id: str | None = attrs.field(metadata=described(shown=False))
    inserted_at: datetime
    updated_at: datetime
    accepted_admin_user_id: str | None = attrs.field(default=None, metadata=described(shown=False))


@resource("api_token")
@attrs.frozen
class ApiToken:
    """An access token; only a SHA-256 hash of its secret is stored."""

    id: str
    account_id: str
    token_hash: str = attrs.field(metadata=described(column=True, shown=False))
    token_scope: str = attrs.field(metadata=described(notation=enum(*TOKEN_SCOPES), column=True))
    status: str = attrs.field(
        metadata=described(notation=enum(*states(TOKEN)), column=True, managed=True)
    )
    inserted_at: datetime
    updated_at: datetime
    admin_user_id: str | None = attrs.field(default=None, metadata=described(column=True))
    agent_id: str | None = attrs.field(default=None, metadata=described(column=True))
    environment_id: str | None = attrs.field(default=None, metadata=described(column=True))
    expires_at: datetime | None = attrs.field(default=None, metadata=described(column=True))
    last_used_at: datetime | None = attrs.field(
        default=None, metadata=described(column=True, managed=True)
    )
    description: str | None = None


@resource("environment")
@attrs.frozen
class Environment:
    """Where agents run (production, staging, ...)."""

    id: str
    account_id: str
    name: str = attrs.field(metadata=described(column=True))
    purpose: str = attrs.field(
        metadata=described(notation=enum(*ENVIRONMENT_PURPOSES), column=True)
    )
    inserted_at: datetime
    updated_at: datetime
    external_identifier: str | None = attrs.field(default=None, metadata=described(column=True))
    description: str | None = None
    is_default: bool = attrs.field(default=False, metadata=described(column=True))


@resource("risk_profile")
@attrs.frozen
class RiskProfile:
    """A named ruleset that turns data-risk declarations into scores."""

    id: str
    account_id: str
    name: str = attrs.field(metadata=described(column=True))
    ruleset: dict[str, Any]
    inserted_at: datetime
    updated_at: datetime
    description: str | None = None
    is_default: bool = attrs.field(default=False, metadata=described(column=True))


@resource("person", team_ids="ids")
@attrs.frozen
class Person:
    """A human who can own agents."""

    id: str
    account_id: str = attrs.field(metadata=described(shown=False))
    name: str = attrs.field(metadata=described(column=True))
    email: str = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime
    title: str | None = None


@resource("team", agent_count="int", people_count="int")
@attrs.frozen
class Team:
    """A group of people, to which agents are assigned."""

    id: str
    account_id: str = attrs.field(metadata=described(shown=False))
    name: str = attrs.field(metadata=described(column=True))
    inserted_at: datetime
    updated_at: datetime


@resource("team_membership")
@attrs.frozen
class TeamMembership:
    """A person on a team."""

    id: str
    account_id: str
    team_id: str = attrs.field(metadata=described(column=True))
    person_id: str = attrs.field(metadata=described(column=True))
    inserted_at: datetime
