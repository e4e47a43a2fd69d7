"""Commands that set a store up and serve it: init, accounts, tokens, serve, demo."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any

from governance_core.errors import NotFound
from governance_core.service import Bootstrap, Governance, Session
from governance_http.cli import keys
from governance_http.cli.output import (
    DISTRIBUTION,
    CommandError,
    print_json,
    print_table,
    progress,
)
from governance_http.cli.stores import (
    account_sessions,
    all_accounts,
    one_account,
    open_store,
    pages,
)
from governance_http.money import format_money
from governance_http.settings import (
    BASE_URL_VARIABLE,
    ENCRYPTION_KEY_VARIABLE,
    default_db,
    file_path,
    shown_location,
)

__all__ = [
    "accounts_create",
    "accounts_list",
    "demo",
    "init",
    "serve",
    "tokens_create",
    "tokens_list",
    "tokens_revoke",
]

SHOWN_ONCE = "token (shown once, keep it)"
LABELS = {
    "token": SHOWN_ONCE,
    "encryption_key": "encryption key (shown once)",
    "encryption_key_file": "key file (mode 0600)",
}


def _print_bootstrap(
    made: Bootstrap, *, as_json: bool, key: dict[str, str] | None = None
) -> None:
    fields = {
        "account_id": made.account_id,
        "admin_user_id": made.admin_user_id,
        "environment_id": made.environment_id,
        "risk_profile_id": made.risk_profile_id,
        "token": made.token,
        **(key or {}),
    }
    if as_json:
        print(json.dumps(fields))
        return
    for name, value in fields.items():
        label = LABELS.get(name, name)
        print(f"{label + ':':30} {value}")


def init(args: argparse.Namespace) -> int:
    """Create a store with its first account; refuse a store that already holds accounts.

    A store without a key gets one: a key file beside a SQLite store, else a key printed once.
    """
    with open_store(args.db, create=True) as gov:
        held = len(all_accounts(gov))
        if held:
            raise CommandError(
                f"{args.db} already holds {held} account(s); add another with "
                f"`governance accounts create --db {args.db}`"
            )
        key = keys.new_key_for_init(args.db)
        made = gov.bootstrap(account_name=args.account_name, admin_email=args.admin_email)
    _print_bootstrap(made, as_json=args.json, key=key)
    if "encryption_key" in key and not args.json:
        print(f"set {ENCRYPTION_KEY_VARIABLE} to the encryption key wherever this store is "
              "served; without it the sensitive values cannot be read")
    return 0


def accounts_create(args: argparse.Namespace) -> int:
    """Add an account (with its admin user, defaults and a token) to an existing store."""
    with open_store(args.db) as gov:
        made = gov.bootstrap(account_name=args.account_name, admin_email=args.admin_email)
    _print_bootstrap(made, as_json=args.json)
    return 0


def accounts_list(args: argparse.Namespace) -> int:
    """Print every account in the store."""
    with open_store(args.db) as gov:
        accounts = all_accounts(gov)
    if args.json:
        print_json(accounts)
        return 0
    print_table(
        ("ID", "NAME", "PURPOSE", "CREATED"),
        [(a["id"], a["name"], a["purpose"], a["inserted_at"]) for a in accounts],
        empty="no accounts: create one with `governance init`",
    )
    return 0


def tokens_create(args: argparse.Namespace) -> int:
    """Issue a token in an account; print its secret once."""
    params: dict[str, Any] = {"token_scope": args.scope}
    for name in ("agent_id", "environment_id", "expires_at", "description"):
        value = getattr(args, name)
        if value is not None:
            params[name] = value
    with open_store(args.db) as gov:
        answer = gov.as_account(args.account).call("api_tokens/create", params)
    details = answer["details"]
    if args.json:
        print(json.dumps({"id": details["id"], "token_scope": details["token_scope"],
                          "token": answer["token"]}))
    else:
        print(f"{'token id:':30} {details['id']}")
        print(f"{'scope:':30} {details['token_scope']}")
        print(f"{SHOWN_ONCE + ':':30} {answer['token']}")
    return 0


def tokens_list(args: argparse.Namespace) -> int:
    """Print the tokens of an account, or of every account (never a secret: none is kept)."""
    with open_store(args.db) as gov:
        tokens = [
            token
            for session in account_sessions(gov, args.account)
            for page in pages(session.call, "api_tokens/list", {"sorting": "inserted_at"})
            for token in page["summaries"]
        ]
    if args.json:
        print_json(tokens)
        return 0
    print_table(
        ("ID", "ACCOUNT", "SCOPE", "STATUS", "DESCRIPTION", "EXPIRES", "LAST USED"),
        [(t["id"], t["account_id"], t["token_scope"], t["status"], t["description"],
          t["expires_at"], t["last_used_at"]) for t in tokens],
        empty="no tokens",
    )
    return 0


def tokens_revoke(args: argparse.Namespace) -> int:
    """Revoke a token: it stops authenticating at once, for good."""
    with open_store(args.db) as gov:
        for session in account_sessions(gov, args.account):
            try:
                session.details("api_tokens/show", {"api_token_id": args.token_id})
            except NotFound:
                continue
            revoked = session.details("api_tokens/revoke", {"api_token_id": args.token_id})
            break
        else:
            raise CommandError(f"no token {args.token_id} in this store")
    if args.json:
        print_json(revoked)
    else:
        print(f"token {revoked['id']} is {revoked['status']}")
    return 0


def _token_hint(db: str, accounts: list[dict[str, Any]]) -> str:
    """Where a token for an existing store comes from: its token was printed at its first start."""
    account = accounts[0]["id"] if len(accounts) == 1 else "ACCOUNT_ID"
    location = "" if db == default_db() else f" --db {shlex.quote(shown_location(db))}"
    return (f"store {shown_location(db)} exists (its token was printed when it was made); "
            f"make a token with: governance tokens create --account {account}{location}")


def serve(args: argparse.Namespace) -> int:
    """Serve the API; a new store is bootstrapped and its token printed, once."""
    try:
        from governance_http import serving
    except ImportError as error:
        raise CommandError(
            f"`governance serve` needs the http extra ({error.name} is missing): "
            f"install {DISTRIBUTION}[http] (from a checkout: pip install '.[http]')"
        ) from error
    try:
        serving.check_port_free(args.host, args.port)
    except serving.PortInUse as error:
        raise CommandError(str(error)) from error
    made_key = keys.ensure_key(args.db)
    with open_store(args.db, create=True) as gov:
        accounts = all_accounts(gov)
        if not accounts:
            print(f"{shown_location(args.db)} is a new store; bootstrapped:")
            _print_bootstrap(gov.bootstrap(), as_json=False)
        for account in accounts:
            print(f"account {account['id']} {account['name']}")
        plain = None if made_key is None else keys.stored_before_key(gov, args.db)
    if made_key is not None:
        print(keys.made_key_line(made_key))
    if plain is not None:
        print(plain)
    if accounts:
        print(_token_hint(args.db, accounts))
    address = f"http://{args.host}:{args.port}"
    os.environ.setdefault(BASE_URL_VARIABLE, address)
    print(f"serving {address}/api/v1 and the console at {address}/ from "
          f"{shown_location(args.db)}", flush=True)
    try:
        serving.serve(
            args.db, host=args.host, port=args.port, workers=args.workers,
            threads=args.threads, log_level=args.log_level, access_log=args.access_log,
        )
    except serving.PortInUse as error:
        raise CommandError(str(error)) from error
    return 0


PLAYGROUND = "playground/"


def _demo_session(gov: Governance, account_id: str | None) -> Session:
    if account_id is None and not all_accounts(gov):
        made = gov.bootstrap()
        print("a new store; bootstrapped:")
        _print_bootstrap(made, as_json=False)
        return gov.as_account(made.account_id)
    return one_account(gov, account_id, purpose="to record into")


def _record_playground_run(session: Session) -> tuple[dict[str, Any], dict[str, Any]]:
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
    return agent, run


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
    print(f"{'cost:':10} {format_money(cost['total_cost'])} total; tokens {cost['input']} in, "
          f"{cost['output']} out, {cost['cache_read']} cache read")
    for group in cost["groups"]:
        print(f"{'':10} {group['model_name']} ({group['provider']}): {group['input']} in, "
              f"{group['output']} out, {group['cache_read']} cache read, "
              f"{format_money(group['total_cost'])}")


def demo(args: argparse.Namespace) -> int:
    """Record the loan-review playground run (``--runs`` times); print the last one."""
    if args.runs < 1:
        raise CommandError("--runs must be at least 1")
    hint = " (or pass --create)"
    path = file_path(args.db)
    # A store that does not exist (and is not to be made) is refused by open_store below.
    made_key = keys.ensure_key(args.db) if args.create or not path or path.exists() else None
    if made_key is not None:
        print(keys.made_key_line(made_key), file=sys.stderr if args.json else sys.stdout)
    with open_store(args.db, create=args.create, hint=hint) as gov:
        session = _demo_session(gov, args.account)
        with progress("recording runs", args.runs) as tick:
            for _ in range(args.runs):
                agent, run = _record_playground_run(session)
                tick()
    if args.json:
        print(json.dumps({
            "agent_id": agent["id"], "agent_instance_id": run["id"],
            "risk_score": run["risk_score"], "cost_breakdown": run["cost_breakdown"],
        }))
    else:
        if args.runs > 1:
            print(f"recorded {args.runs} runs; the last one:")
        _print_run(agent, run)
    return 0
