"""Helpers: a run to raise alerts on, destinations, and reading what a receiver got."""

from __future__ import annotations

import json
from typing import Any

from standardwebhooks.webhooks import Webhook

from tests.core.runs import Caller, make_agent, register
from tests.notifications.conftest import Received


def new_run(caller: Caller) -> str:
    """Register a run of a new agent; its id."""
    agent = make_agent(caller, name=f"Agent {len(caller.call('agents/list')['summaries'])}")
    run_id: str = register(caller, agent["id"])["id"]
    return run_id


def destination(caller: Caller, url: str, **members: Any) -> tuple[dict[str, Any], str]:
    """Create a destination; its details and its secret (shown this once)."""
    envelope = caller.call("destinations/create", name=members.pop("name", "hook"), url=url,
                           **members)
    return envelope["details"], envelope["secret"]


def raise_alert(caller: Caller, run_id: str, name: str = "slow",
                severity: str = "warning") -> dict[str, Any]:
    """Raise an alert on the run."""
    alert: dict[str, Any] = caller.details(
        "alerts/raise", agent_instance_id=run_id, name=name, severity=severity,
        payload={"n": name},
    )
    return alert


def verified(secret: str, request: Received) -> dict[str, Any]:
    """The request's payload, verified by the Standard Webhooks library (raises otherwise)."""
    payload: dict[str, Any] = Webhook(secret).verify(request.body, request.headers)
    return payload


def deliveries(caller: Caller, **filters: Any) -> list[dict[str, Any]]:
    """The account's deliveries, oldest first."""
    rows: list[dict[str, Any]] = caller.call(
        "deliveries/list", sorting="id", pagination={"page_size": 100}, **filters
    )["summaries"]
    return rows


def body_of(request: Received) -> dict[str, Any]:
    """The request's JSON body."""
    result: dict[str, Any] = json.loads(request.body)
    return result
