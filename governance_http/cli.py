"""The ``governance`` command: set up a store, issue tokens, serve the API, run the demo.

``governance init --db PATH [--json]`` bootstraps an account; ``governance serve [--db PATH]
[--host HOST] [--port PORT] [--workers N] [--threads N]`` serves the API; ``governance token
create --db PATH --account ACCOUNT_ID [--scope ...]`` issues a token; ``governance demo [--db
PATH]`` runs the loan-review playground.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from governance_core.errors import GovernanceError, ValidationErrors
from governance_core.service import Bootstrap, Governance, Session
from governance_http.serving import (
    BASE_URL_VARIABLE,
    DEFAULT_DB,
    DEFAULT_THREADS,
    open_governance,
    serve,
)

__all__ = ["build_parser", "main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

Handler = Callable[[argparse.Namespace], int]


def _print_bootstrap(made: Bootstrap, *, as_json: bool) -> None:
    fields = {
        "account_id": made.account_id,
        "admin_user_id": made.admin_user_id,
        "environment_id": made.environment_id,
        "risk_profile_id": made.risk_profile_id,
        "token": made.token,
    }
    if as_json:
        print(json.dumps(fields))
        return
    for name, value in fields.items():
        label = "token (shown once, keep it)" if name == "token" else name
        print(f"{label + ':':30} {value}")


def _init(args: argparse.Namespace) -> int:
    with open_governance(args.db) as gov:
        made = gov.bootstrap(account_name=args.account_name, admin_email=args.admin_email)
    _print_bootstrap(made, as_json=args.json)
    return 0


def _serve(args: argparse.Namespace) -> int:
    with open_governance(args.db) as gov:
        if gov.store.count("accounts") == 0:
            print(f"{args.db} is a new store; bootstrapped:")
            _print_bootstrap(gov.bootstrap(), as_json=False)
    os.environ.setdefault(BASE_URL_VARIABLE, f"http://{args.host}:{args.port}")
    print(f"serving http://{args.host}:{args.port}/api/v1 from {args.db}", flush=True)
    serve(args.db, host=args.host, port=args.port, workers=args.workers, threads=args.threads)
    return 0


def _token_create(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"token_scope": args.scope}
    for name in ("agent_id", "environment_id", "expires_at", "description"):
        value = getattr(args, name)
        if value is not None:
            params[name] = value
    with open_governance(args.db) as gov:
        answer = gov.as_account(args.account).call("api_tokens/create", params)
    details = answer["details"]
    if args.json:
        print(json.dumps({"id": details["id"], "token_scope": details["token_scope"],
                          "token": answer["token"]}))
    else:
        print(f"{'token id:':30} {details['id']}")
        print(f"{'scope:':30} {details['token_scope']}")
        print(f"{'token (shown once, keep it):':30} {answer['token']}")
    return 0


PLAYGROUND = "playground/"


def _demo_session(gov: Governance, account_id: str | None) -> Session:
    if account_id is not None:
        return gov.as_account(account_id)
    oldest = gov.store.query("accounts", limit=1)
    if oldest:
        return gov.as_account(oldest[0]["id"])
    made = gov.bootstrap()
    print("a new store; bootstrapped:")
    _print_bootstrap(made, as_json=False)
    return gov.as_account(made.account_id)


def _print_run(agent: dict[str, Any], run: dict[str, Any]) -> None:
    risk, cost = run["risk_score"], run["cost_breakdown"]
    counts = run["span_counts"]
    print(f"{'agent:':10} {agent['id']} {agent['name']}")
    print(f"{'run:':10} {run['id']} ({run['status']}, {counts['total']} spans, "
          f"{run['raised_alert_count']} raised alerts)")
    print(f"{'risk:':10} {risk['risk_level']}, total score {risk['total_score']} (critical at "
          f"{risk['critical_threshold']}), peak classification {risk['peak_classification']}")
    print(f"{'':10} data: {', '.join(risk['all_data_categories'])}")
    print(f"{'':10} actions: {', '.join(risk['allowed_actions'])}")
    for row in risk["per_type"]:
        print(f"{'':10} {row['schema_name']}: {row['count']} x {row['type_score']} "
              f"= {row['total_contribution']} ({row['risk_level']})")
    print(f"{'cost:':10} ${cost['total_cost']} total; tokens {cost['input']} in, "
          f"{cost['output']} out, {cost['cache_read']} cache read")
    for group in cost["groups"]:
        print(f"{'':10} {group['model_name']} ({group['provider']}): {group['input']} in, "
              f"{group['output']} out, {group['cache_read']} cache read, ${group['total_cost']}")


def _demo(args: argparse.Namespace) -> int:
    with open_governance(args.db) as gov:
        session = _demo_session(gov, args.account)
        agent = session.call(PLAYGROUND + "create_loan_application_review_agent")["agent"]
        registered = session.details(
            PLAYGROUND + "register_loan_application_review_agent_instance",
            {"agent_id": agent["id"]},
        )
        session.call(
            PLAYGROUND + "record_loan_application_review_spans",
            {"agent_instance_id": registered["id"]},
        )
        run = session.details("agent_instances/show", {"agent_instance_id": registered["id"]})
    if args.json:
        print(json.dumps({
            "agent_id": agent["id"], "agent_instance_id": run["id"],
            "risk_score": run["risk_score"], "cost_breakdown": run["cost_breakdown"],
        }))
    else:
        _print_run(agent, run)
    return 0


def _describe(error: GovernanceError) -> str:
    text = f"{error.code}: {error.message}"
    if isinstance(error, ValidationErrors):
        for name, inner in error.errors.items():
            text += f"\n  {name}: {_describe(inner)}"
    return text


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the ``governance`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="governance", description="Record runs of software agents and govern them."
    )
    commands = parser.add_subparsers(dest="command", required=True)

    init = commands.add_parser("init", help="bootstrap an account in a store; print its token")
    init.add_argument("--db", required=True, help="SQLite file (created when missing)")
    init.add_argument("--json", action="store_true", help="print one JSON object")
    init.add_argument("--account-name", default="Default account")
    init.add_argument("--admin-email", default="admin@example.com")
    init.set_defaults(handler=_init)

    serve_command = commands.add_parser("serve", help="serve the HTTP API")
    serve_command.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file ({DEFAULT_DB})")
    serve_command.add_argument("--host", default=DEFAULT_HOST)
    serve_command.add_argument("--port", type=int, default=DEFAULT_PORT)
    serve_command.add_argument(
        "--workers", type=int, default=None, help="worker processes (default: one per CPU)"
    )
    serve_command.add_argument(
        "--threads", type=int, default=DEFAULT_THREADS,
        help=f"request threads per worker ({DEFAULT_THREADS})",
    )
    serve_command.set_defaults(handler=_serve)

    token = commands.add_parser("token", help="manage access tokens")
    token_commands = token.add_subparsers(dest="token_command", required=True)
    create = token_commands.add_parser("create", help="issue a token; print its secret once")
    create.add_argument("--db", required=True)
    create.add_argument("--account", required=True, help="the account id")
    create.add_argument("--scope", choices=("account", "agent_deployment"), default="account")
    create.add_argument("--agent-id", dest="agent_id")
    create.add_argument("--environment-id", dest="environment_id")
    create.add_argument("--expires-at", dest="expires_at", help="ISO 8601 date-time")
    create.add_argument("--description")
    create.add_argument("--json", action="store_true", help="print one JSON object")
    create.set_defaults(handler=_token_create)

    demo = commands.add_parser(
        "demo", help="record the playground's loan-review run; print its risk and cost"
    )
    demo.add_argument("--db", default=DEFAULT_DB, help=f"SQLite file ({DEFAULT_DB})")
    demo.add_argument("--account", help="the account id (default: the store's first account)")
    demo.add_argument("--json", action="store_true", help="print one JSON object")
    demo.set_defaults(handler=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``governance`` command; its exit status (1 when the core refused)."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except GovernanceError as error:
        print(f"error: {_describe(error)}", file=sys.stderr)
        return 1
