"""Accounts for the console tests, made through the core: a playground run, a running run with
an alert, a run whose payloads, names and summaries carry markup, and a run with failed spans
among its children."""

from __future__ import annotations

from typing import Any

import attrs

from governance_core.service import Governance, Session

XSS = "<script>alert(1)</script>"
ATTRIBUTE_BREAK = "\"'><img src=x onerror=alert(2)>"

SPAN_TYPES = [
    {
        "name": "tool",
        "params_schema": {"type": "object"},
        "template": "note {{ note }}",
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"personal_identifiers": "included"},
        },
    },
]
ALERT_SCHEMAS = [{"name": "slow_run", "schema": {"type": "object"}, "template": "{{ why }}"}]


@attrs.frozen
class Account:
    """One account's token, session and the ids the tests open."""

    name: str
    token: str
    token_id: str
    session: Session
    agent_id: str
    playground_run_id: str
    running_run_id: str
    running_root_span_id: str
    markup_run_id: str
    markup_span_id: str
    failing_run_id: str


def _register(session: Session, agent_id: str, version: str) -> dict[str, Any]:
    return session.details("agent_instances/register", {
        "agent_id": agent_id,
        "agent_version": {"name": "Markup", "external_identifier": version},
        "agent_schema_version": {
            "external_identifier": "schema-1",
            "span_type_schemas": SPAN_TYPES,
            "alert_schemas": ALERT_SCHEMAS,
        },
    })


def make_account(gov: Governance, name: str) -> Account:
    """An account with a playground run, a running run and a run full of markup."""
    boot = gov.bootstrap(account_name=name, admin_email=f"admin@{name}.example")
    session = gov.session(boot.token)
    agent = session.call("playground/create_loan_application_review_agent")["agent"]
    registered = session.call(
        "playground/register_loan_application_review_agent_instance", {"agent_id": agent["id"]}
    )["details"]
    session.call(
        "playground/record_loan_application_review_spans",
        {"agent_instance_id": registered["id"]},
    )
    running = session.call(
        "playground/register_loan_application_review_agent_instance", {"agent_id": agent["id"]}
    )["details"]
    root = session.details("agent_spans/create", {
        "agent_instance_id": running["id"], "schema_name": "llm", "status": "active",
        "payload": {"model": "gpt-4o-mini", "prompt": "Review application"},
    })
    session.details("agent_spans/create", {
        "agent_instance_id": running["id"], "schema_name": "tool", "status": "complete",
        "parent_span_id": root["id"], "payload": {"tool": "credit_bureau"},
    })
    session.call("alerts/raise", {
        "agent_instance_id": running["id"], "name": "affordability_concern",
        "severity": "warning", "payload": {"ratio": 0.61},
    })
    markup_agent = session.details("agents/create", {
        "name": f"{name} {XSS}", "description": ATTRIBUTE_BREAK,
    })
    markup_run = _register(session, markup_agent["id"], f"v-{ATTRIBUTE_BREAK}")
    markup_span = session.details("agent_spans/create", {
        "agent_instance_id": markup_run["id"], "schema_name": "tool", "status": "complete",
        "payload": {"note": XSS, ATTRIBUTE_BREAK: ATTRIBUTE_BREAK,
                    "secret": {"$sensitive": "string", "labels": ["pii"], "value": "AB123456C"}},
        "sensitive_encoding": True,
    })
    session.details("agent_spans/create", {
        "agent_instance_id": markup_run["id"], "schema_name": XSS, "status": "failed",
        "payload": {"x": ATTRIBUTE_BREAK},
    })
    session.call("alerts/raise", {
        "agent_instance_id": markup_run["id"], "name": "slow_run", "severity": "error",
        "payload": {"why": XSS},
    })
    failing = session.call(
        "playground/register_loan_application_review_agent_instance", {"agent_id": agent["id"]}
    )["details"]
    step = None
    for index in range(24):
        made = session.details("agent_spans/create", {
            "agent_instance_id": failing["id"], "schema_name": "llm" if index % 4 else "tool",
            "status": "failed" if index % 5 == 2 else "complete",
            "parent_span_id": step if index % 4 else None,
            "payload": {"model": "gpt-4o-mini", "prompt": f"Attempt {index}"}
            if index % 4 else {"tool": f"lookup_{index // 4}"},
        })
        if index % 4 == 0:
            step = made["id"]
    return Account(
        name=name, token=boot.token, token_id=boot.token_id, session=session,
        agent_id=agent["id"], playground_run_id=registered["id"],
        running_run_id=running["id"], running_root_span_id=root["id"],
        markup_run_id=markup_run["id"], markup_span_id=markup_span["id"],
        failing_run_id=failing["id"],
    )
