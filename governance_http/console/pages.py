"""The console's pages: each reads and acts through core operations as the signed-in caller.

Lists ask the core for one page at a time; a run's span tree is read one level (and one page
of a level) at a time, so a run with any number of spans opens with a few small queries.
"""

from __future__ import annotations

import hmac
from collections import Counter, defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, time, timedelta
from decimal import Decimal
from typing import Any
from urllib.parse import urlencode

import falcon

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.console_sessions import SESSION_LIFETIME
from governance_core.errors import GovernanceError, NotFound
from governance_core.rules.cost import cost_breakdown, extract_usage
from governance_core.rules.sensitive import MARKER_KEY
from governance_http.console.charts import RISK_LEVELS, bar_chart, stacked_chart, waterfall_bar
from governance_http.console.web import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    Console,
    Visit,
    duration,
    local_path,
)
from governance_http.errors import http_status_for

__all__ = ["routes"]

PAGE_SIZE = 25
MAX_DEPTH = 12
"""The deepest indentation the span tree draws (deeper spans line up at this depth)."""
SPAN_PAGE = 100
SCAN_PAGE = 100
SCAN_LIMIT = 1000
"""The most runs a page computing over runs (risk filter, overview plots) reads."""
RUN_STATUSES = ("pending", "active", "complete", "failed", "cancelled", "terminated")
STARTED_STATUSES = RUN_STATUSES[1:]
LIVE_STATUSES = ("pending", "active")
SEVERITIES = ("critical", "error", "warning", "info")
RUN_SORTS = {
    "-started_at": "Newest first", "started_at": "Oldest first",
    "-finished_at": "Recently finished", "status": "Status",
}
SINCE = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}


def _whole_number(raw: str | None, below: int) -> int | None:
    """``raw`` as a whole number under ``below``, or None: ASCII digits only (not ``²``)."""
    if raw is None or not raw.isascii() or not raw.isdigit() or len(raw) > len(str(below)):
        return None
    number = int(raw)
    return number if number < below else None


def _offset(visit: Visit) -> int:
    return _whole_number(visit.query("offset"), 10**9) or 0


def _scan(visit: Visit, operation: str, **params: Any) -> Iterator[dict[str, Any]]:
    """The rows of a list operation, page by page, at most :data:`SCAN_LIMIT` of them."""
    offset = 0
    while offset < SCAN_LIMIT:
        page = visit.call(operation, **params, **{
            "pagination[offset]": offset, "pagination[page_size]": SCAN_PAGE,
        })
        yield from page["summaries"]
        offset = page["pagination"]["next_page_offset"]
        if offset is None:
            return


def _names(visit: Visit, operation: str) -> dict[str, str]:
    """Names of up to :data:`SCAN_LIMIT` agents or environments, by id."""
    return {row["id"]: row["name"] for row in _scan(visit, operation, sorting="name")}


def _risk_level(run: dict[str, Any]) -> str | None:
    score = run.get("risk_score") or {}
    level = score.get("risk_level")
    return level if isinstance(level, str) else None


def _run_row(run: dict[str, Any], now: datetime) -> dict[str, Any]:
    cost = (run.get("cost_breakdown") or {}).get("total_cost")
    return {
        **run,
        "duration": duration(run.get("started_at"), run.get("finished_at"), now),
        "total_cost": cost,
        "risk_level": _risk_level(run),
    }


