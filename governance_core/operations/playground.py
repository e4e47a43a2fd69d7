"""The playground: a loan application review agent, its schemas and a recorded demo run.

Three operations let a new account see the service work end to end:

- ``playground/create_loan_application_review_agent`` creates the demo agent;
- ``playground/register_loan_application_review_agent_instance`` registers a run of an agent
  with the demo schemas (span types ``llm``, ``tool``, a tool type per check and
  ``decision_letter``, each with the data_risk a reviewer would declare; an alert schema
  ``affordability_concern``; a quality schema ``decision_quality``);
- ``playground/record_loan_application_review_spans`` records a realistic run on it: LLM calls
  to three real models reporting token usage in the clients' forms, a credit bureau check, an
  identity document check with the applicant's national id sent as a sensitive value, an
  income check, a decision letter, an affordability alert and a quality evaluation; it
  answers the ids of the spans it recorded (``ids``) and of the alert it raised
  (``alert_ids``).

Each step runs the registered operation a client would call, in the playground operation's
transaction, so the demo goes through exactly the checks, aggregates and rules a client's
requests go through.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any, Final

from governance_core.clock import format_timestamp
from governance_core.context import Context
from governance_core.envelopes import success
from governance_core.errors import InvalidValue
from governance_core.fields import Fields
from governance_core.operations.agent_instances import instance_details, load_instance
from governance_core.operations.agent_schema_versions import schema_version_full
from governance_core.operations.agent_versions import agent_version_details
from governance_core.operations.common import load_record
from governance_core.operations.registration import register_instance
from governance_core.registry import operation

__all__ = ["AGENT", "AGENT_VERSION", "SCHEMA_VERSION"]

AGENT: Final[dict[str, Any]] = {
    "name": "Loan application review agent",
    "description": (
        "Playground agent: reviews a consumer loan application (identity, credit, income, "
        "affordability) and drafts the decision letter."
    ),
}
"""The demo agent's details."""

AGENT_VERSION: Final[dict[str, Any]] = {
    "name": "Loan application review agent",
    "external_identifier": "loan-review-1.0.0",
    "description": "LangChain agent with bureau, identity and income tools",
    "runtime_environment": {
        "packages": [
            "langchain-core==0.3.75",
            "langchain-openai==0.3.32",
            "langchain-anthropic==0.3.20",
        ],
    },
}
"""The demo agent version."""

_OBJECT: Final = {"type": "object"}
_MARKER: Final = {
    "type": "object",
    "required": ["$sensitive"],
    "properties": {"$sensitive": {"enum": ["string"]}},
}

