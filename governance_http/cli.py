"""The ``governance`` command: set up a store, issue tokens, serve the API, run the demo.

``governance init --db PATH [--json]`` bootstraps an account; ``governance serve [--db PATH]
[--host HOST] [--port PORT] [--workers N]`` serves the API; ``governance token create --db PATH
--account ACCOUNT_ID [--scope ...]`` issues a token; ``governance demo [--db PATH]`` runs the
loan-review playground.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from typing import Any

from governance_core.errors import GovernanceError, ValidationErrors
from governance_core.service import Bootstrap, Governance
from governance_http.serving import DEFAULT_DB, serve

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
    with Governance.open(args.db) as gov:
        made = gov.bootstrap(account_name=args.account_name, admin_email=args.admin_email)
    _print_bootstrap(made, as_json=args.json)
    return 0


def _serve(args: argparse.Namespace) -> int:
    with Governance.open(args.db) as gov:
        if gov.store.count("accounts") == 0:
            print(f"{args.db} is a new store; bootstrapped:")
            _print_bootstrap(gov.bootstrap(), as_json=False)
    print(f"serving http://{args.host}:{args.port}/api/v1 from {args.db}", flush=True)
    serve(args.db, host=args.host, port=args.port, workers=args.workers)
    return 0


def _token_create(args: argparse.Namespace) -> int:
    params: dict[str, Any] = {"token_scope": args.scope}
    for name in ("agent_id", "environment_id", "expires_at", "description"):
        value = getattr(args, name)
        if value is not None:
            params[name] = value
    with Governance.open(args.db) as gov:
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
