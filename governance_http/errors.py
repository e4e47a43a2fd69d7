"""Errors as HTTP: the one code-to-status table and the handlers that render the envelope.

Every error leaves the app as the interface's JSON error envelope: the core's errors through
``STATUS_BY_CODE``, falcon's own (unknown route, wrong method, oversized body, bad header)
through the error serializer, and anything unexpected as a 500 ``unexpected`` whose body holds
no traceback (the traceback goes to the log).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import falcon

from governance_core.errors import GovernanceError, TemporarilyUnavailable

__all__ = [
    "CODE_BY_HTTP_STATUS",
    "RATE_LIMITED_STATUS",
    "STATUS_BY_CODE",
    "http_status_for",
    "register_error_handlers",
    "retry_after_header",
]

_log = logging.getLogger("governance_http")

STATUS_BY_CODE: dict[str, int] = {
    "validation_errors": 422,
    "invalid_value": 422,
    "required_value": 422,
    "unexpected_ref_type": 422,
    "bad_request": 400,
    "bad_authtoken": 401,
    "not_authenticated": 401,
    "not_permitted": 403,
    "not_found": 404,
    "alert_unknown": 404,
    "invalid_action": 409,
    "conflict": 409,
    "alert_already_cleared": 409,
    "idempotency_key_already_used": 409,
    "temporarily_unavailable": 503,
    "not_implemented": 501,
    "unexpected": 500,
    "unknown": 500,
}
"""The HTTP status of each interface error code (decisions, section 3)."""

RATE_LIMITED_STATUS = 429
"""The status of ``temporarily_unavailable`` when a rate limit, not overload, is the cause."""

CODE_BY_HTTP_STATUS: dict[int, str] = {
    401: "not_authenticated",
    403: "not_permitted",
    404: "not_found",
    500: "unexpected",
    501: "not_implemented",
    503: "temporarily_unavailable",
}
"""The code of an error raised by falcon itself; any other 4xx is ``bad_request``."""

_MESSAGE_BY_HTTP_STATUS: dict[int, str] = {
    404: "there is no such route",
    413: "the request body is too large",
}


def http_status_for(error: GovernanceError) -> int:
    """Return the HTTP status that answers ``error``."""
    if isinstance(error, TemporarilyUnavailable) and error.rate_limited:
        return RATE_LIMITED_STATUS
    return STATUS_BY_CODE[error.code]


def retry_after_header(error: TemporarilyUnavailable) -> str:
    """The ``Retry-After`` value (whole seconds, at least 1) that goes with ``error``."""
    return str(max(1, math.ceil(error.retry_after_ms / 1000)))


def _governance_error(
    req: falcon.Request, resp: falcon.Response, error: GovernanceError, params: dict[str, Any]
) -> None:
    resp.status = http_status_for(error)
    resp.media = error.to_payload()
    if isinstance(error, TemporarilyUnavailable):
        resp.set_header("Retry-After", retry_after_header(error))


def _unexpected_error(
    req: falcon.Request, resp: falcon.Response, error: Exception, params: dict[str, Any]
) -> None:
    _log.exception("unexpected error answering %s %s", req.method, req.path, exc_info=error)
    resp.status = 500
    resp.media = {
        "status": "error", "code": "unexpected", "message": "an unexpected error occurred"
    }


def _falcon_error(req: falcon.Request, resp: falcon.Response, error: falcon.HTTPError) -> None:
    status = error.status_code
    code = CODE_BY_HTTP_STATUS.get(status, "bad_request" if status < 500 else "unexpected")
    message = error.description or _MESSAGE_BY_HTTP_STATUS.get(status) or error.title
    if status == 404:
        message = f"{message}: {req.method} {req.path}"
    elif status == 405:
        allowed = dict(error.headers or {}).get("Allow", "")
        message = f"{req.method} is not allowed on {req.path}; allowed: {allowed}"
    resp.media = {"status": "error", "code": code, "message": message}
    resp.content_type = falcon.MEDIA_JSON


def register_error_handlers(app: falcon.App[falcon.Request, falcon.Response]) -> None:
    """Make every error ``app`` answers the interface's JSON error envelope."""
    app.add_error_handler(Exception, _unexpected_error)
    app.add_error_handler(GovernanceError, _governance_error)
    app.set_error_serializer(_falcon_error)
