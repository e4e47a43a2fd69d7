"""Typed records: attrs frozen classes mirroring what is stored, grouped by family.

Each resource's model is its one description (:mod:`governance_core.models.description`):
what it stores as columns, what its views show and what the server alone sets.
"""

from governance_core.models.accounts import (
    Account,
    AdminUser,
    AdminUserInvite,
    ApiToken,
    Environment,
    Person,
    RiskProfile,
    Team,
)
from governance_core.models.agents import (
    Agent,
    AgentDeployment,
    AgentInstance,
    AgentSchemaVersion,
    AgentSpan,
    AgentVersion,
    Alert,
)
from governance_core.models.notifications import Delivery, Destination, Monitor, NotificationEvent
from governance_core.models.policies import Approval, Decision, Policy

__all__ = ["RESOURCE_MODELS"]

RESOURCE_MODELS: tuple[type, ...] = (
    Account, AdminUser, AdminUserInvite, ApiToken, Person, Team, Environment, RiskProfile,
    AgentDeployment, Agent, AgentVersion, AgentSchemaVersion, AgentInstance, AgentSpan, Alert,
    Monitor, Destination, Delivery, NotificationEvent, Policy, Decision, Approval,
)
"""The model of every resource the interface serves, in the order its reference lists them."""