SPAN_TYPES: Final[list[dict[str, Any]]] = [
    {
        "name": "llm",
        "title": "LLM call",
        "params_schema": {
            "type": "object",
            "required": ["purpose"],
            "properties": {
                "purpose": {"type": "string"},
                "messages": {"type": "array"},
            },
        },
        "result_schema": {"type": "object", "properties": {"content": {"type": "string"}}},
        "template": (
            "{{ model_name | default: model }} ({{ provider | default: \"unknown provider\" }}): "
            "{{ purpose }}"
        ),
        # The prompts carry the applicant's identity and finances; the answers are the
        # model's inferences about them.
        "data_risk": {
            "action_profile": {"read_data": "allowed", "external_communication": "disallowed"},
            "params_data_categories": {
                "personal_identifiers": "included",
                "financial_information": "included",
                "classification": "confidential",
            },
            "result_data_categories": {
                "behavioural_and_inferred": "included",
                "classification": "confidential",
            },
        },
    },
    {
        "name": "tool",
        "title": "Tool call",
        "params_schema": {"type": "object", "required": ["tool_name"]},
        "result_schema": _OBJECT,
        "template": "{{ tool_name }}: {{ outcome | default: \"no outcome\" }}",
        # The generic tool reads the lender's internal lending policy only.
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {"classification": "internal"},
            "result_data_categories": {
                "organisational_confidential": "included",
                "classification": "internal",
            },
        },
    },
    {
        "name": "tool:credit_bureau_check",
        "title": "Credit bureau check",
        "params_schema": {
            "type": "object",
            "required": ["bureau", "applicant_reference"],
            "properties": {"api_key_ref": {"type": "string"}},
        },
        "result_schema": {
            "type": "object",
            "properties": {"credit_score": {"type": "integer", "minimum": 300, "maximum": 850}},
        },
        "template": "{{ bureau }} credit score {{ credit_score }}, {{ delinquencies_24m }} "
        "delinquencies in 24 months",
        # The request authenticates with the bureau API key and sends the applicant's
        # identifiers out of the organisation; the report is financial data.
        "data_risk": {
            "action_profile": {"read_data": "allowed", "external_communication": "allowed"},
            "params_data_categories": {
                "personal_identifiers": "included",
                "authentication_and_secrets": "included",
                "classification": "restricted",
            },
            "result_data_categories": {
                "financial_information": "included",
                "classification": "restricted",
            },
        },
    },
    {
        "name": "tool:identity_document_verification",
        "title": "Identity document verification",
        "params_schema": {
            "type": "object",
            "required": ["document_type", "applicant"],
            "properties": {
                "applicant": {
                    "type": "object",
                    "properties": {"national_id": _MARKER, "date_of_birth": _MARKER},
                },
            },
        },
        "result_schema": {"type": "object", "properties": {"verified": {"type": "boolean"}}},
        "template": "{{ document_type }} check: {% if verified %}verified{% else %}not verified"
        "{% endif %} (face match {{ face_match_score }})",
        # A document scan and a selfie match: identifiers and biometric data, read on-premises.
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {
                "personal_identifiers": "included",
                "gdpr_biometric_for_identification": "included",
                "classification": "restricted",
            },
            "result_data_categories": {
                "personal_identifiers": "included",
                "classification": "confidential",
            },
        },
    },
    {
        "name": "tool:income_verification",
        "title": "Income verification",
        "params_schema": {"type": "object", "required": ["employer"]},
        "result_schema": _OBJECT,
        "template": "Income {{ verified_annual_income }} verified via {{ source }}",
        "data_risk": {
            "action_profile": {"read_data": "allowed"},
            "params_data_categories": {
                "personal_identifiers": "included",
                "classification": "confidential",
            },
            "result_data_categories": {
                "financial_information": "included",
                "classification": "confidential",
            },
        },
    },
    {
        "name": "decision_letter",
        "title": "Decision letter",
        "params_schema": {"type": "object", "required": ["decision", "channel"]},
        "result_schema": _OBJECT,
        "template": "{{ decision | upcase }} letter sent by {{ channel }}"
        "{% if delivered %} (delivered){% endif %}",
        # The letter is written to the case file and sent to the applicant.
        "data_risk": {
            "action_profile": {"create_data": "allowed", "external_communication": "allowed"},
            "params_data_categories": {
                "personal_identifiers": "included",
                "contact_information": "included",
                "financial_information": "included",
                "classification": "confidential",
            },
        },
    },
]
"""The demo span types."""

ALERT_SCHEMAS: Final[list[dict[str, Any]]] = [
    {
        "name": "affordability_concern",
        "title": "Affordability concern",
        "description": "The applicant's debt-to-income ratio exceeds the lending policy",
        "schema": {
            "type": "object",
            "required": ["debt_to_income_percent", "policy_limit_percent"],
            "properties": {
                "debt_to_income_percent": {"type": "number"},
                "policy_limit_percent": {"type": "number"},
                "application_reference": {"type": "string"},
            },
        },
        "template": "Debt-to-income {{ debt_to_income_percent }}% exceeds the "
        "{{ policy_limit_percent }}% policy limit for application "
        "{{ application_reference | default: \"(unknown)\" }}",
        "data_risk": {"params_data_categories": {"financial_information": "included"}},
    },
    {
        "name": "risk_critical",
        "title": "Run risk reached critical",
        "schema": _OBJECT,
        "template": "Risk score {{ total_score }} reached the critical threshold "
        "{{ critical_threshold }} with a {{ schema_name }} span",
    },
]
"""The demo alert schemas (``risk_critical`` gives the service's own alert its summary)."""

QUALITY_SCHEMAS: Final[list[dict[str, Any]]] = [
    {
        "name": "decision_quality",
        "title": "Decision quality",
        "description": "A reviewer's evaluation of the decision and its rationale",
        "schema": {
            "type": "object",
            "required": ["score"],
            "properties": {
                "score": {"type": "integer", "minimum": 1, "maximum": 5},
                "rationale": {"type": "string"},
                "checks_passed": {"type": "array", "items": {"type": "string"}},
            },
        },
        "template": "Decision quality {{ score }}/5"
        "{% if score >= 4 %} (sound){% elsif score >= 3 %} (acceptable)"
        "{% else %} (needs human review){% endif %}; {{ checks_passed | size }} checks passed "
        "({{ checks_passed | join: \", \" }}). {{ rationale | truncate: 80 }}",
    },
]
"""The demo quality schemas."""