# -- sign-in -----------------------------------------------------------------------------
class SignIn:
    """``/sign-in``: paste an account token, or accept an admin user invite."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def _form(
        self,
        req: falcon.Request,
        resp: falcon.Response,
        status: int = 200,
        error: str = "",
        next_path: object = None,
    ) -> None:
        self.console.secure(req, resp)
        csrf = self.console.sign_in_csrf(req, resp)
        next_path = local_path(next_path or req.get_param("next"))
        self.console.render(resp, "sign_in.html", status, csrf_token=csrf, next=next_path,
                            error=error)

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """The sign-in form; a visitor already signed in goes on to the page asked for."""
        if self.console.sessions.resolve(req.cookies.get(SESSION_COOKIE)) is not None:
            self.console.secure(req, resp)
            resp.status = falcon.HTTP_303
            resp.location = local_path(req.get_param("next"))
            return
        self._form(req, resp)

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """Start a session from a token or an invite; the secret never reaches a page."""
        form = self.console.read_form(req)
        expected = req.cookies.get(SIGN_IN_COOKIE)
        if (
            not expected
            or not hmac.compare_digest(form.get("csrf_token", "").encode(), expected.encode())
            or not self.console.same_origin(req)
        ):
            self._form(req, resp, 403, "The form expired. Try again.", form.get("next"))
            return
        try:
            if form.get("invite_token"):
                ticket = self.console.sessions.accept_invite(
                    form["invite_token"], name=form.get("name") or None
                )
            else:
                ticket = self.console.sessions.sign_in(form.get("token", ""))
        except GovernanceError as error:
            self._form(req, resp, http_status_for(error), f"Sign-in refused: {error.message}.",
                       form.get("next"))
            return
        self.console.secure(req, resp)
        self.console.set_cookie(
            req, resp, SESSION_COOKIE, ticket.cookie, int(SESSION_LIFETIME.total_seconds())
        )
        resp.unset_cookie(SIGN_IN_COOKIE, path="/", same_site="Strict")
        resp.status = falcon.HTTP_303
        resp.location = local_path(form.get("next"))


class SignOut:
    """``POST /sign-out``: end the session."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def on_post(self, req: falcon.Request, resp: falcon.Response) -> None:
        """End the session and forget the cookie."""

        def sign_out(visit: Visit) -> None:
            self.console.sessions.sign_out(req.cookies.get(SESSION_COOKIE))
            resp.unset_cookie(SESSION_COOKIE, path="/", same_site="Strict")
            visit.redirect("/sign-in")

        self.console.visit(req, resp, sign_out)


# -- overview ----------------------------------------------------------------------------
def _count_runs(visit: Visit, **filters: Any) -> int:
    page = visit.call("agent_instances/list", **filters, **{"pagination[page_size]": 1})
    return int(page["pagination"]["item_count"])


def _status_counts(visit: Visit, since: datetime) -> dict[str, int]:
    """Runs started since ``since`` by status (a pending run has not started: not counted)."""
    counts = {}
    for status in STARTED_STATUSES:
        counts[status] = _count_runs(visit, status=status, start_time=format_timestamp(since))
    return counts


def overview(visit: Visit) -> None:
    """Runs by status, cost per day, risk levels per day, raised alerts."""
    now = visit.now
    windows = {
        label: _status_counts(visit, now - span)
        for label, span in (("Last 24 hours", SINCE["24h"]), ("Last 7 days", SINCE["7d"]))
    }
    days = [(now - timedelta(days=back)).date() for back in range(6, -1, -1)]
    cost: dict[Any, Decimal] = defaultdict(Decimal)
    risk: dict[Any, Counter[str]] = defaultdict(Counter)
    scanned = 0
    first_day = datetime.combine(days[0], time(0), tzinfo=UTC)
    for run in _scan(visit, "agent_instances/list", sorting="-started_at",
                     start_time=format_timestamp(first_day)):
        scanned += 1
        day = parse_timestamp(run["started_at"]).date()
        total = (run.get("cost_breakdown") or {}).get("total_cost")
        if total is not None:
            cost[day] += Decimal(str(total))
        level = _risk_level(run)
        if level is not None:
            risk[day][level] += 1
    labels = [day.strftime("%a %d") for day in days]
    cost_chart = bar_chart([(label, cost[day]) for label, day in zip(labels, days, strict=True)],
                           unit="$")
    risk_chart = stacked_chart(
        [(label, risk[day]) for label, day in zip(labels, days, strict=True)]
    )
    alerts = visit.call("alerts/list", status="raised", sorting="-raised_at",
                        **{"pagination[page_size]": 10})
    visit.render(
        "overview.html", windows=windows, statuses=STARTED_STATUSES,
        pending=_count_runs(visit, status="pending"), cost_chart=cost_chart,
        risk_chart=risk_chart, risk_levels=RISK_LEVELS, scanned=scanned,
        scan_limit=SCAN_LIMIT, alerts=alerts,
    )


# -- agents ------------------------------------------------------------------------------
def agents_page(visit: Visit) -> None:
    """The agents, one page at a time."""
    sorting = visit.query("sort") or "name"
    if sorting not in ("name", "-last_activity_span_at", "status"):
        sorting = "name"
    page = visit.call("agents/list", sorting=sorting, **{
        "pagination[offset]": _offset(visit), "pagination[page_size]": PAGE_SIZE,
    })
    profiles = _names(visit, "risk_profiles/list")
    visit.render("agents.html", page=page, profiles=profiles, sort=sorting)


