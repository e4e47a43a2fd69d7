"""The console's plumbing: sessions from cookies, CSRF, forms, security headers, rendering.

Every page runs through :meth:`Console.visit`: it resolves the session (a sign-in redirect
without one), checks the CSRF token of a form, runs the page and renders a core error as an
HTML page with the API's status for it. Pages act only through :class:`Visit.call`, which is
``Session.call``: the same core operations, scope checks and account isolation as the API; the
few figures no operation answers (counts and sums over many runs) come from core functions
given :meth:`Visit.context`, the caller's own context, which keep to its account as well.
"""

from __future__ import annotations

import json
import math
import re
import secrets
from collections.abc import Callable, Collection, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode

import falcon
import jinja2

from governance_core.clock import parse_timestamp
from governance_core.console_sessions import ConsoleSession, ConsoleSessions
from governance_core.context import Context
from governance_core.errors import GovernanceError, ValidationErrors
from governance_core.service import Governance, Session
from governance_http.errors import http_status_for
from governance_http.money import format_money

__all__ = [
    "FLASHES",
    "FLASH_COOKIE",
    "FORM_LIMIT",
    "SCAN_LIMIT",
    "SCAN_PAGE",
    "SECURITY_HEADERS",
    "SESSION_COOKIE",
    "SIGN_IN_COOKIE",
    "Console",
    "Visit",
    "chosen_window",
    "duration",
    "local_path",
    "templates",
    "whole_number",
]

SESSION_COOKIE = "governance_session"
"""The cookie holding the signed session value."""

SIGN_IN_COOKIE = "governance_sign_in"
"""The double-submit CSRF cookie of the sign-in forms (there is no session yet)."""

FORM_LIMIT = 64 * 1024
"""The largest form body a console page reads."""

CSRF_FIELD = "csrf_token"

SCAN_PAGE = 100
SCAN_LIMIT = 1000
"""The most agents, environments or risk profiles a page names in its choices."""

FLASH_COOKIE = "governance_flash"
"""The cookie carrying a confirmation across an action's redirect to the next page."""

FLASHES: Mapping[str, str] = {
    "alert_cleared": "The alert was cleared.",
    "approval_approved": "The action was approved: the agent may take it once, as asked.",
    "approval_rejected": "The action was rejected: the agent is told it may not take it.",
    "policy_created": "The policy was created.",
    "policy_saved": "The policy was saved.",
    "policy_mode": "The policy's mode was changed.",
}
"""The confirmations a page shows once after an action, by the code the cookie holds."""

SECURITY_HEADERS: Mapping[str, str] = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
"""Headers on every console page: no inline script, no framing, no caching of account data."""

TEMPLATES = Path(__file__).parent / "templates"
_LOCAL = re.compile(r"^/(?![/\\])[^\s\\]*$")


def local_path(value: object, default: str = "/") -> str:
    """``value`` when it is a path on this site (no scheme, host or ``//``), else ``default``."""
    if isinstance(value, str) and _LOCAL.match(value) and not value.startswith("/api/"):
        return value
    return default


def whole_number(raw: str | None, below: int) -> int | None:
    """``raw`` as a whole number under ``below``, or None: ASCII digits only (not ``²``)."""
    if raw is None or not raw.isascii() or not raw.isdigit() or len(raw) > len(str(below)):
        return None
    number = int(raw)
    return number if number < below else None


def chosen_window(
    raw: str | None, windows: Collection[int], default: int
) -> tuple[int, str | None]:
    """The window of days a page's ``window`` query asks for, and an error when not offered.

    ``windows`` are the days the page offers; anything else is answered with ``default``
    and a message naming them.
    """
    if raw is None:
        return default, None
    if raw in {str(days) for days in windows}:
        return int(raw), None
    return default, f"window: one of {', '.join(str(days) for days in windows)} (days)"


def _timestamp(value: object) -> str:
    if not isinstance(value, str) or not value:
        return "—"
    return parse_timestamp(value).strftime("%Y-%m-%d %H:%M:%S")


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.1f} h"