SCHEMA_VERSION: Final[dict[str, Any]] = {
    "external_identifier": "loan-review-schemas-1",
    "span_type_schemas": SPAN_TYPES,
    "alert_schemas": ALERT_SCHEMAS,
    "quality_schemas": QUALITY_SCHEMAS,
}
"""The demo schema version, in the clients' register form."""


def _call(ctx: Context, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run a registered operation as a client call would, inside this operation's write."""
    return ctx.registry[name].handler(ctx, Fields(params))


@operation("playground/create_loan_application_review_agent", write=True)
def create_agent(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Create a playground loan application review agent (``{status, agent}``)."""
    created = _call(ctx, "agents/create", {"details": dict(AGENT)})
    return success(agent=created["details"])


def _register_params(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Read the agent (a bare JSON string, or ``agent_id``), ``environment_id`` and ``id``.

    The agent is the resource the operation acts on, so it is answered like a path id: a
    malformed, unknown or another account's agent is ``not_found``.
    """
    if fields.body is not None:
        if not isinstance(fields.body, str):
            raise InvalidValue("the body must be an agent id, or {agent_id, environment_id, id}")
        params: dict[str, Any] = {"agent_id": fields.body.strip()}
    else:
        params = {
            name: fields.raw(name)
            for name in ("agent_id", "environment_id", "id")
            if fields.has(name)
        }
    if params.get("agent_id") is not None:
        load_record(ctx, ctx.tables.agents, params["agent_id"])
    return {**params, "agent_version": AGENT_VERSION, "agent_schema_version": SCHEMA_VERSION}


@operation("playground/register_loan_application_review_agent_instance", write=True)
def register_demo_instance(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Register a run of an agent with the loan review demo schemas."""
    registration = register_instance(ctx, Fields(_register_params(ctx, fields)))
    return success(
        agent_schema_version=schema_version_full(ctx, registration.schema_version),
        agent_version=agent_version_details(ctx, registration.agent_version),
        details=instance_details(ctx, registration.instance),
    )


class _Recorder:
    """Writes the demo run's spans one after another, a few seconds apart."""

    def __init__(self, ctx: Context, instance_id: str) -> None:
        self.ctx = ctx
        self.instance_id = instance_id
        self.at = ctx.now - timedelta(seconds=60)
        self.span_ids: list[str] = []

    def tick(self, seconds: float) -> str:
        """Move the recording's clock on by ``seconds``; the new time, stored form."""
        self.at += timedelta(seconds=seconds)
        return format_timestamp(self.at)

    def span(self, schema_name: str, payload: dict[str, Any], **members: Any) -> str:
        """Create a span: finished ``seconds`` after it started unless it is ``active``."""
        seconds = members.pop("seconds", 1.0)
        started_at = self.tick(0.5)
        body: dict[str, Any] = {
            "agent_instance_id": self.instance_id, "schema_name": schema_name,
            "payload": payload, "started_at": started_at, "status": "complete", **members,
        }
        if body["status"] != "active":
            body["finished_at"] = self.tick(seconds)
        span_id: str = _call(self.ctx, "agent_spans/create", body)["details"]["id"]
        self.span_ids.append(span_id)
        return span_id

    def finish(self, span_id: str, seconds: float, **members: Any) -> None:
        """Finish a span ``seconds`` after the recording's last step."""
        _call(self.ctx, "agent_spans/finish",
              {"agent_span_id": span_id, "timestamp": self.tick(seconds), **members})


_APPLICATION = "APP-2026-004211"


def _record_run(recorder: _Recorder) -> None:
    """Record the demo run's spans; each LLM call uses a different client usage form."""
    # The Python LangChain client: model in payload, usage (with cached tokens) in the result
    # sent when the span finishes.
    extract = recorder.span("llm", {
        "model_name": "gpt-4o", "provider": "openai",
        "purpose": "Extract the application facts from the submitted form",
        "messages": [{"role": "user", "content": f"Application {_APPLICATION}: ..."}],
    }, status="active")
    recorder.finish(extract, 2.4, result_payload={
        "content": "Applicant employed 6 years, requests 15,000 over 48 months.",
        "token_usage": {"prompt_tokens": 3200, "completion_tokens": 420, "total_tokens": 3620,
                        "prompt_tokens_details": {"cached_tokens": 1024}},
    })
    recorder.span("tool", {"tool_name": "lending_policy_lookup", "product": "personal_loan"},
                  result_payload={"outcome": "policy v12: max DTI 43%"}, seconds=0.3)
    recorder.span("tool:identity_document_verification", {
        "document_type": "passport",
        "applicant": {
            "national_id": {"$sensitive": "string", "labels": ["pii", "national_id"],
                            "value": "QQ123456C"},
            "date_of_birth": {"$sensitive": "string", "labels": ["pii"],
                              "value": "1988-03-14"},
        },
    }, result_payload={"verified": True, "face_match_score": 0.97}, sensitive_encoding=True,
        seconds=3.1)
    recorder.span("tool:credit_bureau_check", {
        "bureau": "Experian", "applicant_reference": _APPLICATION,
        "api_key_ref": "vault://lending/credit-bureau/api-key",
    }, result_payload={"credit_score": 712, "open_accounts": 6, "delinquencies_24m": 0,
                       "total_outstanding_debt": 18450}, seconds=1.8)
    recorder.span("tool:income_verification", {
        "employer": "Northwind Logistics", "declared_annual_income": 58000,
    }, result_payload={"verified_annual_income": 56400, "source": "payroll provider",
                       "monthly_debt_payments": 2160}, seconds=2.2)
    # The TypeScript client: created finished, Anthropic-style usage in the result.
    recorder.span("llm", {
        "model": "claude-sonnet-4-5", "provider": "anthropic",
        "purpose": "Assess affordability against the lending policy",
    }, result_payload={
        "content": "Debt-to-income 46% exceeds the 43% limit; refer to an underwriter.",
        "usage": {"input_tokens": 5400, "output_tokens": 900, "cache_read_input_tokens": 2048},
    }, seconds=6.5)
    letter_model = recorder.span("llm", {
        "model": "gpt-4o-mini", "provider": "openai",
        "purpose": "Draft the decision letter",
        "tokens": {"input": 1800, "output": 650, "cacheRead": 0, "cacheWrite": 0},
    }, result_payload={"content": "Dear applicant, ..."}, seconds=3.0)
    recorder.span("decision_letter", {
        "decision": "referred", "channel": "email",
        "recipient": {"email": "applicant@example.com"}, "application": _APPLICATION,
    }, result_payload={"delivered": True, "message_id": "msg-7781"}, seconds=0.6,
        parent_span_id=letter_model)


@operation("playground/record_loan_application_review_spans", write=True)
def record_demo_spans(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Record a realistic loan review run on a playground instance (``{status, ids, alert_ids}``).

    ``ids`` lists the spans it recorded, in order, so each fetches as a span;
    ``alert_ids`` lists the alert it raised.
    """
    instance = load_instance(ctx, fields.raw("agent_instance_id"))
    fields.done()
    recorder = _Recorder(ctx, instance["id"])
    if instance["status"] == "pending":
        _call(ctx, "agent_instances/start",
              {"agent_instance_id": instance["id"], "timestamp": recorder.tick(0)})
    _record_run(recorder)
    alert = _call(ctx, "alerts/raise", {
        "agent_instance_id": instance["id"], "name": "affordability_concern",
        "severity": "warning", "raised_at": recorder.tick(0.2),
        "payload": {"debt_to_income_percent": 46, "policy_limit_percent": 43,
                    "application_reference": _APPLICATION},
    })["details"]
    _call(ctx, "agent_instances/record_quality", {
        "agent_instance_id": instance["id"], "name": "decision_quality",
        "payload": {"score": 4, "checks_passed": ["identity", "credit", "income", "policy"],
                    "rationale": "Referral is consistent with policy: DTI above the limit "
                                 "with an otherwise clean credit file."},
    })
    stored = load_instance(ctx, instance["id"])
    if stored["status"] == "active":
        _call(ctx, "agent_instances/finish", {"agent_instance_id": instance["id"]})
    return success(ids=recorder.span_ids, alert_ids=[alert["id"]])
