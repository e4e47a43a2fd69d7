"""The OpenAPI document against the app it describes: schemathesis, every check, in process.

Each documented operation is fuzzed against the WSGI app over a populated account, with every
check schemathesis has for OpenAPI (server errors, status codes, content types, response
schemas and headers, schema-valid requests accepted, schema-invalid ones refused, allowed
methods, authentication). ``GOVERNANCE_FUZZ_EXAMPLES`` sets the examples per operation (a few
in the normal suite; ``nox -s fuzz`` runs many and prints the operations and cases it ran).

Rules a JSON Schema cannot state are the documented exclusions (docs/decisions.md, "The
OpenAPI document"): a schema-valid case is made to follow them here (:func:`follow_the_rules`),
never hidden from the report, and every check is asked of every operation.

- The idempotency key may come in the body, the query and the ``Idempotency-Key`` header;
  given in more than one place, the keys must agree. A schema-valid case carries the body's
  key (or else the query's) in every place it sends one; the items of a bulk request carry
  distinct keys.
- A member that refers to another resource must name an existing one of the account: a
  schema-valid case names the world's (the run of the world for a run, its agent for an
  agent...). A supplied ``id`` must be new and of the account's partition: a new one is made.
- An integer member is written without a fraction (``60``, not ``60.0``, which JSON Schema
  counts as an integer too).
- Members that depend on others: ``agent_id`` and ``environment_id`` are for
  ``agent_deployment`` tokens only, an ``expires_at`` is in the future, exactly one of
  ``agent_id`` and ``external_identifier`` names an agent, a span does not finish before it
  starts, a ruleset's thresholds rise, a monitor has a warning or a critical threshold in
  its comparison's direction, a webhook URL's host is allowed, an alert is cleared by name
  when its run has several, a policy's ``source`` is Cedar text the engine accepts (a fixed
  valid policy) and its scope names the world's environment and agent.
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
from governance_core.idempotency import KEY_MAX
from governance_core.ids import SeededIds, encode_pfid, extract_partition
from governance_core.rate_limits import FailureLimit
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

REFERENCES: dict[str, str] = {
    "agent_id": "agent_id", "environment_id": "environment_id", "team_id": "team_id",
    "owner_person_id": "person_id", "risk_profile_id": "risk_profile_id",
    "agent_instance_id": "agent_instance_id", "parent_span_id": "agent_span_id",
    "current_version_id": "agent_version_id", "account_id": "account_id",
    "policy_id": "policy_id",
}
"""Reference members, and the world's resource each is made to name."""

FUTURE = "2999-01-01T00:00:00Z"
WEBHOOK = "https://hooks.example.test/governance"
ALERT = "slow_run"
POLICY = 'forbid(principal, action, resource == Tool::"delete_everything");'

RAN: Counter[str] = Counter()
"""Cases run per operation, for the fuzz session's report."""

gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(5))
# The authentication check sends hundreds of bad tokens from one address, on a clock that
# never moves: with the limit on failed credentials (tested on its own) they would be
# answered 429, not the 401 the check asks for.
gov.caches.failed_attempts.limit = FailureLimit(max_failures=0)
world = build_world(gov, gov.bootstrap())
app = create_app(gov)
schema = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app)
# Unknown members are ignored by rule (decisions, requests), which a document cannot state;
# HTTP header values cannot hold line breaks, so no transport could send such a case.
schema.config.generation.update(allow_extra_parameters=False, exclude_header_characters="\r\n")


def _members(case: Any) -> list[dict[str, Any]]:
    """The case's body object and its ``details`` object: where members are read from."""
    body = case.body if isinstance(case.body, dict) else None
    if body is None:
        return []
    details = body.get("details")
    return [body, details] if isinstance(details, dict) else [body]


_fresh = iter(range(1, 10**9))


def _new_id() -> str:
    """An id of the account's partition that no record holds."""
    partition = extract_partition(world.ids["team_id"])
    return encode_pfid(4_000_000_000_000 + next(_fresh), partition, next(_fresh))


