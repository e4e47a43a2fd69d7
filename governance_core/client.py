"""Typed methods for embedders over the account operations (a mixin of ``Session``).

Each method builds the operation's members from keyword arguments, runs it through
``Session.call`` (so scope checks, idempotency and transactions are the same as over HTTP) and
answers the resource's ``details`` dict; list methods answer the whole list envelope
(``summaries``, ``pagination``, ``sorting``). Arguments left at :data:`UNSET` are not sent, so an
update changes only what is passed, and ``None`` clears a nullable field.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

import attrs

from governance_core.clock import format_timestamp

__all__ = ["UNSET", "AccountOperations", "Issued", "Unset"]


class Unset(enum.Enum):
    """The type of :data:`UNSET`."""

    UNSET = "UNSET"


UNSET = Unset.UNSET
"""An argument that is not sent at all (unlike ``None``, which is sent as null)."""


@attrs.frozen
class Issued:
    """A resource answered together with a secret that is shown this once."""

    details: dict[str, Any]
    token: str


class _Caller(Protocol):
    def call(
        self, operation: str, params: Mapping[str, Any] | None = None, **members: Any
    ) -> dict[str, Any]: ...


def _members(**values: Any) -> dict[str, Any]:
    """Return the members to send: UNSET dropped, datetimes in the library's form."""
    out: dict[str, Any] = {}
    for name, value in values.items():
        if value is UNSET:
            continue
        out[name] = format_timestamp(value) if isinstance(value, datetime) else value
    return out


def _list_members(
    offset: int | None, page_size: int | None, sorting: str | None, **filters: Any
) -> dict[str, Any]:
    members = {k: v for k, v in filters.items() if v is not None}
    if offset is not None:
        members["pagination[offset]"] = offset
    if page_size is not None:
        members["pagination[page_size]"] = page_size
    if sorting is not None:
        members["sorting"] = sorting
    return members


def _details(envelope: dict[str, Any]) -> dict[str, Any]:
    details: dict[str, Any] = envelope["details"]
    return details


def _issued(envelope: dict[str, Any]) -> Issued:
    return Issued(details=envelope["details"], token=envelope["token"])


