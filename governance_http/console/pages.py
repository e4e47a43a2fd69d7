"""The console's pages: each reads and acts through core operations as the signed-in caller.

Lists ask the core for one page at a time; a run's span tree is read one level (and one page
of a level) at a time, so a run with any number of spans opens with a few small queries.
"""

from __future__ import annotations

import hmac
import math
from collections import Counter, defaultdict
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlencode

import falcon

from governance_core.clock import parse_timestamp
from governance_core.console_sessions import SESSION_LIFETIME
from governance_core.converter import json_ready
from governance_core.domain.insights import (
    RunFilter,
    child_counts,
    count_run_spans,
    failed_span_ancestors,
    list_runs,
    run_parties,
    run_spans_by_start,
    run_totals,
)
from governance_core.domain.risk import Rulesets
from governance_core.errors import GovernanceError, NotFound, TemporarilyUnavailable
from governance_core.operations.agent_instances import instance_details
from governance_core.pagination import PageRequest, pagination_output
from governance_core.rules.cost import TokenGroup, cost_breakdown, extract_usage
from governance_core.rules.sensitive import MARKER_KEY
from governance_http.auth import counted_attempt
from governance_http.console.charts import (
    RISK_LEVELS,
    bar_chart,
    stacked_chart,
    time_axis,
    waterfall_bar,
)
from governance_http.console.conversation import conversation
from governance_http.console.governance import run_decisions
from governance_http.console.trends import trends_page
from governance_http.console.web import (
    SESSION_COOKIE,
    SIGN_IN_COOKIE,
    Console,
    Visit,
    duration,
    local_path,
    whole_number,
)
from governance_http.errors import http_status_for, retry_after_header

__all__ = ["Action", "FormPage", "NotFoundPage", "Page", "routes"]

PAGE_SIZE = 25
MAX_DEPTH = 12
"""The deepest indentation the span tree draws (deeper spans line up at this depth)."""
SPAN_PAGE = 100
MATCH_PAGE = 50
"""How many spans a page of a run's filtered spans lists."""
MATCH_SCAN = 2000
"""The most spans of a run the name, duration and cost filters look through (first in time)."""
QUERY_MAX = 200
"""The longest text the span filter searches for."""
AMOUNT_MAX = 30
"""The longest duration or cost the span filter reads."""
SPAN_STATUSES = ("active", "complete", "failed", "cancelled")
RUN_STATUSES = ("pending", "active", "complete", "failed", "cancelled", "terminated")
STARTED_STATUSES = RUN_STATUSES[1:]
LIVE_STATUSES = ("pending", "active")
SEVERITIES = ("critical", "error", "warning", "info")
RUN_SORTS = {
    "-started_at": "Newest first", "started_at": "Oldest first",
    "-duration": "Longest", "duration": "Shortest",
    "-cost": "Most expensive", "cost": "Cheapest",
    "-risk": "Highest risk", "risk": "Lowest risk",
    "-spans": "Most spans", "spans": "Fewest spans",
}
"""The runs list's sorts (``-`` first: descending) and their labels."""
PURPOSES = ("live", "smoke_test", "eval")
TEXT_MAX = 200
"""The longest agent name or external identifier text the runs list filters by."""
REVEAL_SHOWN_FOR = timedelta(minutes=5)
"""How long after a reveal the span's page shows the value again on reload, unrecorded."""
SINCE = {
    "24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30),
    "90d": timedelta(days=90),
}
"""The runs list's recent windows (the overview's and the sessions page's links)."""
RUN_FILTERS = (
    "agent_id", "environment_id", "status", "purpose", "risk_level", "agent_name", "external_id",
    "from", "to", "since", "score_min", "score_max", "session", "user",
)
"""The runs list's filters, as query parameters."""


