"""Two populated accounts and call shorthands, for the tests of the account families."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import attrs
import pytest

from governance_core.clock import FixedClock
from governance_core.context import Principal
from governance_core.converter import to_record
from governance_core.errors import GovernanceError, ValidationErrors
from governance_core.ids import SeededIds
from governance_core.models.agents import Agent
from governance_core.service import Bootstrap, Governance, Session
from tests.stores import kind_of, make_store

RULESET: dict[str, Any] = {
    "category_weights": {"personal_identifiers": 8, "contact_information": 4},
    "action_multipliers": {"read_data": 1, "destroy_data": 2.5},
    "thresholds": {"medium": 10, "high": 50, "critical": 200},
}


@attrs.frozen
class Tenant:
    """A bootstrapped account with one resource of each account family."""

    boot: Bootstrap
    session: Session
    team_id: str
    person_id: str
    environment_id: str
    risk_profile_id: str
    invite_id: str
    invite_token: str
    api_token_id: str
    api_token: str

    @property
    def principal(self) -> Principal:
        return self.session.principal

    def ids(self) -> set[str]:
        """Every id of this account's resources (for "never appears in a list" checks)."""
        return {
            self.boot.account_id, self.boot.admin_user_id, self.boot.environment_id,
            self.boot.risk_profile_id, self.boot.token_id, self.team_id, self.person_id,
            self.environment_id, self.risk_profile_id, self.invite_id, self.api_token_id,
        }


@attrs.frozen
class World:
    """Two accounts on one store: ``a`` is the caller, ``b`` the other tenant."""

    gov: Governance
    a: Tenant
    b: Tenant


def populate(gov: Governance, boot: Bootstrap, domain: str) -> Tenant:
    """Give ``boot``'s account a team, a person on it, an environment, a risk profile, a
    pending invite and a spare account token."""
    session = gov.session(boot.token)
    team = session.create_team(name="Core")
    person = session.create_person(name="Pat", email=f"pat@{domain}", team_ids=[team["id"]])
    environment = session.create_environment(name="Staging", purpose="staging")
    profile = session.create_risk_profile(name="Strict", ruleset=RULESET)
    invite = session.create_admin_user_invite(email=f"new@{domain}")
    spare = session.create_api_token(description="spare")
    return Tenant(
        boot=boot, session=session, team_id=team["id"], person_id=person["id"],
        environment_id=environment["id"], risk_profile_id=profile["id"],
        invite_id=invite["id"], invite_token=invite["token"],
        api_token_id=spare.details["id"], api_token=spare.token,
    )


def build_world(gov: Governance) -> World:
    """Bootstrap and populate two accounts on ``gov``."""
    a = gov.bootstrap(account_name="Acme", admin_email="admin@acme.test", admin_name="Ada")
    b = gov.bootstrap(account_name="Globex", admin_email="admin@globex.test")
    return World(gov, populate(gov, a, "acme.test"), populate(gov, b, "globex.test"))


def twin(gov: Governance) -> Governance:
    """A second facade like the ``gov`` fixture's (same store kind, seed and clock start)."""
    return Governance(make_store(kind_of(gov.store)), clock=FixedClock(), ids=SeededIds(7))


def ingestion(tenant: Tenant) -> Principal:
    """An ``agent_deployment`` caller of the tenant's account."""
    return attrs.evolve(
        tenant.principal, scope="agent_deployment", admin_user_id=None,
        agent_id=add_agent(tenant), environment_id=tenant.environment_id,
    )


def add_agent(tenant: Tenant, **members: Any) -> str:
    """Store an agent record in the tenant's account directly; its id."""
    gov = tenant.session.governance
    ctx = gov.context(tenant.principal)
    agent = Agent(
        id=ctx.new_id(), account_id=tenant.boot.account_id, name="Bot", status="pending",
        inserted_at=ctx.now, updated_at=ctx.now, **members,
    )
    gov.store.put("agents", to_record(agent))
    return agent.id


def fails(call: Callable[..., Any], *args: Any, **kwargs: Any) -> GovernanceError:
    """The GovernanceError that ``call`` raises (the test fails when it raises none)."""
    with pytest.raises(GovernanceError) as caught:
        call(*args, **kwargs)
    return caught.value


def field_codes(error: GovernanceError) -> Any:
    """A validation error as a tree of codes: ``{"team_ids": {"0": "invalid_value"}}``."""
    if isinstance(error, ValidationErrors):
        return {name: field_codes(inner) for name, inner in error.errors.items()}
    return error.code


def canonical(value: Any) -> str:
    """The JSON text two outputs are compared by."""
    return json.dumps(value, sort_keys=True)


def strip_secrets(value: Any) -> Any:
    """``value`` without the members that carry random secrets (``token``, ``invite_url``)."""
    if isinstance(value, dict):
        return {
            key: strip_secrets(item) for key, item in value.items()
            if key not in ("token", "invite_url")
        }
    if isinstance(value, list):
        return [strip_secrets(item) for item in value]
    return value