class AccountOperations:
    """Typed calls of the account families.

    Accounts, teams, people, admin users, invites, API tokens, environments, risk profiles.
    """

    # -- accounts ------------------------------------------------------------------------
    def list_accounts(
        self: _Caller, *, offset: int | None = None, page_size: int | None = None,
        sorting: str | None = None,
    ) -> dict[str, Any]:
        """List the caller's account and its admin user's switchable accounts (envelope)."""
        return self.call("accounts/list", _list_members(offset, page_size, sorting))

    def show_account(self: _Caller) -> dict[str, Any]:
        """Fetch the caller's account."""
        return _details(self.call("accounts/show"))

    def update_account(
        self: _Caller, *, name: str | Unset = UNSET, purpose: str | Unset = UNSET,
        organisation_name: str | Unset | None = UNSET, website: str | Unset | None = UNSET,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Update the caller's account."""
        return _details(self.call("accounts/update", _members(
            name=name, purpose=purpose, organisation_name=organisation_name, website=website,
            idempotency_key=idempotency_key,
        )))

    # -- teams ---------------------------------------------------------------------------
    def list_teams(
        self: _Caller, *, offset: int | None = None, page_size: int | None = None,
        sorting: str | None = None,
    ) -> dict[str, Any]:
        """List a page of teams (envelope)."""
        return self.call("teams/list", _list_members(offset, page_size, sorting))

    def show_team(self: _Caller, team_id: str) -> dict[str, Any]:
        """Fetch a team."""
        return _details(self.call("teams/show", team_id=team_id))

    def create_team(
        self: _Caller, *, name: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Create a team."""
        return _details(self.call("teams/create", name=name, idempotency_key=idempotency_key))

    def update_team(
        self: _Caller, team_id: str, *, name: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Rename a team."""
        return _details(self.call(
            "teams/update", team_id=team_id, name=name, idempotency_key=idempotency_key
        ))

    # -- people --------------------------------------------------------------------------
    def list_people(
        self: _Caller, *, team_id: str | None = None, offset: int | None = None,
        page_size: int | None = None, sorting: str | None = None,
    ) -> dict[str, Any]:
        """List a page of people, optionally only those on ``team_id`` (envelope)."""
        return self.call("people/list", _list_members(offset, page_size, sorting, team_id=team_id))

    def show_person(self: _Caller, person_id: str) -> dict[str, Any]:
        """Fetch a person."""
        return _details(self.call("people/show", person_id=person_id))

    def create_person(
        self: _Caller, *, name: str, email: str, title: str | None = None,
        team_ids: Sequence[str] = (), id: str | None = None, idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Create a person, optionally with a chosen ``id`` and on ``team_ids``."""
        return _details(self.call("people/create", _members(
            name=name, email=email, title=title, team_ids=list(team_ids), id=id,
            idempotency_key=idempotency_key,
        )))

    def update_person(
        self: _Caller, person_id: str, *, name: str | Unset = UNSET, email: str | Unset = UNSET,
        title: str | Unset | None = UNSET, team_ids: Sequence[str] | Unset = UNSET,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Update a person; ``team_ids`` replaces the person's teams."""
        return _details(self.call("people/update", _members(
            person_id=person_id, name=name, email=email, title=title,
            team_ids=team_ids if isinstance(team_ids, Unset) else list(team_ids),
            idempotency_key=idempotency_key,
        )))

    # -- admin users and invites ---------------------------------------------------------
    def show_admin_user(self: _Caller, admin_user_id: str) -> dict[str, Any]:
        """Fetch an admin user of the account."""
        return _details(self.call("admin_users/show", admin_user_id=admin_user_id))

    def update_admin_user(
        self: _Caller, admin_user_id: str, *, name: str | Unset = UNSET,
        job_title: str | Unset | None = UNSET,
        profile_completed_at: datetime | Unset | None = UNSET,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Update the caller's own admin user profile."""
        return _details(self.call("admin_users/update", _members(
            admin_user_id=admin_user_id, name=name, job_title=job_title,
            profile_completed_at=profile_completed_at, idempotency_key=idempotency_key,
        )))

    def create_admin_user_invite(
        self: _Caller, *, email: str, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Invite ``email``; the details' ``token`` and ``invite_url`` carry the secret once."""
        return _details(self.call(
            "admin_user_invites/create", email=email, idempotency_key=idempotency_key
        ))

    def revoke_admin_user_invite(
        self: _Caller, admin_user_invite_id: str, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Revoke a pending invite."""
        return _details(self.call(
            "admin_user_invites/revoke", admin_user_invite_id=admin_user_invite_id,
            idempotency_key=idempotency_key,
        ))

    # -- API tokens ----------------------------------------------------------------------
    def list_api_tokens(
        self: _Caller, *, token_scope: str | None = None, status: str | None = None,
        offset: int | None = None, page_size: int | None = None, sorting: str | None = None,
    ) -> dict[str, Any]:
        """List a page of the account's tokens (envelope)."""
        return self.call("api_tokens/list", _list_members(
            offset, page_size, sorting, token_scope=token_scope, status=status
        ))

    def show_api_token(self: _Caller, api_token_id: str) -> dict[str, Any]:
        """Fetch a token (never its secret)."""
        return _details(self.call("api_tokens/show", api_token_id=api_token_id))

    def create_api_token(
        self: _Caller, *, token_scope: str = "account", agent_id: str | None = None,
        environment_id: str | None = None, expires_at: datetime | None = None,
        description: str | None = None, idempotency_key: str | None = None,
    ) -> Issued:
        """Create a token; the answer carries its secret, this once."""
        return _issued(self.call("api_tokens/create", _members(
            token_scope=token_scope, agent_id=agent_id, environment_id=environment_id,
            expires_at=expires_at, description=description, idempotency_key=idempotency_key,
        )))

    def suspend_api_token(
        self: _Caller, api_token_id: str, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Suspend an active token."""
        return _details(self.call(
            "api_tokens/suspend", api_token_id=api_token_id, idempotency_key=idempotency_key
        ))

    def activate_api_token(
        self: _Caller, api_token_id: str, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Activate a suspended token."""
        return _details(self.call(
            "api_tokens/activate", api_token_id=api_token_id, idempotency_key=idempotency_key
        ))

    def revoke_api_token(
        self: _Caller, api_token_id: str, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Revoke a token for good."""
        return _details(self.call(
            "api_tokens/revoke", api_token_id=api_token_id, idempotency_key=idempotency_key
        ))

    # -- environments --------------------------------------------------------------------
    def list_environments(
        self: _Caller, *, offset: int | None = None, page_size: int | None = None,
        sorting: str | None = None,
    ) -> dict[str, Any]:
        """List a page of environments (envelope)."""
        return self.call("environments/list", _list_members(offset, page_size, sorting))

    def show_environment(self: _Caller, environment_id: str) -> dict[str, Any]:
        """Fetch an environment."""
        return _details(self.call("environments/show", environment_id=environment_id))

    def create_environment(
        self: _Caller, *, name: str, purpose: str | None = None,
        external_identifier: str | None = None, description: str | None = None,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Create an environment."""
        return _details(self.call("environments/create", _members(
            name=name, purpose=purpose, external_identifier=external_identifier,
            description=description, idempotency_key=idempotency_key,
        )))

    def update_environment(
        self: _Caller, environment_id: str, *, name: str | Unset = UNSET,
        purpose: str | Unset = UNSET, external_identifier: str | Unset | None = UNSET,
        description: str | Unset | None = UNSET, idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Update an environment."""
        return _details(self.call("environments/update", _members(
            environment_id=environment_id, name=name, purpose=purpose,
            external_identifier=external_identifier, description=description,
            idempotency_key=idempotency_key,
        )))

    # -- risk profiles -------------------------------------------------------------------
    def list_risk_profiles(
        self: _Caller, *, offset: int | None = None, page_size: int | None = None,
        sorting: str | None = None,
    ) -> dict[str, Any]:
        """List a page of risk profiles (envelope)."""
        return self.call("risk_profiles/list", _list_members(offset, page_size, sorting))

    def show_risk_profile(self: _Caller, risk_profile_id: str) -> dict[str, Any]:
        """Fetch a risk profile."""
        return _details(self.call("risk_profiles/show", risk_profile_id=risk_profile_id))

    def create_risk_profile(
        self: _Caller, *, name: str, ruleset: Mapping[str, Any],
        description: str | None = None, idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Create a risk profile."""
        return _details(self.call("risk_profiles/create", _members(
            name=name, ruleset=dict(ruleset), description=description,
            idempotency_key=idempotency_key,
        )))

    def update_risk_profile(
        self: _Caller, risk_profile_id: str, *, name: str | Unset = UNSET,
        ruleset: Mapping[str, Any] | Unset = UNSET, description: str | Unset | None = UNSET,
        idempotency_key: str | None = None,
    ) -> dict[str, Any]:
        """Update a risk profile."""
        return _details(self.call("risk_profiles/update", _members(
            risk_profile_id=risk_profile_id, name=name,
            ruleset=ruleset if isinstance(ruleset, Unset) else dict(ruleset),
            description=description, idempotency_key=idempotency_key,
        )))

    def delete_risk_profile(
        self: _Caller, risk_profile_id: str, *, idempotency_key: str | None = None
    ) -> dict[str, Any]:
        """Delete a risk profile; answers it as it was."""
        return _details(self.call(
            "risk_profiles/delete", risk_profile_id=risk_profile_id,
            idempotency_key=idempotency_key,
        ))