def follow_the_rules(case: Any) -> None:
    """Make a schema-valid case follow the rules its schema cannot state (module docstring)."""
    operation = case.operation.label
    query = case.query if isinstance(case.query, dict) else {}
    for members in [*_members(case), query]:
        for name, value in members.items():
            if isinstance(value, float) and value.is_integer():
                members[name] = int(value)
        for name, known in REFERENCES.items():
            if isinstance(members.get(name), str) and known in world.ids:
                members[name] = world.ids[known]
        if isinstance(members.get("team_ids"), list):
            members["team_ids"] = [world.ids["team_id"]] if members["team_ids"] else []
        if isinstance(members.get("id"), str):
            members["id"] = _new_id()
        if isinstance(members.get("expires_at"), str):
            members["expires_at"] = FUTURE
        if isinstance(members.get("url"), str):
            members["url"] = WEBHOOK
        _rising(members.get("ruleset"))
        _in_order(members)
    if operation in ("POST /api/v1/monitor", "PUT /api/v1/monitor/{monitor_id}"):
        _thresholds(_members(case))
    if operation == "POST /api/v1/api_token":
        _token_scope(case)
    if operation == "GET /api/v1/agent/show":
        if query.get("agent_id") is not None:
            query.pop("external_identifier", None)
        elif query.get("external_identifier") is None:
            query["agent_id"] = world.ids["agent_id"]
    if operation == "POST /api/v1/alerts/clear":
        for members in _members(case)[-1:]:
            if members.get("name") is None:
                members["name"] = ALERT
    if operation in (
        "POST /api/v1/policy", "POST /api/v1/policy/{policy_id}", "POST /api/v1/policy/test",
    ):
        _policy(_members(case))
    if operation == "POST /api/v1/bulk":
        for index, item in enumerate(case.body.get("items") or []):
            if isinstance(item, dict) and isinstance(item.get("idempotency_key"), str):
                unique = f"-{index}"
                item["idempotency_key"] = item["idempotency_key"][: KEY_MAX - len(unique)] + unique


def _rising(ruleset: Any) -> None:
    thresholds = ruleset.get("thresholds") if isinstance(ruleset, dict) else None
    if isinstance(thresholds, dict):
        low = min(thresholds.values())
        thresholds.update(medium=low, high=low + 1, critical=low + 2)


def _in_order(members: dict[str, Any]) -> None:
    if isinstance(members.get("finished_at"), str):
        members["started_at"] = members["finished_at"]


def _thresholds(places: list[dict[str, Any]]) -> None:
    """A warning or a critical threshold, critical beyond warning (``details`` wins)."""
    if not places:
        return
    read = {key: value for members in places for key, value in members.items()}

    def write(name: str, value: Any) -> None:
        next(m for m in reversed(places) if name in m or m is places[-1])[name] = value

    if read.get("warning") is None and read.get("critical") is None:
        write("warning", 1)
    warning, critical = read.get("warning", 1), read.get("critical")
    if isinstance(warning, (int, float)) and isinstance(critical, (int, float)):
        upward = read.get("comparison") in (None, "gt", "ge")
        write("critical", max(warning, critical) if upward else min(warning, critical))


def _token_scope(case: Any) -> None:
    for members in _members(case):
        deployment = members.get("token_scope") == "agent_deployment"
        for name in ("agent_id", "environment_id"):
            if deployment:
                members[name] = world.ids[name]
            else:
                members.pop(name, None)


def _policy(places: list[dict[str, Any]]) -> None:
    """Policy text that the engine accepts, and a scope naming the world's resources."""
    for members in places:
        if isinstance(members.get("source"), str):
            members["source"] = POLICY
        scope = members.get("scope")
        if isinstance(scope, dict):
            for name, known in (("environment_ids", "environment_id"), ("agent_ids", "agent_id")):
                if isinstance(scope.get(name), list):
                    scope[name] = [world.ids[known]] if scope[name] else []


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
        follow_the_rules(case)
        agree_on_the_key(case)
    case.call_and_validate(headers={"Authorization": f"Bearer {world.token}"}, checks=CHECKS)