def _offset(visit: Visit) -> int:
    return whole_number(visit.query("offset"), 10**9) or 0


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

    def on_get(self, req: falcon.Request, resp: falcon.Response) -> None:
        """A page saying signing out takes the button (405)."""
        self.console.visit(req, resp, use_the_button)

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
    profiles = visit.names("risk_profiles/list")
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
    environments = visit.names("environments/list")
    profile = None
    if agent.get("risk_profile_id"):
        profile = visit.call("risk_profiles/show", risk_profile_id=agent["risk_profile_id"])
    visit.render(
        "agent.html", agent=agent, versions=versions, deployments=deployments,
        rows=[_run_row(run, visit.now) for run in runs["summaries"]], environments=environments,
        profile=profile and profile["details"],
    )


# -- runs --------------------------------------------------------------------------------
class BadFilter(ValueError):
    """A runs-list filter the page cannot read; its message names the field."""


def _day(visit: Visit, name: str) -> date | None:
    """The query's ``name`` as a UTC day (``YYYY-MM-DD``), None when absent."""
    raw = visit.query(name)
    if raw is None:
        return None
    try:
        if len(raw) != 10:
            raise ValueError(raw)
        return date.fromisoformat(raw)
    except ValueError:
        raise BadFilter(f"{name}: not a day of the form YYYY-MM-DD") from None


def _score(visit: Visit, name: str) -> float | None:
    """The query's ``name`` as a quality score bound (a finite number), None when absent."""
    raw = visit.query(name)
    if raw is None:
        return None
    try:
        if len(raw) > 40:
            raise ValueError(raw)
        value = float(raw)
    except ValueError:
        raise BadFilter(f"{name}: a number") from None
    if not math.isfinite(value):
        raise BadFilter(f"{name}: a number")
    return value


def _run_filter(visit: Visit, agents: dict[str, str]) -> tuple[RunFilter, dict[str, Any]]:
    """The runs list's filter from the query, and the values chosen (as the form shows them).

    ``agent_name`` keeps the agents whose name holds it (ignoring case), ``external_id`` the
    runs whose external identifier starts with it; ``from`` and ``to`` are UTC days, both
    included; ``score_min`` and ``score_max`` bound the run's quality score (the mean of its
    quality payloads' numeric ``score`` members); ``session`` and ``user`` keep the runs of
    that session or user (exact match). ``BadFilter`` names a field that cannot be read.
    """
    chosen: dict[str, Any] = {name: visit.query(name) for name in RUN_FILTERS}
    for name, choices in (("status", RUN_STATUSES), ("purpose", PURPOSES),
                          ("risk_level", RISK_LEVELS), ("since", tuple(SINCE))):
        if chosen[name] is not None and chosen[name] not in choices:
            raise BadFilter(f"{name}: one of {', '.join(choices)}")
    for name in ("agent_name", "external_id", "session", "user"):
        if chosen[name] is not None and len(chosen[name]) > TEXT_MAX:
            raise BadFilter(f"{name}: at most {TEXT_MAX} characters")
    first, last = _day(visit, "from"), _day(visit, "to")
    low, high = _score(visit, "score_min"), _score(visit, "score_max")
    if first is not None and last is not None and last < first:
        raise BadFilter("to: a day on or after from")
    agent_ids: tuple[str, ...] | None = None
    if chosen["agent_id"]:
        agent_ids = (chosen["agent_id"],)
    if chosen["agent_name"]:
        needle = chosen["agent_name"].casefold()
        named = tuple(id_ for id_, name in agents.items() if needle in name.casefold())
        agent_ids = named if agent_ids is None else tuple(set(agent_ids) & set(named))
    started_from = None if first is None else datetime.combine(first, time(0), tzinfo=UTC)
    if chosen["since"]:
        since = visit.now - SINCE[chosen["since"]]
        started_from = since if started_from is None else max(started_from, since)
    started_before = (
        None if last is None else datetime.combine(last + timedelta(days=1), time(0), tzinfo=UTC)
    )
    return RunFilter(
        agent_ids=agent_ids, environment_id=chosen["environment_id"], status=chosen["status"],
        purpose=chosen["purpose"], risk_level=chosen["risk_level"], started_from=started_from,
        started_before=started_before, external_id_prefix=chosen["external_id"],
        score_min=low, score_max=high, session_id=chosen["session"], user_id=chosen["user"],
    ), chosen


