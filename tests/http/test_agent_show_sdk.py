"""``GET /api/v1/agent/show`` as prefactor-http's ``agents.show()`` sends it, against a server.

The SDK method itself is called, by ``agent_id`` and by ``external_identifier``, with
``environment_id``, ``include_counts`` and ``include_risk_rollup``; an unknown agent raises the
SDK's not-found error. The bulk item ``agents/show`` takes ``external_identifier`` too.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prefactor_http import HttpClientConfig, PrefactorHttpClient
from prefactor_http.exceptions import PrefactorNotFoundError
from prefactor_http.models.bulk import BulkItem, BulkRequest

from governance_core import Governance
from tests.http.server import Served

pytestmark = pytest.mark.slow

PII = {
    "name": "read_pii",
    "params_schema": {"type": "object"},
    "data_risk": {
        "action_profile": {"read_data": "allowed"},
        "params_data_categories": {"personal_identifiers": "included"},
    },
}


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Served, str, dict[str, Any]]]:
    db = tmp_path / "show.db"
    with Governance.open(db) as gov:
        made = gov.bootstrap()
        session = gov.session(made.token)
        agent = session.details(
            "agents/create", {"name": "Reviewer", "external_identifier": "reviewer-7"}
        )
        staging = session.details("environments/create", {"name": "Staging"})
        runs = []
        for environment_id in (made.environment_id, made.environment_id, staging["id"]):
            run = session.details("agent_instances/register", {
                "agent_id": agent["id"], "environment_id": environment_id,
                "agent_version": {"name": "Reviewer", "external_identifier": "1"},
                "agent_schema_version": {"external_identifier": "s", "span_type_schemas": [PII]},
            })
            runs.append(run)
        session.call("agent_instances/start", {"agent_instance_id": runs[0]["id"]})
        session.call("agent_spans/create", {
            "agent_instance_id": runs[0]["id"], "schema_name": "read_pii", "status": "complete",
            "payload": {},
        })
        facts = {
            "agent_id": agent["id"], "default": made.environment_id, "staging": staging["id"],
        }
    server = Served(db)
    try:
        server.wait_ready()
        yield server, made.token, facts
    finally:
        server.stop()


async def shows(server: Served, token: str, facts: dict[str, Any]) -> dict[str, Any]:
    http = HttpClientConfig(api_url=server.base_url, api_token=token, max_retries=0)
    async with PrefactorHttpClient(http) as client:
        by_id = await client.agents.show(agent_id=facts["agent_id"], include_counts=True)
        by_identifier = await client.agents.show(
            external_identifier="reviewer-7", environment_id=facts["staging"],
            include_counts=True, include_risk_rollup=True,
        )
        raw = await client.request("GET", "/api/v1/agent/show", params={
            "agent_id": facts["agent_id"], "environment_id": facts["default"],
            "include_risk_rollup": "true",
        })
        with pytest.raises(PrefactorNotFoundError):
            await client.agents.show(external_identifier="nobody")
        bulk = await client.bulk.execute(BulkRequest(items=[
            BulkItem(  # type: ignore[call-arg]
                _type="agents/show", idempotency_key="show-by-identifier",
                external_identifier="reviewer-7",
            ),
        ]))
        return {
            "by_id": by_id, "by_identifier": by_identifier, "raw": raw,
            "bulk": {key: output.model_dump() for key, output in bulk.outputs.items()},
        }


def test_agents_show_by_id_and_by_external_identifier(
    served: tuple[Served, str, dict[str, Any]],
) -> None:
    server, token, facts = served
    seen = asyncio.run(shows(server, token, facts))
    by_id = seen["by_id"]
    assert by_id.id == facts["agent_id"] and by_id.external_identifier == "reviewer-7"
    assert by_id.instance_counts is not None
    assert (by_id.instance_counts.total, by_id.instance_counts.active) == (3, 1)
    staged = seen["by_identifier"]
    assert staged.id == facts["agent_id"]
    assert staged.instance_counts is not None
    assert (staged.instance_counts.total, staged.instance_counts.pending) == (1, 1)
    rollup = seen["raw"]["details"]["risk_rollup"]
    assert rollup["instance_count"] == 2 and rollup["assessed_instance_count"] == 1
    assert rollup["risk_level"] is not None and rollup["max_total_score"] > 0
    assert sum(rollup["level_counts"].values()) == 1
    output = seen["bulk"]["show-by-identifier"]
    assert output["status"] == "success"
