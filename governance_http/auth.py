"""The bearer token of a request; the core, not this module, decides whether it is valid."""

from __future__ import annotations

import falcon

from governance_core.errors import BadAuthToken

__all__ = ["bearer_token"]


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
