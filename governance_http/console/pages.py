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
from governance_core.domain.insights import count_run_spans, run_totals
from governance_core.errors import GovernanceError, NotFound, TemporarilyUnavailable
from governance_core.rules.cost import cost_breakdown, extract_usage
from governance_core.rules.sensitive import MARKER_KEY
from governance_http.auth import counted_attempt, retry_after_header
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
MATCH_PAGE = 50
"""How many spans a page of a run's filtered spans lists."""
SPAN_STATUSES = ("active", "complete", "failed", "cancelled")
SCAN_PAGE = 100
SCAN_LIMIT = 1000
"""The most agents, environments or risk profiles a page names in its choices."""
RUN_STATUSES = ("pending", "active", "complete", "failed", "cancelled", "terminated")
STARTED_STATUSES = RUN_STATUSES[1:]
LIVE_STATUSES = ("pending", "active")
SEVERITIES = ("critical", "error", "warning", "info")
RUN_SORTS = {
    "-started_at": "Newest first", "started_at": "Oldest first",
    "-finished_at": "Recently finished", "status": "Status",
}
REVEAL_SHOWN_FOR = timedelta(minutes=5)
"""How long after a reveal the span's page shows the value again on reload, unrecorded."""
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
        credential = form.get("invite_token") or form.get("token", "")
        try:
            with counted_attempt(self.console.governance, req, credential):
                if form.get("invite_token"):
                    ticket = self.console.sessions.accept_invite(
                        form["invite_token"], name=form.get("name") or None
                    )
                else:
                    ticket = self.console.sessions.sign_in(form.get("token", ""))
        except GovernanceError as error:
            self._form(req, resp, http_status_for(error), f"Sign-in refused: {error.message}.",
                       form.get("next"))
            if isinstance(error, TemporarilyUnavailable):
                resp.set_header("Retry-After", retry_after_header(error))
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


def _run_totals(visit: Visit, group_by: list[str], since: datetime) -> list[dict[str, Any]]:
    """The caller's runs started since ``since``, counted and costed per group (one query)."""
    return run_totals(visit.context(), group_by, start_time=since)


def _status_counts(visit: Visit, since: datetime) -> dict[str, int]:
    """Runs started since ``since`` by status (a pending run has not started: not counted)."""
    counts = dict.fromkeys(STARTED_STATUSES, 0)
    for row in _run_totals(visit, ["status"], since):
        counts[row["status"]] = row["runs"]
    return counts


