"""The route table: every HTTP route of the API and the core operation it runs.

A path parameter is named after the request member the operation reads (``{team_id}`` is the
member ``team_id``), so path parameters become members unchanged. A route is served only when
its operation is registered in the core (``bulk`` is the core's own runner).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

import attrs

from governance_core.bulk import BULK
from governance_core.registry import Operation

__all__ = [
    "JSON_LINES_EXPORT",
    "PREFIX",
    "ROUTES",
    "RUN_EXPORT",
    "Route",
    "served_routes",
]

PREFIX = "/api/v1"
"""The path prefix that carries the interface version."""

_PARAMETER = re.compile(r"{(\w+)}")

RUN_EXPORT = "agent_instances/export"
"""The operation reading a run and a page of its spans (``operations.run_export``)."""

JSON_LINES_EXPORT = "/agent_instance/{agent_instance_id}/export.jsonl"
"""The path (under :data:`PREFIX`) answering a whole run as JSON Lines, page after page of
:data:`RUN_EXPORT` (``governance_http.jsonlines``); served when that operation is."""


@attrs.frozen
class Route:
    """One HTTP route: method and path template (under :data:`PREFIX`) to one operation.

    ``bare_body`` names the member a body that is a bare JSON string stands for, where the
    interface allows that form (the core reads it; the route records it for the reference).
    ``alias`` names a second route of an operation (its OpenAPI operation id), where clients
    call one operation at two paths.
    """

    method: str
    template: str
    operation: str
    bare_body: str | None = None
    alias: str | None = None

    @property
    def operation_id(self) -> str:
        """The route's OpenAPI ``operationId``: the operation's name, or the alias."""
        return self.alias or self.operation.replace("/", "_")

    @property
    def path(self) -> str:
        """The full path template, prefix included."""
        return PREFIX + self.template

    @property
    def path_parameters(self) -> tuple[str, ...]:
        """The names of the path parameters, which are also the members they fill."""
        return tuple(_PARAMETER.findall(self.template))


def _crud(
    template: str,
    family: str,
    id_member: str,
    collection: Iterable[str] = ("list", "create"),
    item: Iterable[str] = ("show", "update"),
) -> list[Route]:
    verbs = {"list": "GET", "create": "POST", "show": "GET", "update": "PUT", "delete": "DELETE"}
    routes = [Route(verbs[verb], template, f"{family}/{verb}") for verb in collection]
    item_template = f"{template}/{{{id_member}}}"
    routes += [Route(verbs[verb], item_template, f"{family}/{verb}") for verb in item]
    return routes


def _actions(template: str, family: str, id_member: str, *verbs: str) -> list[Route]:
    return [
        Route("POST", f"{template}/{{{id_member}}}/{verb}", f"{family}/{verb}") for verb in verbs
    ]


_PLAYGROUND = "/playground/"

ROUTES: tuple[Route, ...] = (
    *_crud("/account", "accounts", "account_id", collection=("list",)),
    *_crud("/admin_user", "admin_users", "admin_user_id", collection=()),
    Route("POST", "/admin_user_invite", "admin_user_invites/create"),
    Route("POST", "/admin_user_invite/accept", "admin_user_invites/accept"),
    *_actions("/admin_user_invite", "admin_user_invites", "admin_user_invite_id", "revoke"),
    *_crud("/api_token", "api_tokens", "api_token_id", item=("show",)),
    *_actions("/api_token", "api_tokens", "api_token_id", "suspend", "activate", "revoke"),
    *_crud("/person", "people", "person_id"),
    *_crud("/team", "teams", "team_id"),
    *_crud("/environment", "environments", "environment_id"),
    *_crud("/risk_profile", "risk_profiles", "risk_profile_id", item=("show", "update", "delete")),
    # What prefactor-http's agents.show() sends: the agent by id or external_identifier.
    Route("GET", "/agent/show", "agents/show", alias="agents_show_by_query"),
    *_crud("/agent", "agents", "agent_id", item=("show", "update", "delete")),
    *_actions("/agent", "agents", "agent_id", "retire", "reinstate"),
    *_crud("/agent_deployment", "agent_deployments", "agent_deployment_id"),
    *_crud(
        "/agent_version", "agent_versions", "agent_version_id",
        collection=("list",), item=("show",),
    ),
    *_crud(
        "/agent_schema_version", "agent_schema_versions", "agent_schema_version_id",
        collection=("list",), item=("show",),
    ),
    Route("POST", "/agent_instance/register", "agent_instances/register"),
    *_crud("/agent_instance", "agent_instances", "agent_instance_id", collection=("list",)),
    *_actions(
        "/agent_instance", "agent_instances", "agent_instance_id", "start", "finish", "terminate"
    ),
    Route("GET", "/agent_instance/{agent_instance_id}/export", RUN_EXPORT),
    Route(
        "POST", "/agent_instance/{agent_instance_id}/record_quality",
        "agent_instances/record_quality", bare_body="name",
    ),
    *_crud("/agent_spans", "agent_spans", "agent_span_id", item=("show",)),
    *_actions("/agent_spans", "agent_spans", "agent_span_id", "finish"),
    Route("POST", "/alerts/raise", "alerts/raise"),
    Route("POST", "/alerts/clear", "alerts/clear", bare_body="agent_instance_id"),
    Route("GET", "/alerts", "alerts/list"),
    Route("GET", "/alerts/count", "alerts/count"),
    Route("GET", "/alerts/{alert_id}", "alerts/show"),
    *_crud("/monitor", "monitors", "monitor_id", item=("show", "update", "delete")),
    Route("POST", "/monitor/evaluate", "monitors/evaluate"),
    *_crud("/destination", "destinations", "destination_id", item=("show", "update", "delete")),
    *_actions("/destination", "destinations", "destination_id", "rotate_secret", "test"),
    *_crud("/delivery", "deliveries", "delivery_id", collection=("list",), item=("show",)),
    *_actions("/delivery", "deliveries", "delivery_id", "resend"),
    *_crud(
        "/notification_event", "notification_events", "notification_event_id",
        collection=("list",), item=("show",),
    ),
    Route(
        "POST", _PLAYGROUND + "create_loan_application_review_agent",
        "playground/create_loan_application_review_agent",
    ),
    Route(
        "POST", _PLAYGROUND + "register_loan_application_review_agent_instance",
        "playground/register_loan_application_review_agent_instance", bare_body="agent_id",
    ),
    Route(
        "POST", _PLAYGROUND + "record_loan_application_review_spans",
        "playground/record_loan_application_review_spans",
    ),
    # Runtime governance (decisions, section 16): a policy is updated by POST.
    Route("POST", "/policy/validate", "policies/validate"),
    Route("POST", "/policy/test", "policies/test"),
    *_crud("/policy", "policies", "policy_id", item=("show",)),
    Route("POST", "/policy/{policy_id}", "policies/update"),
    Route("POST", "/decision", "decisions/decide"),
    *_crud("/decision", "decisions", "decision_id", collection=("list",), item=("show",)),
    *_actions("/decision", "decisions", "decision_id", "record_interception"),
    *_crud("/approval", "approvals", "approval_id", collection=("list",), item=("show",)),
    *_actions("/approval", "approvals", "approval_id", "approve", "reject"),
    Route("POST", "/bulk", BULK),
)
"""Every operation route of the API (``/ping`` and ``/openapi.json`` are the app's own)."""


def served_routes(
    registry: Mapping[str, Operation], routes: Iterable[Route] = ROUTES
) -> list[Route]:
    """Return the routes whose operation exists in ``registry`` (bulk always does)."""
    return [route for route in routes if route.operation == BULK or route.operation in registry]
