"""One access-log line a request, and a request id on every response.

A line holds the method, the path (no query string: queries may carry secrets; a path segment
that looks like a token is redacted), the status, the duration and the request id: never a
header value, a body or a payload.
"""

from __future__ import annotations

import logging
import re
import secrets
import time
from urllib.parse import quote

import falcon

from governance_core.credentials import TOKEN_PREFIX

__all__ = [
    "ACCESS_LOGGER",
    "REQUEST_ID_HEADER",
    "RequestLog",
    "log_request",
    "loggable_path",
    "request_id",
]

ACCESS_LOGGER = "governance_http.access"
REQUEST_ID_HEADER = "X-Request-Id"
_SANE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_MAX_PATH = 512


def loggable_path(path: str) -> str:
    """``path`` fit for a log line: percent-encoded, token-like segments redacted, capped."""
    segments = [
        "[redacted]" if segment.startswith(TOKEN_PREFIX)
        else quote(segment, safe=":@!$&'()*+,;=-._~")
        for segment in path.split("/")
    ]
    return "/".join(segments)[:_MAX_PATH]


def request_id(given: str | None) -> str:
    """``given`` when it is 1 to 128 of ``A-Z a-z 0-9 . _ : -``, else a new random id."""
    if given is not None and _SANE_ID.fullmatch(given) is not None:
        return given
    return secrets.token_hex(16)


def log_request(
    logger: logging.Logger, method: str, path: str, status: int, elapsed_ms: float, rid: str
) -> None:
    """Write one access-log line (``rid`` must already be sane, see :func:`request_id`)."""
    logger.info(
        "%s %s %d %.1fms request_id=%s", method, loggable_path(path), status, elapsed_ms, rid
    )


class RequestLog:
    """Falcon middleware: echo a sane ``X-Request-Id`` (or make one) and log the request."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self.logger = logger or logging.getLogger(ACCESS_LOGGER)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Stamp the start time and settle the request id before routing."""
        req.context.started = time.perf_counter()
        req.context.request_id = request_id(req.get_header(REQUEST_ID_HEADER))

    def process_response(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        resource: object,
        req_succeeded: bool,
    ) -> None:
        """Set the request id header and write the access-log line."""
        rid: str = req.context.request_id
        resp.set_header(REQUEST_ID_HEADER, rid)
        if not self.logger.isEnabledFor(logging.INFO):
            return
        elapsed_ms = (time.perf_counter() - req.context.started) * 1000
        log_request(self.logger, req.method, req.path, resp.status_code, elapsed_ms, rid)
