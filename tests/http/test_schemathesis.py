"""The OpenAPI document against the app it describes: schemathesis, every check, in process.

Each documented operation is fuzzed against the WSGI app over a populated account, with every
check schemathesis has for OpenAPI (server errors, status codes, content types, response
schemas and headers, schema-valid requests accepted, schema-invalid ones refused, allowed
methods, authentication). ``GOVERNANCE_FUZZ_EXAMPLES`` sets the examples per operation (a few
in the normal suite; ``nox -s fuzz`` runs many and prints the operations and cases it ran).

Rules a JSON Schema cannot state are the documented exclusions (docs/decisions.md, "The
OpenAPI document"): they are applied to each case here, never hidden from the report.

- The idempotency key may come in the body, the query and the ``Idempotency-Key`` header;
  given in more than one place, the keys must agree. A schema-valid case carries the body's
  key (or else the query's) in every place it sends one.
- A member that refers to another resource must name an existing one of the account, and
  some members depend on others (``agent_id`` is only for ``agent_deployment`` tokens, a
  supplied ``id`` must be of the account's partition, exactly one of ``agent_id`` and
  ``external_identifier``): for the operations in :data:`SEMANTIC_RULES` a schema-valid request
  may be refused with a 4xx naming the member, so the acceptance check is not asked of them.
  Every other check still is.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from typing import Any

import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
    use_after_free,
)

from governance_core.clock import FixedClock
from governance_core.ids import SeededIds
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.http.world import build_world

EXAMPLES = int(os.environ.get("GOVERNANCE_FUZZ_EXAMPLES", "4"))
CHECKS = [
    not_a_server_error, status_code_conformance, content_type_conformance,
    response_headers_conformance, response_schema_conformance, positive_data_acceptance,
    negative_data_rejection, missing_required_header, unsupported_method, ignored_auth,
    use_after_free,
]
KEY = "idempotency_key"
HEADER = "Idempotency-Key"
HEADER_VALUE = re.compile(r"[\x21-\x7e]+")

SEMANTIC_RULES: dict[str, str] = {
    "POST /api/v1/api_token": "agent_id and environment_id only for agent_deployment tokens",
    "POST /api/v1/admin_user_invite": "the email must be an email address not yet an admin's",
    "POST /api/v1/admin_user_invite/accept": "the token must be a pending invite's",
    "POST /api/v1/person": "team_ids must name teams; a supplied id is of the partition",
    "POST /api/v1/team": "a supplied id is of the account's partition",
    "POST /api/v1/risk_profile": "the ruleset's weights, multipliers and thresholds",
    "PUT /api/v1/risk_profile/{risk_profile_id}": "the ruleset's weights and thresholds",
    "POST /api/v1/environment": "a supplied id is of the account's partition",
    "POST /api/v1/agent": "references name existing resources; ids of the partition",
    "PUT /api/v1/agent/{agent_id}": "references name existing resources",
    "GET /api/v1/agent/show": "exactly one of agent_id and external_identifier",
    "POST /api/v1/agent_deployment": "agent and environment must exist",
    "PUT /api/v1/agent_deployment/{agent_deployment_id}": "the version must be the agent's",
    "POST /api/v1/agent_instance/register": "the agent must exist; version objects' members",
    "POST /api/v1/agent_spans": "the run and the parent span must exist; time order",
    "POST /api/v1/alerts/raise": "the run must exist",
    "POST /api/v1/alerts/clear": "the run must exist and have the alert",
    "POST /api/v1/bulk": "each item is an operation's request",
    "PUT /api/v1/account/{account_id}": "organisation_name unless purpose is personal",
    "POST /api/v1/playground/register_loan_application_review_agent_instance":
        "the agent must exist",
    "POST /api/v1/playground/record_loan_application_review_spans": "the run must exist",
}
"""Operations with rules beyond their schema (members that must name existing resources, or
depend on each other), and the rule: schema-valid requests to them may be refused."""

RAN: Counter[str] = Counter()
"""Cases run per operation, for the fuzz session's report."""

gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(5))
world = build_world(gov, gov.bootstrap())
app = create_app(gov)
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
# Unknown members are ignored by rule (decisions, requests), which a document cannot state;
# HTTP header values cannot hold line breaks, so no transport could send such a case.
schema.config.generation.update(allow_extra_parameters=False, exclude_header_characters="\r\n")


def agree_on_the_key(case: Any) -> None:
    """Send the idempotency key the same in every place the case gives one."""
    body_key = case.body.get(KEY) if isinstance(case.body, dict) else None
    query = case.query or {}
    key = body_key if body_key is not None else query.get(KEY)
    if key is None:
        return
    if KEY in query:
        query[KEY] = key
    if case.headers and HEADER in case.headers:
        # A key a header cannot carry (not visible ASCII) travels in the body alone.
        if isinstance(key, str) and HEADER_VALUE.fullmatch(key):
            case.headers[HEADER] = key
        else:
            del case.headers[HEADER]


@schema.parametrize()
@settings(
    max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
    suppress_health_check=list(HealthCheck),
)
def test_the_document_describes_the_app(case: Any) -> None:
    label = case.operation.label
    RAN[label] += 1
    # A negative case is to be refused anyway: its keys are left as drawn.
    if case.meta is None or case.meta.generation.mode == GenerationMode.POSITIVE:
        agree_on_the_key(case)
    excluded = [positive_data_acceptance] if label in SEMANTIC_RULES else []
    case.call_and_validate(
        headers={"Authorization": f"Bearer {world.token}"},
        checks=[check for check in CHECKS if check not in excluded],
    )
