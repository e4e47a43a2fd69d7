"""A run to decide for: an agent, a schema whose span types declare data risk, spans.

Prices are overridden so a run's cost is exact: ``test-model`` costs one micro-dollar an
input token and two an output token.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import attrs

from governance_core.context import Config
from governance_core.encryption import PlaintextForTests
from governance_core.rules.cost import load_catalogue
from governance_core.service import Bootstrap, Governance, Session

PRICES = load_catalogue({
    "test-model": {"input_cost_per_token": 1e-6, "output_cost_per_token": 2e-6},
})
CONFIG = Config(cipher=PlaintextForTests(), pricing=PRICES)

SPAN_TYPES: list[dict[str, Any]] = [
    {"name": "llm", "params_schema": {"type": "object"}},
    {
        "name": "crm.read_patient",
        "params_schema": {"type": "object"},
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {
                "health_and_medical": "included", "classification": "restricted",
            },
        },
    },
    {
        "name": "crm.read_order",
        "params_schema": {"type": "object"},
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"contact_information": "included",
                                       "classification": "internal"},
        },
    },
    {
        "name": "email.send",
        "params_schema": {"type": "object"},
        "data_risk": {"action_profile": {"external_communication": "allowed"}},
    },
]


def configured(gov: Governance) -> Governance:
    """``gov`` pricing ``test-model`` (see the module)."""
    gov.config = CONFIG
    return gov


@attrs.define
class RunWorld:
    """An account's session, an agent and helpers to make runs and decide for them."""

    gov: Governance
    boot: Bootstrap
    session: Session
    agent_id: str

    def run(self, agent_id: str | None = None, environment_id: str | None = None) -> str:
        """A new started run of the agent (or of ``agent_id``); its id."""
        body: dict[str, Any] = {
            "agent_id": agent_id or self.agent_id,
            "agent_version": {"external_identifier": "1.0.0"},
            "agent_schema_version": {
                "external_identifier": "schema-1", "span_type_schemas": SPAN_TYPES,
            },
        }
        if environment_id is not None:
            body["environment_id"] = environment_id
        run_id: str = self.session.details("agent_instances/register", body)["id"]
        self.session.call("agent_instances/start", {"agent_instance_id": run_id})
        return run_id

    def span(self, run_id: str, schema_name: str, **payload: Any) -> None:
        """Record a complete activity span of ``schema_name`` on the run."""
        self.session.call("agent_spans/create", {
            "agent_instance_id": run_id, "schema_name": schema_name, "status": "complete",
            "payload": payload,
        })

    def spend(self, run_id: str, input_tokens: int, output_tokens: int = 0) -> None:
        """Record a model span of ``test-model`` using these tokens."""
        self.span(run_id, "llm", model="test-model",
                  usage={"input_tokens": input_tokens, "output_tokens": output_tokens})

    def policy(self, source: str, **members: Any) -> dict[str, Any]:
        """Create a policy; its details."""
        body = {"name": members.pop("name", "policy"), "source": source, **members}
        return self.session.details("policies/create", body)

    def decide(self, run_id: str, kind: str, name: str, args: dict[str, Any] | None = None,
               session: Session | None = None, **members: Any) -> dict[str, Any]:
        """Decide an action for the run; the decision."""
        action: dict[str, Any] = {"kind": kind, "name": name, "args": args or {}}
        action.update(members.pop("action_members", {}))
        return (session or self.session).details(
            "decisions/decide", {"agent_instance_id": run_id, "action": action, **members}
        )


def run_world(gov: Governance, boot: Bootstrap) -> RunWorld:
    """A :class:`RunWorld` over the bootstrapped account of ``gov`` (pricing configured)."""
    configured(gov)
    session = gov.session(boot.token)
    agent_id = session.details("agents/create", {"name": "Support bot"})["id"]
    return RunWorld(gov, boot, session, agent_id)


@contextmanager
def beside_another_process(location: str | Path) -> Iterator[tuple[RunWorld, Governance]]:
    """A run world on the store at ``location``, and a second facade on it (another process's)."""
    with Governance.open(location, config=CONFIG) as first, Governance.open(
        location, config=CONFIG
    ) as second:
        yield run_world(first, first.bootstrap()), second
