"""The credentials of a request: its bearer token, and the failed attempts of its address.

The core, not this module, decides whether a token is valid, and counts failures under the
token itself (:mod:`governance_core.rate_limits`). Only the HTTP layer knows the client's
address: :class:`FailedAttemptsGuard` refuses a request that presents a credential (an
``Authorization`` header, or an invite accept) from an address with too many recent
failures, and counts the request's failure under the address.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import falcon

from governance_core.errors import BadAuthToken, NotFound
from governance_core.rate_limits import AttemptKey, client_address, credential_mark
from governance_core.service import Governance
from governance_http.routes import PREFIX

__all__ = [
    "INVITE_ACCEPT_PATH",
    "FailedAttemptsGuard",
    "bearer_token",
    "counted_attempt",
    "request_address",
]

INVITE_ACCEPT_PATH = f"{PREFIX}/admin_user_invite/accept"
"""The route whose body carries a credential (the invite token) and no Authorization header."""


def bearer_token(req: falcon.Request) -> str | None:
    """Return the token of ``Authorization: Bearer <token>``, or None without that header.

    A header of another scheme, or a bearer header without a token, is ``bad_authtoken``: the
    caller tried to authenticate and the credential cannot be used.
    """
    header = req.get_header("Authorization")
    if header is None or not header.strip():
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        raise BadAuthToken("the Authorization header must have the form 'Bearer <token>'")
    return token


def request_address(governance: Governance, req: falcon.Request) -> str:
    """The client address the failures of ``req`` count under (see ``client_address``).

    It is the connection's peer (``REMOTE_ADDR``), or, from a trusted reverse proxy
    (``$GOVERNANCE_TRUSTED_PROXIES``), the client its ``X-Forwarded-For`` names.
    """
    return client_address(
        req.env.get("REMOTE_ADDR") or "",
        req.get_header("X-Forwarded-For"),
        governance.caches.failed_attempts.limit.trusted_proxies,
    )


@contextmanager
def counted_attempt(governance: Governance, req: falcon.Request, credential: str) -> Iterator[None]:
    """Present ``credential`` from ``req``'s address within the block.

    Before the block, an address with too many recent failures is refused
    ``temporarily_unavailable`` (rate limited); a ``bad_authtoken`` or ``not_found`` (an
    unknown invite) raised in the block counts as a failure of the address.
    """
    attempts = governance.caches.failed_attempts
    key = _address_key(governance, req)
    attempts.check(governance.clock, key)
    try:
        yield
    except (BadAuthToken, NotFound):
        attempts.fail(governance.clock, key, credential_mark(credential) if credential else None)
        raise


class FailedAttemptsGuard:
    """Falcon middleware: the limit on failed credentials per client address, for the API.

    A request with an ``Authorization`` header, or to :data:`INVITE_ACCEPT_PATH`, is refused
    ``temporarily_unavailable`` (429, ``retry_after_ms``) while its address is over the
    limit. Its answer ``401`` (the token failed), or ``404`` from the invite accept (no invite
    has the token), counts as a failure of the address. Other requests pass untouched.
    """

    def __init__(self, governance: Governance) -> None:
        self.governance = governance

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Refuse a credential from an address over the limit."""
        header = req.get_header("Authorization")
        if not (header and header.strip()) and not _is_invite_accept(req):
            return
        req.context.presents_credential = True
        attempts = self.governance.caches.failed_attempts
        # While nothing has failed, nothing can be refused: the address is not even read.
        if len(attempts):
            attempts.check(self.governance.clock, _address_key(self.governance, req))

    def process_response(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        resource: object,
        req_succeeded: bool,
    ) -> None:
        """Count a refused credential under the request's address."""
        if not req.context.get("presents_credential"):
            return
        status = resp.status_code
        if status == 401 or (status == 404 and _is_invite_accept(req)):
            header = (req.get_header("Authorization") or "").strip()
            # The whole header marks the credential: only its sameness matters.
            mark = credential_mark(header) if header else None
            self.governance.caches.failed_attempts.fail(
                self.governance.clock, _address_key(self.governance, req), mark
            )


def _is_invite_accept(req: falcon.Request) -> bool:
    return req.method == "POST" and req.path == INVITE_ACCEPT_PATH


def _address_key(governance: Governance, req: falcon.Request) -> AttemptKey:
    return ("address", request_address(governance, req))