def duration(start: object, end: object, now: datetime | None = None) -> float | None:
    """Seconds from ``start`` to ``end`` (or to ``now`` while running); None without start."""
    if not isinstance(start, str) or not start:
        return None
    finish = parse_timestamp(end) if isinstance(end, str) and end else now
    if finish is None:
        return None
    return max(0.0, (finish - parse_timestamp(start)).total_seconds())


def _number(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}".rstrip("0").rstrip(".") if math.isfinite(value) else str(value)
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return "—" if value is None else str(value)


def _json_text(value: object) -> str:
    return json.dumps(value, ensure_ascii=False)


def _json_block(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, indent=2)


def _short(value: object) -> str:
    return f"…{value[-8:]}" if isinstance(value, str) and len(value) > 8 else str(value)


def templates() -> jinja2.Environment:
    """The console's template environment: every value autoescaped, undefined is an error."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        timestamp=_timestamp, seconds=_seconds, money=format_money, number=_number, short=_short,
        jsontext=_json_text, jsonblock=_json_block,
    )
    env.globals.update(urlencode=urlencode)
    return env


class Visit:
    """One request to a console page: its session, form, and how to answer it.

    ``form`` holds the first value of each posted field, ``form_values`` every value (the
    ticked boxes of a list share one name).
    """

    def __init__(
        self,
        console: Console,
        req: falcon.Request,
        resp: falcon.Response,
        session: ConsoleSession,
        form: Mapping[str, list[str]],
    ) -> None:
        self.console = console
        self.req = req
        self.resp = resp
        self.session = session
        self.form: Mapping[str, str] = {name: values[0] for name, values in form.items()}
        self.form_values = form
        self.core: Session = console.sessions.session(session)
        self.flash_message: str | None = None

    @property
    def now(self) -> datetime:
        """The clock's now (the core's clock, so tests control it)."""
        return self.console.governance.clock()

    def call(self, operation: str, **params: Any) -> dict[str, Any]:
        """Run a core operation as the session's caller; None values are left out."""
        return self.core.call(operation, {k: v for k, v in params.items() if v is not None})

    def context(self) -> Context:
        """A core context of the session's caller, for the core's reads that are no operation.

        They keep to the caller's account (and an ingestion token's reach) as operations do.
        """
        return self.console.governance.context(self.core.principal)

    def scan(self, operation: str, **params: Any) -> Iterator[dict[str, Any]]:
        """The rows of a list operation, page by page, at most :data:`SCAN_LIMIT` of them."""
        offset = 0
        while offset < SCAN_LIMIT:
            page = self.call(operation, **params, **{
                "pagination[offset]": offset, "pagination[page_size]": SCAN_PAGE,
            })
            yield from page["summaries"]
            offset = page["pagination"]["next_page_offset"]
            if offset is None:
                return

    def names(self, operation: str) -> dict[str, str]:
        """Names of up to :data:`SCAN_LIMIT` agents, environments or policies, by id."""
        return {row["id"]: row["name"] for row in self.scan(operation, sorting="name")}

    def query(self, name: str) -> str | None:
        """A query parameter, None when absent or empty."""
        value = self.req.get_param(name)
        return value or None

    def render(self, template: str, status: int = 200, **context: Any) -> None:
        """Answer with a rendered template."""
        self.console.render(self.resp, template, status, visit=self, flash=self.flash_message,
                            **context)

    def flash(self, code: str) -> None:
        """Have the next page shown confirm an action (a code of :data:`FLASHES`)."""
        self.console.set_cookie(self.req, self.resp, FLASH_COOKIE, code, 60)

    def redirect(self, location: str) -> None:
        """Answer 303 See Other to a path on this site."""
        self.resp.status = falcon.HTTP_303
        self.resp.location = local_path(location)
        self.resp.text = ""


Handler = Callable[[Visit], None]


