"""The one resource that serves every operation route, driven by the route table."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import falcon

from governance_core import jsontext
from governance_core.errors import BadRequest, FieldErrors
from governance_core.fields import BODY
from governance_core.service import Governance
from governance_http.auth import bearer_token
from governance_http.body import NO_BODY, BodyLimits, read_body
from governance_http.params import parse_query
from governance_http.routes import Route

__all__ = [
    "IDEMPOTENCY_HEADER",
    "OperationResource",
    "header_key",
    "object_body",
    "request_members",
]

IDEMPOTENCY_HEADER = "Idempotency-Key"
_KEY = "idempotency_key"
_HEADER_KEY = re.compile(r"[\x21-\x7e]+")


def request_members(
    path: Mapping[str, str], query: Mapping[str, Any], body: Any
) -> dict[str, Any]:
    """Path, query and body members as one mapping for the core.

    A JSON object body is merged over the query; any other JSON value is the member ``_body``.
    Path members win over both, also inside a ``details`` wrapper, so a body can never
    redirect an operation to another resource than the one its path names.
    """
    members: dict[str, Any] = dict(query)
    if isinstance(body, dict):
        members.update(body)
    elif body is not NO_BODY:
        members[BODY] = body
    members.update(path)
    details = members.get("details")
    if isinstance(details, dict) and any(name in details for name in path):
        members["details"] = {**details, **{k: v for k, v in path.items() if k in details}}
    return members


def header_key(req: falcon.Request) -> str | None:
    """The ``Idempotency-Key`` header: visible ASCII, as the document says, else 422 on it."""
    key = req.get_header(IDEMPOTENCY_HEADER)
    if key is not None and not _HEADER_KEY.fullmatch(key):
        errors = FieldErrors()
        errors.invalid(_KEY, "the Idempotency-Key header must be visible ASCII characters")
        raise errors.to_error()
    return key


def object_body(route: Route, body: Any) -> Any:
    """Return ``body`` if the route takes it, or raise ``bad_request``.

    A route takes a JSON object; where it documents a bare body, any JSON value (the core then
    names what is wrong with it).
    """
    if body is NO_BODY or isinstance(body, dict) or route.bare_body is not None:
        return body
    raise BadRequest("the request body must be a JSON object")


class OperationResource:
    """Serves the routes of one path template: one core operation per HTTP method.

    Only the methods of the given routes get a responder, so falcon answers any other method
    with 405.
    """

    def __init__(
        self, governance: Governance, routes: Sequence[Route], limits: BodyLimits
    ) -> None:
        self._governance = governance
        self._limits = limits
        self._routes = {route.method: route for route in routes}
        for method in self._routes:
            setattr(self, f"on_{method.lower()}", self.respond)

    def respond(self, req: falcon.Request, resp: falcon.Response, **path: str) -> None:
        """Run the route's operation with the request's members; its envelope is the body."""
        token = bearer_token(req)
        query = parse_query(req.query_string)
        # A repeated query key arrives as a list, which the core refuses by name.
        keys: list[Any] = [header_key(req), query.pop(_KEY, None)]
        route = self._routes[req.method]
        members = request_members(path, query, object_body(route, read_body(req, self._limits)))
        envelope = self._governance.call(
            route.operation, members, token=token, idempotency_keys=keys
        )
        # Written here, not by falcon after the responder, so that an answer that cannot be
        # written is an error of this request (500 with the envelope), not an empty body.
        resp.data = jsontext.dumps(envelope).encode()
        resp.content_type = falcon.MEDIA_JSON
