"""Helpers for the agent-run tests: callers, agents and registrations in a few words."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import attrs

from governance_core.clock import FixedClock
from governance_core.context import Config, Principal
from governance_core.encryption import PlaintextForTests
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap, Governance
from tests.stores import make_store

SPAN_TYPES = [
    {
        "name": "langchain:llm",
        "params_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
        "result_schema": {"type": "object"},
        "template": "{{ prompt }}",
        "data_risk": {"action_profile": {"read_data": "allowed"}},
    },
    {"name": "langchain:tool", "params_schema": {"type": "object"}},
]


@attrs.frozen
class Caller:
    """Runs operations on a governance facade as one principal."""

    gov: Governance
    principal: Principal

    def call(self, operation: str, params: dict[str, Any] | None = None, **members: Any) -> Any:
        return self.gov.call(operation, {**(params or {}), **members}, principal=self.principal)

    def details(self, operation: str, params: dict[str, Any] | None = None, **members: Any) -> Any:
        return self.call(operation, params, **members)["details"]

    def ingestion(self, agent_id: str, environment_id: str) -> Caller:
        """A caller with an agent_deployment token's reach, in the same account."""
        return Caller(
            self.gov,
            attrs.evolve(
                self.principal, scope="agent_deployment", token_id=None, admin_user_id=None,
                agent_id=agent_id, environment_id=environment_id,
            ),
        )


def account_caller(gov: Governance, boot: Bootstrap) -> Caller:
    """The bootstrapped admin's account token, as a caller.

    A fixed clock is made to tick a millisecond a call: ids carry millisecond time, so the
    default list order (by id) is then creation order.
    """
    if isinstance(gov.clock, FixedClock):
        gov.clock.step = timedelta(milliseconds=1)
    return Caller(gov, gov.authenticate(boot.token))


def fresh_caller(store: str) -> Caller:
    """A bootstrapped account on a new store of kind ``store`` (for Hypothesis tests, which
    cannot use function-scoped fixtures)."""
    gov = Governance(make_store(store), clock=FixedClock(), ids=SeededIds(11),
                     config=Config(cipher=PlaintextForTests()))
    return account_caller(gov, gov.bootstrap())


def make_agent(caller: Caller, name: str = "Loan reviewer", **details: Any) -> dict[str, Any]:
    """Create an agent; its details."""
    result: dict[str, Any] = caller.details("agents/create", {"details": {"name": name, **details}})
    return result


def register_body(
    agent_id: str | None = None,
    *,
    version: str = "1.0.0",
    schema: str = "s1",
    span_type_schemas: Any = None,
    **extra: Any,
) -> dict[str, Any]:
    """A register body as the clients send it."""
    body: dict[str, Any] = {
        "agent_version": {"name": "Reviewer", "external_identifier": version},
        "agent_schema_version": {
            "external_identifier": schema,
            "span_type_schemas": SPAN_TYPES if span_type_schemas is None else span_type_schemas,
        },
        **extra,
    }
    if agent_id is not None:
        body["agent_id"] = agent_id
    return body


def register(caller: Caller, agent_id: str | None, **extra: Any) -> dict[str, Any]:
    """Register a run; its details."""
    body = register_body(agent_id, **extra)
    result: dict[str, Any] = caller.details("agent_instances/register", body)
    return result
