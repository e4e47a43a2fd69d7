"""Sessions of the web console: signed, expiring, kept in the store.

Signing in trades an account token for a session; the token itself is never kept. The
session's cookie value is ``<session id>.<nonce>.<signature>``: the signature is an HMAC made
with a key held in the store (so every server sharing the store accepts it), and the store
keeps only a hash of the nonce. Each request resolves the cookie again against the store and
the session's token: a session ends when it expires, when it is signed out, and as soon as
its token is suspended, revoked or expired. Suspending or revoking a token deletes its
sessions in the same transaction (``api_tokens/suspend``), so a token suspended and activated
again, even with no request between, does not bring them back. Signing in again starts
another session and leaves the others running (one per browser); suspending the token ends
them all. A CSRF token is bound to the session.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime, timedelta

import attrs

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.context import Principal
from governance_core.errors import NotPermitted
from governance_core.repository import Filter, SortKey, Tables
from governance_core.service import Governance, Session
from governance_core.storage.protocol import Store

__all__ = ["SESSION_LIFETIME", "ConsoleSession", "ConsoleSessions", "Ticket"]

SESSION_LIFETIME = timedelta(hours=12)
"""How long a console session lasts after sign-in."""

PURGE_BATCH = 100
"""How many expired sessions a sign-in deletes on its way (sessions also end on their next use)."""

SIGNING = "session_signing"


@attrs.frozen
class Ticket:
    """A new session's cookie value (a secret) and when it expires."""

    cookie: str
    expires_at: datetime


@attrs.frozen
class ConsoleSession:
    """A resolved, live session: who it acts as and its CSRF token."""

    id: str
    principal: Principal
    expires_at: datetime
    csrf_token: str

    def check_csrf(self, sent: str | None) -> bool:
        """Whether ``sent`` is this session's CSRF token (compared in constant time)."""
        return sent is not None and hmac.compare_digest(sent.encode(), self.csrf_token.encode())


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class ConsoleSessions:
    """Sign in, resolve and sign out console sessions of one :class:`Governance`."""

    def __init__(self, governance: Governance, lifetime: timedelta = SESSION_LIFETIME) -> None:
        self.governance = governance
        self.lifetime = lifetime

    @property
    def _store(self) -> Store:
        return self.governance.store

    @property
    def _tables(self) -> Tables:
        return self.governance.tables

    def _key(self) -> bytes:
        """The signing key, made once per store; the oldest one wins a race between servers."""
        kept = self._tables.console_secrets
        signing = [Filter("purpose", "eq", SIGNING)]
        found = kept.query(signing, limit=1)
        if not found:
            now = self.governance.clock()
            with self._store.transaction():
                if not kept.query(signing, limit=1):
                    kept.put({
                        "id": self.governance.ids.new(0, now),
                        "account_id": "",
                        "inserted_at": format_timestamp(now),
                        "purpose": SIGNING,
                        "secret": secrets.token_urlsafe(32),
                    })
            found = kept.query(signing, sort=[SortKey("id")], limit=1)
        return str(found[0]["secret"]).encode()

    def _sign(self, key: bytes, text: str) -> str:
        return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()

    def sign_in(self, token: str) -> Ticket:
        """Start a session for an account token.

        ``bad_authtoken``/``not_authenticated`` for a token that cannot authenticate;
        ``not_permitted`` for an ingestion (``agent_deployment``) token.
        """
        principal = self.governance.authenticate(token.strip())
        if principal.scope != "account":
            raise NotPermitted("an ingestion token cannot sign in to the console")
        now = self.governance.clock()
        expires_at = now + self.lifetime
        session_id = self.governance.ids.new(principal.partition, now)
        nonce = secrets.token_urlsafe(24)
        expired = self._tables.console_sessions.query(
            [Filter("expires_at", "le", format_timestamp(now))], limit=PURGE_BATCH
        )
        with self._store.transaction():
            for record in expired:
                self._tables.console_sessions.delete(record["id"])
            self._tables.console_sessions.put({
                "id": session_id,
                "account_id": principal.account_id,
                "inserted_at": format_timestamp(now),
                "token_id": principal.token_id,
                "expires_at": format_timestamp(expires_at),
                "nonce_hash": _digest(nonce),
            })
        text = f"{session_id}.{nonce}"
        return Ticket(f"{text}.{self._sign(self._key(), text)}", expires_at)

    def accept_invite(self, invite_token: str, name: str | None = None) -> Ticket:
        """Accept an admin user invite and start a session as the new admin user.

        The account token the acceptance issues is used for the session and shown nowhere.
        """
        issued = self.governance.accept_invite(invite_token.strip(), name=name)
        return self.sign_in(issued.token)

    def resolve(self, cookie: str | None) -> ConsoleSession | None:
        """The live session a cookie value stands for, or None.

        A session whose token no longer authenticates is deleted on the way.
        """
        if not cookie or cookie.count(".") != 2:
            return None
        session_id, nonce, signature = cookie.split(".")
        key = self._key()
        expected = self._sign(key, f"{session_id}.{nonce}")
        if not hmac.compare_digest(signature.encode(), expected.encode()):
            return None
        record = self._tables.console_sessions.get(session_id)
        if record is None or not hmac.compare_digest(record["nonce_hash"], _digest(nonce)):
            return None
        now = self.governance.clock()
        expires_at = parse_timestamp(record["expires_at"])
        principal = self._principal(record["token_id"], now) if expires_at > now else None
        if principal is None:
            with self._store.transaction():
                self._tables.console_sessions.delete(session_id)
            return None
        csrf = self._sign(key, f"csrf.{session_id}")
        return ConsoleSession(session_id, principal, expires_at, csrf)

    def _principal(self, token_id: str, now: datetime) -> Principal | None:
        """The caller of a session's token while it is active and unexpired."""
        token = self._tables.api_tokens.get(token_id)
        if token is None or token["status"] != "active" or token["token_scope"] != "account":
            return None
        if token.get("expires_at") and parse_timestamp(token["expires_at"]) <= now:
            return None
        account = self._tables.accounts.get(token["account_id"])
        if account is None:
            return None
        return Principal(
            account_id=token["account_id"],
            partition=account["partition"],
            scope="account",
            token_id=token["id"],
            admin_user_id=token.get("admin_user_id"),
        )

    def session(self, console_session: ConsoleSession) -> Session:
        """Access to the session's account as its caller, through the core operations."""
        return Session(self.governance, console_session.principal)

    def sign_out(self, cookie: str | None) -> None:
        """End the session a cookie value stands for (nothing when it is not a session)."""
        found = self.resolve(cookie)
        if found is not None:
            with self._store.transaction():
                self._tables.console_sessions.delete(found.id)
