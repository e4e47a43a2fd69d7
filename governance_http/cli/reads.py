"""Commands that look at what was recorded: runs list, runs show, export."""

from __future__ import annotations

import argparse
import itertools
import json
import re
import sys
from collections.abc import Iterator
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from typing import IO, Any

from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.rules.cost import PricingCatalogue, cost_breakdown, extract_usage
from governance_core.rules.states import INSTANCE, states
from governance_core.service import Session
from governance_http.cli.output import (
    print_json,
    print_renderable,
    print_table,
    progress,
)
from governance_http.cli.stores import (
    account_sessions,
    find_run,
    one_account,
    open_store,
    pages,
)
from governance_http.money import format_money

__all__ = ["RUN_STATUSES", "export", "parse_since", "runs_list", "runs_show", "span_rows"]

RUN_STATUSES: tuple[str, ...] = states(INSTANCE)
"""Every status a run can be in, read from the core's state table: the ``--status`` choices."""

_RELATIVE = re.compile(r"(\d+)([mhdw])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """A moment from an ISO 8601 date-time (UTC unless it says) or an age: 30m, 12h, 7d, 2w."""
    relative = _RELATIVE.fullmatch(text.strip())
    if relative:
        amount, unit = relative.groups()
        return (now or datetime.now(UTC)) - timedelta(**{_UNITS[unit]: int(amount)})
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither an ISO 8601 date-time nor an age such as 30m, 12h, 7d, 2w"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _money(value: object) -> str:
    return format_money(value, missing="-")


def _agent_names(session: Session) -> dict[str, str]:
    return {
        agent["id"]: agent["name"]
        for page in pages(session.call, "agents/list")
        for agent in page["summaries"]
    }


def _runs(session: Session, args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    params: dict[str, Any] = {"sorting": "-inserted_at"}
    if args.agent:
        params["agent_id"] = args.agent
    if args.status:
        params["status"] = args.status
    if args.since is not None:
        # The list's own filter on started_at: a run not started yet has no start time, so
        # it is left out, as GET /agent_instance?start_time= leaves it out.
        params["start_time"] = format_timestamp(args.since)
    for page in pages(session.call, "agent_instances/list", params):
        yield from page["summaries"]


def _run_row(run: dict[str, Any], agent_name: str | None) -> dict[str, Any]:
    return {
        "id": run["id"],
        "account_id": run["account_id"],
        "agent_id": run["agent_id"],
        "agent_name": agent_name,
        "status": run["status"],
        "risk_level": (run["risk_score"] or {}).get("risk_level"),
        "risk_score": (run["risk_score"] or {}).get("total_score"),
        "total_cost": (run["cost_breakdown"] or {}).get("total_cost"),
        "span_counts": run["span_counts"],
        "raised_alert_count": run["raised_alert_count"],
        "started_at": run["started_at"],
        "finished_at": run["finished_at"],
        "inserted_at": run["inserted_at"],
    }


def runs_list(args: argparse.Namespace) -> int:
    """Print runs, newest first: status, risk level, cost and span counts.

    ``--since`` keeps the runs started at or after that moment.
    """
    rows: list[dict[str, Any]] = []
    with open_store(args.db) as gov:
        for session in account_sessions(gov, args.account):
            names = _agent_names(session)
            for run in itertools.islice(_runs(session, args), args.limit):
                rows.append(_run_row(run, names.get(run["agent_id"])))
    rows = sorted(rows, key=lambda row: row["inserted_at"], reverse=True)[:args.limit]
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ("RUN", "AGENT", "STATUS", "RISK", "SCORE", "COST", "SPANS", "FAILED", "ALERTS",
         "STARTED"),
        [(r["id"], r["agent_name"], r["status"], r["risk_level"], r["risk_score"],
          _money(r["total_cost"]), r["span_counts"]["total"], r["span_counts"]["failed"],
          r["raised_alert_count"], r["started_at"]) for r in rows],
        right=("SCORE", "COST", "SPANS", "FAILED", "ALERTS"),
        empty="no runs",
    )
    return 0


def _duration_ms(span: dict[str, Any]) -> float | None:
    if not span.get("started_at") or not span.get("finished_at"):
        return None
    elapsed = parse_timestamp(span["finished_at"]) - parse_timestamp(span["started_at"])
    return elapsed.total_seconds() * 1000


def _span_cost(span: dict[str, Any], pricing: PricingCatalogue) -> float | None:
    usage = extract_usage(span.get("payload"), span.get("result_payload"))
    if usage is None:
        return None
    total = cost_breakdown([usage.token_group()], pricing)["total_cost"]
    return None if total is None else float(total)


def span_rows(
    run: dict[str, Any], spans: list[dict[str, Any]], pricing: PricingCatalogue
) -> list[dict[str, Any]]:
    """Each span with its duration, its cost and the risk level of its type in ``run``."""
    per_type = (run["risk_score"] or {}).get("per_type", [])
    risk_by_type = {row["schema_name"]: row for row in per_type}
    rows = []
    for span in spans:
        risk = risk_by_type.get(span["schema_name"])
        rows.append({
            "id": span["id"],
            "parent_span_id": span["parent_span_id"],
            "schema_name": span["schema_name"],
            "schema_title": span["schema_title"],
            "purpose": span["purpose"],
            "status": span["status"],
            "started_at": span["started_at"],
            "finished_at": span["finished_at"],
            "duration_ms": _duration_ms(span),
            "cost": _span_cost(span, pricing),
            "risk_level": risk["risk_level"] if risk else None,
            "risk_score": risk["type_score"] if risk else None,
        })
    return rows


def _export_pages(session: Session, run_id: str) -> Iterator[dict[str, Any]]:
    """The pages of a run's export: its details and its spans in start order, redacted."""
    page = session.call("agent_instances/export", {"agent_instance_id": run_id})
    yield page
    while page["next_cursor"] is not None:
        page = session.call(
            "agent_instances/export", {"agent_instance_id": run_id, "cursor": page["next_cursor"]}
        )
        yield page


def _all_spans(session: Session, run_id: str) -> list[dict[str, Any]]:
    return [span for page in _export_pages(session, run_id) for span in page["spans"]]


def _span_label(row: dict[str, Any]) -> str:
    from rich.markup import escape

    duration = "-" if row["duration_ms"] is None else f"{row['duration_ms']:.0f} ms"
    risk = "-" if row["risk_level"] is None else f"{row['risk_level']} ({row['risk_score']})"
    purpose = "" if row["purpose"] == "activity" else f" [{row['purpose']}]"
    return escape(
        f"{row['schema_title'] or row['schema_name']}{purpose}  {row['status']}  {duration}  "
        f"cost {_money(row['cost'])}  risk {risk}  {row['id']}"
    )


def runs_show(args: argparse.Namespace) -> int:
    """Print one run and the tree of its spans."""
    with open_store(args.db) as gov:
        session, run = find_run(gov, args.run_id, args.account)
        spans = span_rows(run, _all_spans(session, run["id"]), gov.config.pricing)
    if args.json:
        print_json({"run": run, "spans": spans})
        return 0
    from rich.markup import escape
    from rich.tree import Tree

    risk, counts = run["risk_score"] or {}, run["span_counts"]
    assessed = (
        f"{risk['risk_level']} ({risk['total_score']}, critical at {risk['critical_threshold']})"
        if risk.get("risk_level") else "not assessed"
    )
    tree = Tree(escape(
        f"run {run['id']}  {run['status']}  risk {assessed}  "
        f"cost {_money((run['cost_breakdown'] or {}).get('total_cost'))}  {counts['total']} spans "
        f"({counts['failed']} failed)  {run['raised_alert_count']} raised alerts"
    ))
    ids = {row["id"] for row in spans}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in spans:
        parent = row["parent_span_id"] if row["parent_span_id"] in ids else None
        children.setdefault(parent, []).append(row)

    def grow(node: Tree, parent: str | None) -> None:
        for row in children.get(parent, []):
            grow(node.add(_span_label(row)), row["id"])

    grow(tree, None)
    print_renderable(tree)
    return 0


def _records(session: Session, args: argparse.Namespace) -> Iterator[dict[str, Any]]:
    if args.run is not None:
        for number, page in enumerate(_export_pages(session, args.run)):
            if number == 0:
                yield page["details"]
            yield from page["spans"]
        return
    yield session.details("accounts/show")
    for operation in ("environments/list", "agents/list"):
        for page in pages(session.call, operation, {"sorting": "inserted_at"}):
            yield from page["summaries"]
    runs = pages(session.call, "agent_instances/list", {"sorting": "inserted_at"})
    first = next(runs)
    with progress("exporting runs", first["pagination"]["item_count"]) as tick:
        for page in (first, *runs):
            for run in page["summaries"]:
                yield run
                for spans in _export_pages(session, run["id"]):
                    yield from spans["spans"]
                tick()
    for page in pages(session.call, "alerts/list", {"sorting": "raised_at"}):
        yield from page["summaries"]


def export(args: argparse.Namespace) -> int:
    """Write a run (with its spans) or an account (everything it recorded) as JSON Lines."""
    with open_store(args.db) as gov:
        if args.run is not None:
            session, _ = find_run(gov, args.run, args.account)
        else:
            session = one_account(
                gov, args.account, purpose="to export", alternative=" (or a run with --run ID)"
            )
        target: Any = (
            nullcontext(sys.stdout) if args.output in (None, "-")
            else open(args.output, "w", encoding="utf-8")  # noqa: SIM115 - closed by the with
        )
        written = 0
        with target as out:
            stream: IO[str] = out
            for record in _records(session, args):
                stream.write(json.dumps(record, default=str, ensure_ascii=False) + "\n")
                written += 1
    if args.output not in (None, "-"):
        print(f"wrote {written} records to {args.output}", file=sys.stderr)
    return 0
