"""The route table: complete against the interface and the clients, and served only when real."""

from __future__ import annotations

import falcon.testing
import pytest

from governance_core.bulk import BULK
from governance_core.operations import default_registry
from governance_core.service import Bootstrap, Governance
from governance_http import create_app
from governance_http.routes import ROUTES, Route, served_routes
from tests.http.support import Api, assert_error

REGISTRY = default_registry()

INTERFACE = [
    ("GET", "/person"), ("POST", "/person"), ("GET", "/team"), ("GET", "/team/{team_id}"),
    ("GET", "/account"), ("PUT", "/account/{account_id}"), ("GET", "/admin_user/{admin_user_id}"),
    ("PUT", "/admin_user/{admin_user_id}"), ("POST", "/admin_user_invite"),
    ("POST", "/admin_user_invite/{admin_user_invite_id}/revoke"),
    ("PUT", "/agent_deployment/{agent_deployment_id}"), ("GET", "/environment/{environment_id}"),
    ("GET", "/agent_schema_version/{agent_schema_version_id}"), ("POST", "/agent_spans"),
    ("GET", "/agent_spans/{agent_span_id}"),
    ("POST", "/agent_instance/{agent_instance_id}/record_quality"), ("POST", "/alerts/clear"),
    ("POST", "/playground/create_loan_application_review_agent"),
    ("POST", "/playground/register_loan_application_review_agent_instance"), ("POST", "/bulk"),
]
"""The 20 endpoints of interface.md."""

CLIENTS = [
    ("POST", "/agent_instance/register"), ("POST", "/agent_instance/{agent_instance_id}/start"),
    ("POST", "/agent_instance/{agent_instance_id}/finish"),
    ("POST", "/agent_instance/{agent_instance_id}/terminate"),
    ("GET", "/agent_instance/{agent_instance_id}"), ("GET", "/agent_instance"),
    ("PUT", "/agent_instance/{agent_instance_id}"),
    ("POST", "/agent_spans/{agent_span_id}/finish"), ("GET", "/agent_spans"),
    ("POST", "/alerts/raise"), ("GET", "/alerts"), ("GET", "/alerts/{alert_id}"),
    ("GET", "/alerts/count"), ("GET", "/agent"), ("POST", "/agent"), ("GET", "/agent/{agent_id}"),
    ("PUT", "/agent/{agent_id}"), ("DELETE", "/agent/{agent_id}"),
    ("POST", "/agent/{agent_id}/retire"), ("POST", "/agent/{agent_id}/reinstate"),
    ("GET", "/environment"), ("POST", "/environment"), ("PUT", "/environment/{environment_id}"),
    ("GET", "/agent_deployment"), ("POST", "/agent_deployment"),
    ("GET", "/agent_deployment/{agent_deployment_id}"), ("GET", "/agent_version"),
    ("GET", "/agent_version/{agent_version_id}"), ("GET", "/agent_schema_version"),
    ("GET", "/risk_profile"), ("POST", "/risk_profile"), ("GET", "/risk_profile/{risk_profile_id}"),
    ("PUT", "/risk_profile/{risk_profile_id}"), ("DELETE", "/risk_profile/{risk_profile_id}"),
    ("GET", "/api_token"), ("POST", "/api_token"), ("GET", "/api_token/{api_token_id}"),
    ("POST", "/api_token/{api_token_id}/suspend"), ("POST", "/api_token/{api_token_id}/activate"),
    ("POST", "/api_token/{api_token_id}/revoke"),
    ("POST", "/playground/record_loan_application_review_spans"),
    ("POST", "/admin_user_invite/accept"), ("PUT", "/person/{person_id}"),
    ("GET", "/account/{account_id}"),
]
"""The endpoints clients.md and decisions.md add."""


def test_the_table_holds_every_endpoint_once() -> None:
    table = [(route.method, route.template) for route in ROUTES]
    assert len(table) == len(set(table))
    assert set(INTERFACE) | set(CLIENTS) <= set(table)
    assert len({route.operation_id for route in ROUTES}) == len(ROUTES)
    # An operation has one route, unless clients call it at a second path (an alias).
    assert len({route.operation for route in ROUTES if route.alias is None}) == len(
        [route for route in ROUTES if route.alias is None]
    )


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.method} {route.template}")
def test_every_route_has_its_operation_registered(route: Route) -> None:
    assert route.operation == BULK or route.operation in REGISTRY


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.method} {route.template}")
def test_path_parameters_name_the_members_operations_read(route: Route) -> None:
    for name in route.path_parameters:
        assert name.endswith("_id")
        assert route.template.split("/")[1] in (name.removesuffix("_id"), "alerts", "agent_spans")


def test_an_unregistered_operation_is_not_served(gov: Governance, boot: Bootstrap) -> None:
    ghost = Route("GET", "/ghost", "ghosts/list")
    assert served_routes(REGISTRY, [ghost]) == []
    api = Api(falcon.testing.TestClient(create_app(gov, routes=[ghost])), boot.token)
    assert_error(api.get("/ghost"), 404, "not_found")
    assert ghost.path not in api.get("/openapi.json").json["paths"]


@pytest.mark.parametrize("route", ROUTES, ids=lambda route: f"{route.method} {route.template}")
def test_every_route_is_served_for_its_method(anonymous: Api, route: Route) -> None:
    path = route.path.format(**{name: "0" * 32 for name in route.path_parameters})
    result = anonymous.request(route.method, path, token="pf_bogus")
    operation = REGISTRY.get(route.operation)
    if operation is None or operation.authenticated:
        assert_error(result, 401, "bad_authtoken")
    else:
        assert result.status_code not in (404, 405), result.text