def runs_page(visit: Visit) -> None:
    """Runs, filtered, sorted and paginated by one store query (see :func:`list_runs`).

    Filters: agent, environment, status, purpose, risk level, start day range (or a recent
    window), agent name, external identifier prefix, quality score range, session and user;
    sorts: start, duration, cost, risk level and span count, either way.
    """
    agents = visit.names("agents/list")
    sort = visit.query("sort") or "-started_at"
    if sort not in RUN_SORTS:
        sort = "-started_at"
    offset = _offset(visit)
    error = None
    try:
        run_filter, chosen = _run_filter(visit, agents)
    except BadFilter as bad:
        error, run_filter = str(bad), None
        chosen = {name: visit.query(name) for name in RUN_FILTERS}
    rows: list[dict[str, Any]] = []
    total = 0
    if run_filter is not None:
        ctx = visit.context()
        records, total = list_runs(ctx, run_filter, sort=sort.lstrip("-"),
                                   descending=sort.startswith("-"), offset=offset,
                                   limit=PAGE_SIZE)
        rulesets = Rulesets(ctx)
        rows = [_run_row(json_ready(instance_details(ctx, record, rulesets)), visit.now)
                for record in records]
    params = {k: v for k, v in {**chosen, "sort": sort}.items() if v}
    visit.render(
        "runs.html", 400 if error else 200, rows=rows, total=total, offset=offset,
        page_size=PAGE_SIZE, params=params, chosen=chosen, sort=sort, error=error,
        agents=agents, environments=visit.names("environments/list"),
        statuses=RUN_STATUSES, purposes=PURPOSES, sorts=RUN_SORTS, risk_levels=RISK_LEVELS,
        since_choices=SINCE, query=urlencode,
    )