def agent_page(visit: Visit, agent_id: str) -> None:
    """One agent: versions, deployments and recent runs."""
    agent = visit.call("agents/show", agent_id=agent_id)["details"]
    versions = visit.call("agent_versions/list", agent_id=agent_id, sorting="-inserted_at",
                          **{"pagination[page_size]": 20})
    deployments = visit.call("agent_deployments/list", agent_id=agent_id,
                             **{"pagination[page_size]": 50})
    runs = visit.call("agent_instances/list", agent_id=agent_id, sorting="-started_at",
                      **{"pagination[page_size]": 20})
    environments = _names(visit, "environments/list")
    profile = None
    if agent.get("risk_profile_id"):
        profile = visit.call("risk_profiles/show", risk_profile_id=agent["risk_profile_id"])
    visit.render(
        "agent.html", agent=agent, versions=versions, deployments=deployments,
        rows=[_run_row(run, visit.now) for run in runs["summaries"]], environments=environments,
        profile=profile and profile["details"],
    )


# -- runs --------------------------------------------------------------------------------
def runs_page(visit: Visit) -> None:
    """Runs, filtered, sorted and paginated by the core; risk level filtered on a scan."""
    chosen = {
        "agent_id": visit.query("agent_id"),
        "environment_id": visit.query("environment_id"),
        "status": visit.query("status"),
        "purpose": visit.query("purpose"),
    }
    since = visit.query("since")
    start_time = format_timestamp(visit.now - SINCE[since]) if since in SINCE else None
    sort = visit.query("sort") or "-started_at"
    if sort not in RUN_SORTS:
        sort = "-started_at"
    risk_level = visit.query("risk_level")
    if risk_level not in RISK_LEVELS:
        risk_level = None
    offset = _offset(visit)
    filters = {**chosen, "start_time": start_time, "sorting": sort}
    truncated = False
    if risk_level is None:
        page = visit.call("agent_instances/list", **filters, **{
            "pagination[offset]": offset, "pagination[page_size]": PAGE_SIZE,
        })
        rows, total = page["summaries"], page["pagination"]["item_count"]
    else:
        matching = []
        seen = 0
        for run in _scan(visit, "agent_instances/list", **filters):
            seen += 1
            if _risk_level(run) == risk_level:
                matching.append(run)
        truncated = seen >= SCAN_LIMIT
        rows, total = matching[offset:offset + PAGE_SIZE], len(matching)
    params = {k: v for k, v in {**chosen, "since": since, "sort": sort,
                                 "risk_level": risk_level}.items() if v}
    visit.render(
        "runs.html", rows=[_run_row(run, visit.now) for run in rows], total=total,
        offset=offset, page_size=PAGE_SIZE, params=params, chosen=chosen, since=since,
        sort=sort, risk_level=risk_level, truncated=truncated, scan_limit=SCAN_LIMIT,
        agents=_names(visit, "agents/list"), environments=_names(visit, "environments/list"),
        statuses=RUN_STATUSES, purposes=("live", "smoke_test", "eval"), sorts=RUN_SORTS,
        risk_levels=RISK_LEVELS, since_choices=SINCE, query=urlencode,
    )


