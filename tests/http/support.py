"""Helpers of the HTTP tests: an authenticated client and checks against the OpenAPI document."""

from __future__ import annotations

import json
from typing import Any

import falcon.testing
import jsonschema
import pytest

from governance_http.cli import main
from governance_http.routes import Route


class Api:
    """A test client that sends one account's bearer token unless told otherwise."""

    def __init__(self, client: falcon.testing.TestClient, token: str | None) -> None:
        self.client = client
        self.token = token

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        body: str | bytes | None = None,
        params: dict[str, Any] | None = None,
        query: str | None = None,
        headers: dict[str, str] | None = None,
        token: str | None = "default",
    ) -> falcon.testing.Result:
        sent = dict(headers or {})
        token = self.token if token == "default" else token
        if token is not None:
            sent.setdefault("Authorization", f"Bearer {token}")
        if body is not None:
            sent.setdefault("Content-Type", "application/json")
        return self.client.simulate_request(
            method, path if path.startswith("/api") else "/api/v1" + path,
            json=json, body=body, params=params, query_string=query, headers=sent,
        )

    def get(self, path: str, **kwargs: Any) -> falcon.testing.Result:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> falcon.testing.Result:
        return self.request("POST", path, **kwargs)

    def put(self, path: str, **kwargs: Any) -> falcon.testing.Result:
        return self.request("PUT", path, **kwargs)

    def delete(self, path: str, **kwargs: Any) -> falcon.testing.Result:
        return self.request("DELETE", path, **kwargs)

    def ok(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """The body of a request that must succeed."""
        result = self.request(method, path, **kwargs)
        assert result.status_code == 200, result.text
        body: dict[str, Any] = result.json
        assert body["status"] == "success"
        return body


def component(document: dict[str, Any], name: str) -> dict[str, Any]:
    """A schema that refers to a component of ``document``, resolvable on its own."""
    return {"$ref": f"#/components/schemas/{name}", "components": document["components"]}


def assert_error(
    result: falcon.testing.Result, status: int, code: str | None = None
) -> dict[str, Any]:
    """Check an error answer: its status, and a body that is the interface's error envelope."""
    from governance_http.openapi import build_document

    assert result.status_code == status, result.text
    body = result.json
    assert isinstance(body, dict), result.text
    jsonschema.validate(body, component(build_document([], {}), "Error"))
    if code is not None:
        assert body["code"] == code, body
    return body


def success_schema(document: dict[str, Any], route: Route) -> dict[str, Any]:
    """The 200 schema the document gives ``route``, resolvable on its own."""
    operation = document["paths"][route.path][route.method.lower()]
    schema = operation["responses"]["200"]["content"]["application/json"]["schema"]
    return {**schema, "components": document["components"]}


def fill(route: Route, ids: dict[str, str]) -> str:
    """The route's path with each path parameter replaced by the id of that name."""
    return route.path.format(**{name: ids[name] for name in route.path_parameters})


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """Run the ``governance`` command in process; its exit status, output and errors."""
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def as_json(capsys: pytest.CaptureFixture[str], *argv: str) -> Any:
    """Run the command with ``--json``, which must succeed; its output, parsed."""
    status, out, err = run(capsys, *argv, "--json")
    assert status == 0, err
    return json.loads(out)