class Console:
    """The console's shared parts: the governance, its sessions and the templates."""

    def __init__(self, governance: Governance) -> None:
        self.governance = governance
        self.sessions = ConsoleSessions(governance)
        self.env = templates()

    def render(
        self, resp: falcon.Response, template: str, status: int = 200, **context: Any
    ) -> None:
        """Render ``template`` as an HTML answer with the security headers."""
        context.setdefault("visit", None)
        context.setdefault("flash", None)
        resp.status = status
        resp.content_type = falcon.MEDIA_HTML
        resp.text = self.env.get_template(template).render(**context)

    def secure(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Set the security headers."""
        resp.set_headers(dict(SECURITY_HEADERS))

    def set_cookie(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        name: str,
        value: str,
        max_age: int | None,
    ) -> None:
        """Set an HttpOnly, SameSite=Strict cookie (Secure when the request came over TLS)."""
        resp.set_cookie(
            name, value, max_age=max_age, path="/", http_only=True, same_site="Strict",
            secure=req.forwarded_scheme == "https",
        )

    def read_form(self, req: falcon.Request) -> dict[str, str]:
        """The posted form's fields (first value each); a form over the limit is 413."""
        return {name: values[0] for name, values in self.read_form_values(req).items()}

    def read_form_values(self, req: falcon.Request) -> dict[str, list[str]]:
        """The posted form's fields with all their values; a form over the limit is 413."""
        body = req.bounded_stream.read(FORM_LIMIT + 1)
        if len(body) > FORM_LIMIT:
            raise falcon.HTTPContentTooLarge()
        try:
            return parse_qs(body.decode(), keep_blank_values=True, max_num_fields=200)
        except (UnicodeDecodeError, ValueError):
            return {}

    def same_origin(self, req: falcon.Request) -> bool:
        """Whether a POST's ``Origin`` header, when sent, names this site."""
        origin = req.get_header("Origin")
        if origin is None:
            return True
        return origin in (f"{req.scheme}://{req.netloc}", f"{req.forwarded_scheme}://{req.netloc}")

    def sign_in_csrf(self, req: falcon.Request, resp: falcon.Response) -> str:
        """The sign-in forms' double-submit token, set as a cookie when missing."""
        token = req.cookies.get(SIGN_IN_COOKIE)
        if not token or len(token) > 100:
            token = secrets.token_urlsafe(24)
            self.set_cookie(req, resp, SIGN_IN_COOKIE, token, None)
        return token

    def visit(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        handler: Handler,
        *,
        fragment: bool = False,
    ) -> None:
        """Run a page for the request's session; see the module docstring."""
        self.secure(req, resp)
        session = self.sessions.resolve(req.cookies.get(SESSION_COOKIE))
        if session is None:
            if req.method == "GET" and not fragment:
                resp.status = falcon.HTTP_303
                resp.location = "/sign-in?" + urlencode({"next": req.relative_uri})
                return
            self.render(resp, "error.html", 401, title="Signed out",
                        message="Your session has ended. Sign in again.")
            return
        form: dict[str, list[str]] = {}
        if req.method == "POST":
            form = self.read_form_values(req)
            sent = form.get(CSRF_FIELD)
            if not self.same_origin(req) or not session.check_csrf(sent[0] if sent else None):
                self.render(resp, "error.html", 403, title="Form expired",
                            message="The form could not be verified. Reload the page and try "
                                    "again.")
                return
        visit = Visit(self, req, resp, session, form)
        flash = req.cookies.get(FLASH_COOKIE)
        if flash is not None and req.method == "GET" and not fragment:
            # Shown once: the page that follows the action's redirect takes it.
            visit.flash_message = FLASHES.get(flash)
            resp.unset_cookie(FLASH_COOKIE, path="/", same_site="Strict")
        try:
            handler(visit)
        except ValidationErrors as error:
            problems = {name: problem.message for name, problem in error.errors.items()}
            self.render(resp, "error.html", http_status_for(error), visit=visit,
                        title="Not accepted", message=error.message, problems=problems)
        except GovernanceError as error:
            self.render(resp, "error.html", http_status_for(error), visit=visit,
                        title=error.code.replace("_", " ").capitalize(), message=error.message)