def _window(run: dict[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """The time a run's waterfall spans: its start (or registration) to its end (or now)."""
    first = parse_timestamp(run.get("started_at") or run["inserted_at"])
    last_text = run.get("finished_at") or run.get("last_activity_span_at")
    last = parse_timestamp(last_text) if last_text else now
    if run["status"] in LIVE_STATUSES:
        last = max(last, now)
    return first, max(last, first + timedelta(milliseconds=1))


def _span_rows(
    visit: Visit, run: dict[str, Any], parent: str | None, offset: int, depth: int = 0
) -> dict[str, Any]:
    """One page of a run's spans under ``parent`` (top level when None), with their bars.

    ``depth`` is how deep in the tree the rows sit (it indents their names only, so every
    timeline bar shares one time axis).
    """
    params: dict[str, Any] = {
        "agent_instance_id": run["id"], "sorting": "started_at", "include_summaries": "true",
        "pagination[offset]": offset, "pagination[page_size]": SPAN_PAGE,
    }
    if parent is None:
        params["top_level"] = "true"
    else:
        params["parent_span_id"] = parent
    page = visit.call("agent_spans/list", **params)
    window = _window(run, visit.now)
    spans = []
    for span in page["summaries"]:
        left, width = waterfall_bar(span.get("started_at"), span.get("finished_at"), window)
        spans.append({
            **span, "left": left, "width": width,
            "duration": duration(span.get("started_at"), span.get("finished_at"), visit.now),
        })
    return {"spans": spans, "pagination": page["pagination"], "parent": parent, "depth": depth}


def _risk_thresholds(visit: Visit, agent: dict[str, Any]) -> dict[str, Any] | None:
    if agent.get("risk_profile_id"):
        profile = visit.call("risk_profiles/show", risk_profile_id=agent["risk_profile_id"])
        return dict(profile["details"]["ruleset"]["thresholds"])
    for profile in _scan(visit, "risk_profiles/list"):
        if profile.get("is_default"):
            return dict(profile["ruleset"]["thresholds"])
    return None


def _run_header(visit: Visit, run_id: str) -> dict[str, Any]:
    run = visit.call(
        "agent_instances/show", agent_instance_id=run_id, redacted="true"
    )["details"]
    return {"run": _run_row(run, visit.now), "live": run["status"] in LIVE_STATUSES}


def run_page(visit: Visit, run_id: str) -> None:
    """A run: header, span tree with waterfall, cost, risk, quality and alerts."""
    header = _run_header(visit, run_id)
    run = header["run"]
    agent = visit.call("agents/show", agent_id=run["agent_id"])["details"]
    environment = visit.call("environments/show", environment_id=run["environment_id"])
    version = visit.call("agent_versions/show", agent_version_id=run["agent_version_id"])
    alerts = visit.call("alerts/list", agent_instance_id=run_id, sorting="-raised_at",
                        **{"pagination[page_size]": 50})
    visit.render(
        "run.html", **header, agent=agent, environment=environment["details"],
        version=version["details"], alerts=alerts,
        tree=_span_rows(visit, run, None, _offset(visit)),
        thresholds=_risk_thresholds(visit, agent) if run.get("risk_score") else None,
    )


def run_live(visit: Visit, run_id: str) -> None:
    """The header fragment a running run's page polls."""
    visit.render("run_header.html", **_run_header(visit, run_id))


def run_spans(visit: Visit, run_id: str) -> None:
    """One page of a span's children (or of the top level): a fragment, or a page without JS."""
    run = visit.call(
        "agent_instances/show", agent_instance_id=run_id, redacted="true"
    )["details"]
    parent = visit.query("parent")
    depth = min(_whole_number(visit.query("depth"), 1000) or 0, MAX_DEPTH)
    template = "span_rows.html" if visit.query("fragment") else "spans.html"
    visit.render(template, run=run, tree=_span_rows(visit, run, parent, _offset(visit), depth))


def _span_cost(visit: Visit, span: dict[str, Any]) -> dict[str, Any] | None:
    usage = extract_usage(span.get("payload"), span.get("result_payload"))
    if usage is None or span.get("purpose") != "activity":
        return None
    return cost_breakdown([usage.token_group()], visit.console.governance.config.pricing)


def _value_at(document: Any, pointer: str) -> Any:
    node = document
    for raw in pointer[1:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _span_view(visit: Visit, run_id: str, span_id: str, revealed: dict[str, Any]) -> None:
    span = visit.call("agent_spans/show", agent_span_id=span_id, redacted="true",
                      include_risk_level="true")["details"]
    if span["agent_instance_id"] != run_id:
        raise NotFound("agent_span not found")
    reveals = visit.call("agent_spans/reveals", agent_span_id=span_id, sorting="-inserted_at",
                         **{"pagination[page_size]": 10})
    template = "span_detail.html" if visit.query("fragment") else "span.html"
    visit.render(template, span=span, run_id=run_id, cost=_span_cost(visit, span),
                 revealed=revealed, reveals=reveals, marker_key=MARKER_KEY)


def span_page(visit: Visit, run_id: str, span_id: str) -> None:
    """A span's detail, sensitive values redacted (a page, or a fragment with ``fragment``)."""
    _span_view(visit, run_id, span_id, {})


def reveal_value(visit: Visit, run_id: str, span_id: str) -> None:
    """Record the reveal of one sensitive value, then show the span with that value."""
    pointer = visit.form.get("pointer", "")
    visit.call("agent_spans/record_reveal", agent_span_id=span_id, pointer=pointer)
    full = visit.call("agent_spans/show", agent_span_id=span_id, redacted="false")["details"]
    _span_view(visit, run_id, span_id, {pointer: _value_at(full, pointer)})


def terminate_run(visit: Visit, run_id: str) -> None:
    """Terminate a running run with the reason given."""
    visit.call("agent_instances/terminate", agent_instance_id=run_id,
               reason=visit.form.get("reason", ""))
    visit.redirect(f"/runs/{run_id}")


# -- alerts ------------------------------------------------------------------------------
def alerts_page(visit: Visit) -> None:
    """Alerts, filtered by severity and status."""
    severity = visit.query("severity")
    status = visit.query("status") or "raised"
    filters = {
        "severity": severity if severity in SEVERITIES else None,
        "status": status if status in ("raised", "cleared") else None,
    }
    page = visit.call("alerts/list", **filters, sorting="-raised_at", **{
        "pagination[offset]": _offset(visit), "pagination[page_size]": PAGE_SIZE,
    })
    params = {k: v for k, v in {"severity": severity, "status": status}.items() if v}
    visit.render("alerts.html", page=page, severity=filters["severity"], chosen_status=status,
                 severities=SEVERITIES, params=params, agents=_names(visit, "agents/list"),
                 query=urlencode)


def clear_alert(visit: Visit) -> None:
    """Clear a raised alert (by run and name) and go back."""
    visit.call("alerts/clear", agent_instance_id=visit.form.get("agent_instance_id", ""),
               name=visit.form.get("name", ""))
    visit.redirect(visit.form.get("next") or "/alerts")


# -- settings ----------------------------------------------------------------------------
def settings_page(visit: Visit, created: dict[str, Any] | None = None) -> None:
    """Environments, risk profiles with their rulesets, and API tokens."""
    visit.render(
        "settings.html",
        environments=list(_scan(visit, "environments/list", sorting="name")),
        profiles=list(_scan(visit, "risk_profiles/list", sorting="name")),
        tokens=visit.call("api_tokens/list", sorting="-inserted_at", **{
            "pagination[offset]": _offset(visit), "pagination[page_size]": PAGE_SIZE,
        }),
        agents=_names(visit, "agents/list"), environment_names=_names(visit, "environments/list"),
        created=created,
    )


def create_token(visit: Visit) -> None:
    """Create a token and show its secret on this one answer."""
    scope = visit.form.get("token_scope") or "account"
    made = visit.call(
        "api_tokens/create", token_scope=scope,
        description=visit.form.get("description") or None,
        agent_id=visit.form.get("agent_id") or None if scope == "agent_deployment" else None,
        environment_id=(
            visit.form.get("environment_id") or None if scope == "agent_deployment" else None
        ),
    )
    settings_page(visit, created={"details": made["details"], "token": made["token"]})


def token_action(visit: Visit, token_id: str, action: str) -> None:
    """Suspend, activate or revoke a token."""
    if action not in ("suspend", "activate", "revoke"):
        raise NotFound("unknown token action")
    visit.call(f"api_tokens/{action}", api_token_id=token_id)
    visit.redirect("/settings")


# -- routing -----------------------------------------------------------------------------
class Page:
    """A Falcon resource rendering a page function through :meth:`Console.visit`."""

    def __init__(self, console: Console, get: Any, *, fragment: bool = False) -> None:
        self.console = console
        self.get = get
        self.fragment = fragment

    def on_get(self, req: falcon.Request, resp: falcon.Response, **params: str) -> None:
        """Render the page (a fragment when asked with ``fragment``)."""
        fragment = self.fragment or bool(req.get_param("fragment"))
        self.console.visit(req, resp, lambda visit: self.get(visit, **params), fragment=fragment)


class Action:
    """A Falcon resource running an action function (a CSRF-checked form post)."""

    def __init__(self, console: Console, post: Any) -> None:
        self.console = console
        self.post = post

    def on_post(self, req: falcon.Request, resp: falcon.Response, **params: str) -> None:
        """Run the action."""
        self.console.visit(req, resp, lambda visit: self.post(visit, **params))


def routes(console: Console) -> list[tuple[str, object]]:
    """Every console path and its resource."""
    return [
        ("/", Page(console, overview)),
        ("/sign-in", SignIn(console)),
        ("/sign-out", SignOut(console)),
        ("/agents", Page(console, agents_page)),
        ("/agents/{agent_id}", Page(console, agent_page)),
        ("/runs", Page(console, runs_page)),
        ("/runs/{run_id}", Page(console, run_page)),
        ("/runs/{run_id}/live", Page(console, run_live, fragment=True)),
        ("/runs/{run_id}/spans", Page(console, run_spans)),
        ("/runs/{run_id}/terminate", Action(console, terminate_run)),
        ("/runs/{run_id}/spans/{span_id}", Page(console, span_page)),
        ("/runs/{run_id}/spans/{span_id}/reveal", Action(console, reveal_value)),
        ("/alerts", Page(console, alerts_page)),
        ("/alerts/clear", Action(console, clear_alert)),
        ("/settings", Page(console, settings_page)),
        ("/settings/tokens", Action(console, create_token)),
        ("/settings/tokens/{token_id}/{action}", Action(console, token_action)),
    ]
