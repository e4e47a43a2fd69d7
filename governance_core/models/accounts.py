"""Accounts and who acts in them: admin users, invites, tokens, people, teams, environments."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import attrs

__all__ = [
    "Account",
    "AdminUser",
    "AdminUserInvite",
    "ApiToken",
    "Environment",
    "Person",
    "RiskProfile",
    "Team",
    "TeamMembership",
]


@attrs.frozen
class Account:
    """A tenant: everything else belongs to exactly one account."""

    id: str
    account_id: str
    name: str
    partition: int
    purpose: str
    inserted_at: datetime
    updated_at: datetime
    organisation_name: str | None = None
    promo_code: str | None = None
    website: str | None = None


@attrs.frozen
class AdminUser:
    """A login that manages an account."""

    id: str
    account_id: str
    email: str
    inserted_at: datetime
    updated_at: datetime
    name: str | None = None
    job_title: str | None = None
    last_active_at: datetime | None = None
    profile_completed_at: datetime | None = None
    email_vouched: bool = False
    """Whether the email was given by the operator (bootstrap), so it may link accounts."""


@attrs.frozen
class AdminUserInvite:
    """An invitation for a new admin user; only a hash of its token is stored."""

    id: str
    account_id: str
    email: str
    status: str
    token_hash: str
    expires_at: datetime
    invited_by_admin_user_id: str | None
    inserted_at: datetime
    updated_at: datetime
    accepted_admin_user_id: str | None = None


@attrs.frozen
class ApiToken:
    """An access token; only a SHA-256 hash of its secret is stored."""

    id: str
    account_id: str
    token_hash: str
    token_scope: str
    status: str
    inserted_at: datetime
    updated_at: datetime
    admin_user_id: str | None = None
    agent_id: str | None = None
    environment_id: str | None = None
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    description: str | None = None


@attrs.frozen
class Environment:
    """Where agents run (production, staging, ...)."""

    id: str
    account_id: str
    name: str
    purpose: str
    inserted_at: datetime
    updated_at: datetime
    external_identifier: str | None = None
    description: str | None = None
    is_default: bool = False


@attrs.frozen
class RiskProfile:
    """A named ruleset that turns data-risk declarations into scores."""

    id: str
    account_id: str
    name: str
    ruleset: dict[str, Any]
    inserted_at: datetime
    updated_at: datetime
    description: str | None = None
    is_default: bool = False


@attrs.frozen
class Person:
    """A human who can own agents."""

    id: str
    account_id: str
    name: str
    email: str
    inserted_at: datetime
    updated_at: datetime
    title: str | None = None


@attrs.frozen
class Team:
    """A group of people, to which agents are assigned."""

    id: str
    account_id: str
    name: str
    inserted_at: datetime
    updated_at: datetime


@attrs.frozen
class TeamMembership:
    """A person on a team."""

    id: str
    account_id: str
    team_id: str
    person_id: str
    inserted_at: datetime