def _window(run: dict[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """The time a run's waterfall spans: its start (or registration) to its end (or now)."""
    first = parse_timestamp(run.get("started_at") or run["inserted_at"])
    last_text = run.get("finished_at") or run.get("last_activity_span_at")
    last = parse_timestamp(last_text) if last_text else now
    if run["status"] in LIVE_STATUSES:
        last = max(last, now)
    return first, max(last, first + timedelta(milliseconds=1))


def _span_window(span: dict[str, Any], now: datetime) -> tuple[datetime, datetime]:
    """The time a span takes: its start to its end (or now while it runs), at least 1 ms."""
    first = parse_timestamp(span["started_at"])
    last = parse_timestamp(span["finished_at"]) if span.get("finished_at") else now
    return first, max(last, first + timedelta(milliseconds=1))


def _run_span(visit: Visit, run_id: str, span_id: str) -> dict[str, Any]:
    """The run's span ``span_id`` (redacted); another run's span is not found."""
    span = visit.call("agent_spans/show", agent_span_id=span_id, redacted="true")["details"]
    if span["agent_instance_id"] != run_id:
        raise NotFound("agent_span not found")
    return dict(span)


def _span_facts(
    visit: Visit, span: dict[str, Any], prices: dict[TokenGroup, Any] | None = None
) -> dict[str, Any]:
    """A span with what its row shows: duration, token usage and cost of a model call.

    ``prices`` keeps the cost of each token group already priced, for a list of many spans
    of a few models and sizes.
    """
    usage = extract_usage(span.get("payload"), span.get("result_payload"))
    cost = None
    if usage is not None and span.get("purpose") == "activity":
        group = usage.token_group()
        known = {} if prices is None else prices
        if group not in known:
            pricing = visit.console.governance.config.pricing
            known[group] = cost_breakdown([group], pricing)["total_cost"]
        cost = known[group]
    return {
        **span, "usage": usage, "cost": cost,
        "duration": duration(span.get("started_at"), span.get("finished_at"), visit.now),
    }


def _span_rows(
    visit: Visit,
    run: dict[str, Any],
    parent: str | None,
    offset: int,
    depth: int = 0,
    zoom: str | None = None,
) -> dict[str, Any]:
    """One page of a run's spans under ``parent`` (top level when None), with their bars.

    ``depth`` is how deep in the tree the rows sit (it indents their names only, so every
    timeline bar shares one time axis). With ``zoom`` (a span of the run) the timeline's
    window is that span's time and the top level is that span alone. Each row knows how many
    children it has (a leaf has no expander) and whether a failed span lies below it.
    """
    zoomed = _run_span(visit, run["id"], zoom) if zoom else None
    window = _window(run, visit.now) if zoomed is None else _span_window(zoomed, visit.now)
    if zoomed is not None and parent is None:
        found = [zoomed]
        pagination = pagination_output(PageRequest(0, SPAN_PAGE), 1, 1)
    else:
        params: dict[str, Any] = {
            "agent_instance_id": run["id"], "sorting": "started_at", "include_summaries": "true",
            "pagination[offset]": offset, "pagination[page_size]": SPAN_PAGE,
        }
        if parent is None:
            params["top_level"] = "true"
        else:
            params["parent_span_id"] = parent
        page = visit.call("agent_spans/list", **params)
        found, pagination = page["summaries"], page["pagination"]
    context = visit.context()
    children = child_counts(context, [span["id"] for span in found])
    failed_below, partly = failed_span_ancestors(context, run["id"])
    spans = []
    prices: dict[TokenGroup, Any] = {}
    for span in found:
        left, width = waterfall_bar(span.get("started_at"), span.get("finished_at"), window)
        spans.append({
            **_span_facts(visit, span, prices), "left": left, "width": width,
            "children": children.get(span["id"], 0), "failed_below": span["id"] in failed_below,
        })
    return {
        "spans": spans, "pagination": pagination, "parent": parent, "depth": depth,
        "zoom": zoomed, "ticks": time_axis(window), "window": window,
        "failed_partly": partly, "link": {"zoom": zoom} if zoom else {},
    }


def _risk_thresholds(visit: Visit, agent: dict[str, Any]) -> dict[str, Any] | None:
    if agent.get("risk_profile_id"):
        profile = visit.call("risk_profiles/show", risk_profile_id=agent["risk_profile_id"])
        return dict(profile["details"]["ruleset"]["thresholds"])
    for profile in visit.scan("risk_profiles/list"):
        if profile.get("is_default"):
            return dict(profile["ruleset"]["thresholds"])
    return None


def _run_header(visit: Visit, run_id: str) -> dict[str, Any]:
    """The run, and how many spans its tree holds: its activity spans and its system spans.

    The run's ``span_counts`` count activity spans only; the tree also lists the quality and
    alert spans the system records, so the header names both. ``parties`` holds the run's
    session and user (fields of the store, not of the run's view).
    """
    run = visit.call(
        "agent_instances/show", agent_instance_id=run_id, redacted="true"
    )["details"]
    ctx = visit.context()
    every = count_run_spans(ctx, run["id"])
    return {
        "run": _run_row(run, visit.now), "live": run["status"] in LIVE_STATUSES,
        "all_spans": every, "system_spans": every - run["span_counts"]["total"],
        "parties": run_parties(ctx, run["id"]),
    }


def _amount(visit: Visit, name: str, what: str, problems: dict[str, str]) -> Decimal | None:
    """The query's ``name`` as a number of 0 or more, or None (a problem when malformed)."""
    raw = visit.query(name)
    if raw is None:
        return None
    try:
        value = Decimal(raw.strip().removeprefix("$")) if len(raw) <= AMOUNT_MAX else None
    except InvalidOperation:
        value = None
    if value is None or not value.is_finite() or value < 0:
        problems[name] = f"{name} must be {what}, 0 or more"
        return None
    return value


def _criteria(visit: Visit, run: dict[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """What the run's span filter asks for, and the problems of the fields it cannot read.

    ``status`` and ``type`` outside the run's choices are ignored (the form only offers
    those); ``q``, ``min_duration`` and ``min_cost`` that cannot be read are named.
    """
    problems: dict[str, str] = {}
    status = visit.query("status")
    types = sorted((run.get("span_schema_counts") or {}).get("by_name") or {})
    kind = visit.query("type")
    text = (visit.query("q") or "").strip()
    if len(text) > QUERY_MAX:
        problems["q"] = f"q must be at most {QUERY_MAX} characters"
        text = ""
    criteria = {
        "status": status if status in SPAN_STATUSES else None,
        "type": kind if kind in types else None,
        "q": text or None,
        "min_duration": _amount(visit, "min_duration", "a number of seconds", problems),
        "min_cost": _amount(visit, "min_cost", "an amount in dollars", problems),
    }
    return criteria, problems


def _filter_params(criteria: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in criteria.items() if v is not None}


def _scanned(criteria: dict[str, Any]) -> bool:
    """Whether the filter needs the spans read (name, duration, cost) beyond the index."""
    return any(criteria[k] is not None for k in ("q", "min_duration", "min_cost"))


def _matches(span: dict[str, Any], criteria: dict[str, Any]) -> bool:
    text = criteria["q"]
    if text is not None:
        usage = span["usage"]
        names = (span.get("schema_name"), span.get("schema_title"), span.get("summary"),
                 usage and usage.model)
        folded = text.casefold()
        if not any(isinstance(name, str) and folded in name.casefold() for name in names):
            return False
    least = criteria["min_duration"]
    if least is not None and (span["duration"] is None or Decimal(repr(span["duration"])) < least):
        return False
    cheapest = criteria["min_cost"]
    return cheapest is None or (span["cost"] is not None and span["cost"] >= cheapest)


def _find(
    visit: Visit, run: dict[str, Any], criteria: dict[str, Any], offset: int, size: int
) -> dict[str, Any]:
    """``size`` of the run's spans the filter picks from the ``offset``-th, in time order.

    Status and type alone are answered by the store from its index of a run's spans by
    status and start, one page read. A name, duration or cost filter reads the run's spans of
    that status and type in time order (one read of the stored records, redacted as stored)
    and keeps those that match, looking through the first :data:`MATCH_SCAN` (``stopped``
    says the run had more).
    """
    base = {
        "agent_instance_id": run["id"], "status": criteria["status"],
        "schema_name": criteria["type"], "sorting": "started_at", "include_summaries": "true",
    }
    if not _scanned(criteria):
        page = visit.call("agent_spans/list", **base, **{
            "pagination[offset]": offset, "pagination[page_size]": size,
        })
        spans = [_span_facts(visit, span) for span in page["summaries"]]
        return {"spans": spans, "pagination": page["pagination"], "stopped": False}
    records = run_spans_by_start(
        visit.context(), run["id"], status=criteria["status"], schema_name=criteria["type"],
        limit=MATCH_SCAN + 1,
    )
    prices: dict[TokenGroup, Any] = {}
    rows = [_span_facts(visit, dict(record), prices) for record in records[:MATCH_SCAN]]
    found = [row for row in rows if _matches(row, criteria)]
    chosen = found[offset:offset + size]
    return {
        "spans": chosen, "stopped": len(records) > MATCH_SCAN, "looked": len(rows),
        "pagination": pagination_output(PageRequest(offset, size), len(found), len(chosen)),
    }


def _span_matches(
    visit: Visit, run: dict[str, Any], criteria: dict[str, Any]
) -> dict[str, Any] | None:
    """One page of the run's spans the filter picks, in time order (see :func:`_find`).

    None when nothing is chosen (the page shows the tree). Finding the 50 failed spans of a
    run of 50,000 reads those 50.
    """
    if all(value is None for value in criteria.values()):
        return None
    offset = _offset(visit)
    found = _find(visit, run, criteria, offset, MATCH_PAGE)
    for index, span in enumerate(found["spans"]):
        span["at"] = offset + index
    return {**found, **criteria, "params": _filter_params(criteria)}


def run_page(visit: Visit, run_id: str) -> None:
    """A run: header, span tree with waterfall, cost, risk, quality, alerts and decisions.

    With a filter (``status``, ``type``, ``q``, ``min_duration``, ``min_cost``) the tree
    gives way to the run's spans that filter picks; with ``zoom`` the timeline shows that
    span's subtree in its own time.
    """
    header = _run_header(visit, run_id)
    run = header["run"]
    criteria, problems = _criteria(visit, run)
    matches = _span_matches(visit, run, criteria)
    agent = visit.call("agents/show", agent_id=run["agent_id"])["details"]
    environment = visit.call("environments/show", environment_id=run["environment_id"])
    version = visit.call("agent_versions/show", agent_version_id=run["agent_version_id"])
    alerts = visit.call("alerts/list", agent_instance_id=run_id, sorting="-raised_at",
                        **{"pagination[page_size]": 50})
    tree = None
    if matches is None:
        tree = _span_rows(visit, run, None, _offset(visit), zoom=visit.query("zoom"))
    visit.render(
        "run.html", **header, agent=agent, environment=environment["details"],
        version=version["details"], alerts=alerts, matches=matches, criteria=criteria,
        problems=problems, span_statuses=SPAN_STATUSES,
        span_types=sorted((run.get("span_schema_counts") or {}).get("by_name") or {}),
        tree=tree, thresholds=_risk_thresholds(visit, agent) if run.get("risk_score") else None,
        decisions=run_decisions(visit, run_id),
    )


def run_live(visit: Visit, run_id: str) -> None:
    """The header fragment a running run's page polls."""
    visit.render("run_header.html", **_run_header(visit, run_id))


def run_spans(visit: Visit, run_id: str) -> None:
    """One page of a span's children (or of the top level): a fragment, or a page without JS.

    ``zoom`` keeps the timeline of a zoomed tree (see :func:`_span_rows`).
    """
    run = visit.call(
        "agent_instances/show", agent_instance_id=run_id, redacted="true"
    )["details"]
    parent = visit.query("parent")
    depth = min(whole_number(visit.query("depth"), 1000) or 0, MAX_DEPTH)
    template = "span_rows.html" if visit.query("fragment") else "spans.html"
    visit.render(template, run=run, tree=_span_rows(visit, run, parent, _offset(visit), depth,
                                                     zoom=visit.query("zoom")))


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


def _neighbours(visit: Visit, run_id: str, span_id: str) -> dict[str, Any] | None:
    """The previous and next of the filter's matches around the span (the ``at``-th).

    Asked with the run page's filter and ``at``; None without them.
    """
    at = whole_number(visit.query("at"), 10**9)
    if at is None:
        return None
    run = visit.call(
        "agent_instances/show", agent_instance_id=run_id, redacted="true"
    )["details"]
    criteria, _ = _criteria(visit, run)
    if all(value is None for value in criteria.values()):
        return None
    first = max(at - 1, 0)
    found = _find(visit, run, criteria, first, at + 2 - first)
    around = {first + index: span["id"] for index, span in enumerate(found["spans"])}
    if around.get(at) != span_id:
        return None
    params = _filter_params(criteria)
    return {
        "position": at + 1, "count": found["pagination"]["item_count"],
        "previous": at - 1 in around and {"id": around[at - 1], "query": {**params, "at": at - 1}},
        "next": at + 1 in around and {"id": around[at + 1], "query": {**params, "at": at + 1}},
    }


def _span_view(visit: Visit, run_id: str, span_id: str, revealed: dict[str, Any]) -> None:
    span = visit.call("agent_spans/show", agent_span_id=span_id, redacted="true",
                      include_risk_level="true")["details"]
    if span["agent_instance_id"] != run_id:
        raise NotFound("agent_span not found")
    reveals = visit.call("agent_spans/reveals", agent_span_id=span_id, sorting="-inserted_at",
                         **{"pagination[page_size]": 10})
    facts = _span_facts(visit, span)
    chat = conversation(span.get("payload"), span.get("result_payload"),
                        model_call=facts["usage"] is not None)
    template = "span_detail.html" if visit.query("fragment") else "span.html"
    visit.render(template, span=span, run_id=run_id, cost=_span_cost(visit, span),
                 facts=facts, chat=chat, revealed=revealed, reveals=reveals,
                 marker_key=MARKER_KEY, neighbours=_neighbours(visit, run_id, span_id))


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
                 severities=SEVERITIES, params=params, agents=visit.names("agents/list"),
                 query=urlencode)


def clear_alert(visit: Visit) -> None:
    """Clear a raised alert (by run and name) and go back, where the page says it was done."""
    visit.call("alerts/clear", agent_instance_id=visit.form.get("agent_instance_id", ""),
               name=visit.form.get("name", ""))
    visit.flash("alert_cleared")
    visit.redirect(visit.form.get("next") or "/alerts")


# -- settings ----------------------------------------------------------------------------
def settings_page(visit: Visit, created: dict[str, Any] | None = None) -> None:
    """Environments, risk profiles with their rulesets, and API tokens."""
    visit.render(
        "settings.html",
        environments=list(visit.scan("environments/list", sorting="name")),
        profiles=list(visit.scan("risk_profiles/list", sorting="name")),
        tokens=visit.call("api_tokens/list", sorting="-inserted_at", **{
            "pagination[offset]": _offset(visit), "pagination[page_size]": PAGE_SIZE,
        }),
        agents=visit.names("agents/list"), environment_names=visit.names("environments/list"),
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


def use_the_button(visit: Visit) -> None:
    """The 405 page of an action's address opened as a page (a link, a reload)."""
    visit.resp.set_header("Allow", "POST")
    visit.render("error.html", 405, title="Use the button on the page",
                 message="This address carries out an action: it is reached with its "
                         "button on the console's pages, not opened as a page.")


def page_not_found(visit: Visit) -> None:
    """The console's 404 page for an address it has no page at."""
    visit.render("error.html", 404, title="Page not found",
                 message="The console has no page at this address.")


class NotFoundPage:
    """The console's answer to any address under it that no page or route matches."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def __call__(self, req: falcon.Request, resp: falcon.Response, **params: str) -> None:
        """A 404 page (after the sign-in, as every page)."""
        self.console.visit(req, resp, page_not_found)


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


class FormPage(Page):
    """A page whose form posts back to its own address, which shows it again when refused."""

    def __init__(self, console: Console, get: Any, post: Any) -> None:
        super().__init__(console, get)
        self.post = post

    def on_post(self, req: falcon.Request, resp: falcon.Response, **params: str) -> None:
        """Run the form's action (a CSRF-checked form post)."""
        self.console.visit(req, resp, lambda visit: self.post(visit, **params))


class Action:
    """A Falcon resource running an action function (a CSRF-checked form post)."""

    def __init__(self, console: Console, post: Any) -> None:
        self.console = console
        self.post = post

    def on_get(self, req: falcon.Request, resp: falcon.Response, **params: str) -> None:
        """A page saying this address takes a form's button (405, ``Allow: POST``)."""
        self.console.visit(req, resp, use_the_button)

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
        ("/trends", Page(console, trends_page)),
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