def overview(visit: Visit) -> None:
    """Runs by status, cost per day, risk levels per day, raised alerts.

    Every figure is a grouped count or sum of the store over all the runs it covers.
    """
    now = visit.now
    windows = {
        label: _status_counts(visit, now - span)
        for label, span in (("Last 24 hours", SINCE["24h"]), ("Last 7 days", SINCE["7d"]))
    }
    days = [(now - timedelta(days=back)).date() for back in range(6, -1, -1)]
    cost: dict[str, Decimal] = defaultdict(Decimal)
    risk: dict[str, Counter[str]] = defaultdict(Counter)
    first_day = datetime.combine(days[0], time(0), tzinfo=UTC)
    for row in _run_totals(visit, ["day", "risk_level"], first_day):
        if row["total_cost"] is not None:
            cost[row["day"]] += row["total_cost"]
        if row["risk_level"] is not None:
            risk[row["day"]][row["risk_level"]] += row["runs"]
    labels = [(day.strftime("%a %d"), day.isoformat()) for day in days]
    cost_chart = bar_chart([(label, cost[day]) for label, day in labels], unit="$")
    risk_chart = stacked_chart([(label, risk[day]) for label, day in labels])
    alerts = visit.call("alerts/list", status="raised", sorting="-raised_at",
                        **{"pagination[page_size]": 10})
    visit.render(
        "overview.html", windows=windows, statuses=STARTED_STATUSES,
        pending=_count_runs(visit, status="pending"), cost_chart=cost_chart,
        risk_chart=risk_chart, risk_levels=RISK_LEVELS, alerts=alerts,
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
    """Runs, filtered (risk level too), sorted and paginated by the core."""
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
    page = visit.call("agent_instances/list", **chosen, start_time=start_time, sorting=sort,
                      risk_level=risk_level, **{
                          "pagination[offset]": offset, "pagination[page_size]": PAGE_SIZE,
                      })
    params = {k: v for k, v in {**chosen, "since": since, "sort": sort,
                                 "risk_level": risk_level}.items() if v}
    visit.render(
        "runs.html", rows=[_run_row(run, visit.now) for run in page["summaries"]],
        total=page["pagination"]["item_count"], offset=offset, page_size=PAGE_SIZE,
        params=params, chosen=chosen, since=since, sort=sort, risk_level=risk_level,
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
    """The run, and how many spans its tree holds: its activity spans and its system spans.

    The run's ``span_counts`` count activity spans only; the tree also lists the quality and
    alert spans the system records, so the header names both.
    """
    run = visit.call(
        "agent_instances/show", agent_instance_id=run_id, redacted="true"
    )["details"]
    every = count_run_spans(visit.context(), run["id"])
    return {
        "run": _run_row(run, visit.now), "live": run["status"] in LIVE_STATUSES,
        "all_spans": every, "system_spans": every - run["span_counts"]["total"],
    }


def _span_matches(
    visit: Visit, run: dict[str, Any], status: str | None, kind: str | None
) -> dict[str, Any] | None:
    """One page of the run's spans of ``status`` and type ``kind``, in time order.

    None when neither is chosen (the page shows the tree). The store answers it from the
    index of a run's spans by status and start, so finding the 50 failed spans of a run of
    50,000 reads those 50.
    """
    if status is None and kind is None:
        return None
    page = visit.call(
        "agent_spans/list", agent_instance_id=run["id"], status=status, schema_name=kind,
        sorting="started_at", include_summaries="true",
        **{"pagination[offset]": _offset(visit), "pagination[page_size]": MATCH_PAGE},
    )
    spans = [
        {**span, "duration": duration(span.get("started_at"), span.get("finished_at"), visit.now)}
        for span in page["summaries"]
    ]
    params = {k: v for k, v in {"status": status, "type": kind}.items() if v}
    return {"spans": spans, "pagination": page["pagination"], "status": status, "type": kind,
            "params": params}


def run_page(visit: Visit, run_id: str) -> None:
    """A run: header, span tree with waterfall, cost, risk, quality and alerts.

    With ``status`` or ``type`` the tree gives way to the run's spans that filter picks.
    """
    header = _run_header(visit, run_id)
    run = header["run"]
    status = visit.query("status")
    if status not in SPAN_STATUSES:
        status = None
    types = sorted((run.get("span_schema_counts") or {}).get("by_name") or {})
    kind = visit.query("type")
    if kind not in types:
        kind = None
    matches = _span_matches(visit, run, status, kind)
    agent = visit.call("agents/show", agent_id=run["agent_id"])["details"]
    environment = visit.call("environments/show", environment_id=run["environment_id"])
    version = visit.call("agent_versions/show", agent_version_id=run["agent_version_id"])
    alerts = visit.call("alerts/list", agent_instance_id=run_id, sorting="-raised_at",
                        **{"pagination[page_size]": 50})
    visit.render(
        "run.html", **header, agent=agent, environment=environment["details"],
        version=version["details"], alerts=alerts, matches=matches,
        span_statuses=SPAN_STATUSES, span_types=types,
        tree=_span_rows(visit, run, None, _offset(visit)) if matches is None else None,
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


def _recent_reveal(visit: Visit, span_id: str, reveal_id: str) -> dict[str, Any] | None:
    """The reveal ``reveal_id`` of the span, when this caller made it within REVEAL_SHOWN_FOR.

    Looked for among the span's newest reveals; one that is older, someone else's, or of
    another span is None.
    """
    reveals = visit.call("agent_spans/reveals", agent_span_id=span_id, sorting="-inserted_at",
                         **{"pagination[page_size]": 100})
    principal = visit.core.principal
    for reveal in reveals["summaries"]:
        if (
            reveal["id"] == reveal_id
            and reveal["token_id"] == principal.token_id
            and reveal["admin_user_id"] == principal.admin_user_id
            and parse_timestamp(reveal["inserted_at"]) >= visit.now - REVEAL_SHOWN_FOR
        ):
            return dict(reveal)
    return None


def span_page(visit: Visit, run_id: str, span_id: str) -> None:
    """A span's detail, sensitive values redacted (a page, or a fragment with ``fragment``).

    ``reveal`` names a reveal this caller has just recorded (see :func:`reveal_value`): for
    :data:`REVEAL_SHOWN_FOR` after it, the page shows that value again without recording
    another reveal; afterwards the value is redacted again.
    """
    revealed: dict[str, Any] = {}
    reveal_id = visit.query("reveal")
    reveal = _recent_reveal(visit, span_id, reveal_id) if reveal_id else None
    if reveal is not None:
        full = visit.call("agent_spans/show", agent_span_id=span_id, redacted="false")["details"]
        revealed[reveal["pointer"]] = _value_at(full, reveal["pointer"])
    _span_view(visit, run_id, span_id, revealed)


def reveal_value(visit: Visit, run_id: str, span_id: str) -> None:
    """Record the reveal of one sensitive value, then send the browser to a page showing it.

    The answer is a redirect (POST-redirect-GET), so reloading the page shows the value again
    without recording a second reveal; the address names the recorded reveal, never the
    value.
    """
    pointer = visit.form.get("pointer", "")
    reveal = visit.call("agent_spans/record_reveal", agent_span_id=span_id, pointer=pointer)
    query = urlencode({"reveal": reveal["details"]["id"]})
    visit.redirect(f"/runs/{run_id}/spans/{span_id}?{query}")


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
