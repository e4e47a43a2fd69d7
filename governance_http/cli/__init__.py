"""The ``governance`` command: set a store up, serve it, and look at what it recorded.

Every command but ``serve`` works without the ``http`` extra; people's output (tables, trees)
needs ``rich`` (the ``cli`` extra) and ``--json`` needs nothing more. Run ``governance`` for
the list of commands and ``governance COMMAND --help`` for each one's options.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from importlib import metadata

from governance_core.errors import GovernanceError, ValidationErrors
from governance_core.notifications.monitors import COMPARISONS, LEVELS, METRICS
from governance_core.notifications.outbox import BODY_FORMATS, EVENT_TYPES
from governance_core.operations.deliveries import STATUSES as DELIVERY_STATUSES
from governance_http.cli import admin, deliver, keys, notify, policies, reads
from governance_http.cli.output import DISTRIBUTION, CommandError
from governance_http.settings import (
    DB_ENVIRONMENT_VARIABLE,
    LOG_LEVELS,
    default_db,
)

__all__ = ["DEFAULT_HOST", "DEFAULT_PORT", "build_parser", "main"]

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000

Handler = Callable[[argparse.Namespace], int]


def _version() -> str:
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown (running from a source tree, not installed)"


def _describe(error: GovernanceError) -> str:
    text = f"{error.code}: {error.message}"
    if isinstance(error, ValidationErrors):
        for name, inner in error.errors.items():
            text += f"\n  {name}: {_describe(inner)}"
    return text


class _Formatter(argparse.ArgumentDefaultsHelpFormatter):
    """Shows each option's default, where it has one."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or (isinstance(action.default, bool) and not action.default):
            return action.help
        return super()._get_help_string(action)


def _group(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    name: str,
    help_text: str,
    aliases: Sequence[str] = (),
) -> argparse._SubParsersAction[argparse.ArgumentParser]:
    parser = commands.add_parser(name, help=help_text, description=help_text, aliases=aliases)
    parser.set_defaults(handler=lambda args: _usage(parser, status=2))
    return parser.add_subparsers(title="commands", metavar="COMMAND")


def _usage(parser: argparse.ArgumentParser, *, status: int) -> int:
    parser.print_help(sys.stdout if status == 0 else sys.stderr)
    return status


def build_parser() -> argparse.ArgumentParser:
    """Return the parser of the ``governance`` command and its subcommands."""
    parser = argparse.ArgumentParser(
        prog="governance",
        description="Record runs of software agents and govern them.",
        epilog="Run `governance COMMAND --help` for a command's options.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    parser.set_defaults(handler=lambda args: _usage(parser, status=0))
    commands = parser.add_subparsers(title="commands", metavar="COMMAND")

    store = argparse.ArgumentParser(add_help=False)
    store.add_argument(
        "--db", default=default_db(),
        help=f"the store: a SQLite file or a database URL (${DB_ENVIRONMENT_VARIABLE} sets "
        "the default)",
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="print JSON for scripts")
    account = argparse.ArgumentParser(add_help=False)
    account.add_argument("--account", help="the account id (default: every account)")
    common = [store, as_json]

    def command(
        group: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str,
        handler: Handler, parents: Sequence[argparse.ArgumentParser] = common,
    ) -> argparse.ArgumentParser:
        made = group.add_parser(name, help=help_text, description=help_text,
                                parents=list(parents), formatter_class=_Formatter)
        made.set_defaults(handler=handler)
        return made

    def new_account(made: argparse.ArgumentParser) -> None:
        made.add_argument("--account-name", default="Default account", help="its name")
        made.add_argument("--admin-email", default="admin@example.com",
                          help="its admin user's email")

    new_account(command(commands, "init", "create a store with its first account; print "
                        "the account's token once", admin.init))

    serve = command(commands, "serve", "serve the HTTP API (needs the http extra); a new "
                    "store is bootstrapped and its token printed once", admin.serve, [store])
    serve.add_argument("--host", default=DEFAULT_HOST, help="address to listen on")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT, help="port to listen on")
    serve.add_argument("--workers", type=int, default=None,
                       help="worker processes (default: one per CPU)")
    serve.add_argument("--threads", type=int, default=None,
                       help="request threads per worker (default: 1 on SQLite, 4 on PostgreSQL)")
    serve.add_argument("--log-level", choices=LOG_LEVELS, default="info",
                       help="level of the server's own messages")
    serve.add_argument("--access-log", action=argparse.BooleanOptionalAction, default=True,
                       help="log one line a request (method, path, status, duration, id)")

    deliver.add_arguments(command(
        commands, "deliver", "send webhooks from the outbox (as `serve` does unless "
        "GOVERNANCE_SENDER=off); needs the notifications extra", deliver.deliver,
    ))

    demo = command(commands, "demo", "record the playground's loan-review run; print its "
                   "risk and cost", admin.demo)
    demo.add_argument("--account", help="the account to record into (default: the store's "
                      "only account; a new store is bootstrapped)")
    demo.add_argument("--runs", type=int, default=1, help="how many runs to record")
    demo.add_argument("--create", action="store_true",
                      help="create the store when its file does not exist")

    key_commands = _group(commands, "keys", "the encryption key of sensitive values: make "
                          "one, rotate it, encrypt stored values again")
    command(key_commands, "new", "print a new key (for GOVERNANCE_ENCRYPTION_KEY or a key "
            "file); it is not stored anywhere", keys.keys_new, [])
    command(key_commands, "rotate", "put a new key first in the store's key file; the "
            "earlier keys still decrypt", keys.keys_rotate)
    rekey = command(key_commands, "rekey", "encrypt every sensitive value and webhook secret "
                    "under the first key, in batches (run again after an interruption)",
                    keys.keys_rekey)
    rekey.add_argument("--batch-size", type=int, default=keys.REKEY_BATCH,
                       help="records encrypted again in one transaction")
    rekey.add_argument("--drop-old-keys", action="store_true",
                       help="then keep only the first key in the key file")

    accounts = _group(commands, "accounts", "list accounts, add one to a store")
    command(accounts, "list", "list every account in the store", admin.accounts_list)
    new_account(command(accounts, "create", "add an account to an existing store; print "
                        "its token once", admin.accounts_create))

    tokens = _group(commands, "tokens", "issue, list and revoke access tokens", ["token"])
    create = command(tokens, "create", "issue a token; print its secret once",
                     admin.tokens_create)
    create.add_argument("--account", required=True, help="the account id")
    create.add_argument("--scope", choices=("account", "agent_deployment"), default="account",
                        help="account: everything; agent_deployment: ingestion for one "
                        "agent in one environment")
    create.add_argument("--agent-id", dest="agent_id", help="the agent (agent_deployment)")
    create.add_argument("--environment-id", dest="environment_id",
                        help="the environment (agent_deployment)")
    create.add_argument("--expires-at", dest="expires_at", help="ISO 8601 date-time")
    create.add_argument("--description", help="what the token is for")
    command(tokens, "list", "list tokens (their secrets are never kept)", admin.tokens_list,
            [*common, account])
    revoke = command(tokens, "revoke", "revoke a token for good", admin.tokens_revoke,
                     [*common, account])
    revoke.add_argument("token_id", metavar="TOKEN_ID", help="the token's id")

    runs = _group(commands, "runs", "list runs, show one with its spans")
    listed = command(runs, "list", "list runs, newest first", reads.runs_list,
                     [*common, account])
    listed.add_argument("--agent", help="only this agent's runs (agent id)")
    listed.add_argument("--status", choices=reads.RUN_STATUSES, help="only runs in this status")
    listed.add_argument("--since", type=reads.parse_since,
                        help="only runs started since: ISO 8601 or an age (30m, 12h, 7d); "
                        "a run not started yet has no start time and is left out")
    listed.add_argument("--limit", type=int, default=50, help="at most this many runs")
    shown = command(runs, "show", "show a run and the tree of its spans", reads.runs_show,
                    [*common, account])
    shown.add_argument("run_id", metavar="RUN_ID", help="the run's (agent instance's) id")

    _notification_commands(commands, command, common, account)

    policy_commands = _group(commands, "policies", "test policy text against the recorded "
                             "runs", ["policy"])
    policies.add_test_arguments(command(
        policy_commands, "test", "print what Cedar policy text would have decided over the "
        "runs of the last days: outcomes, and the runs and spans it would have stopped",
        policies.policies_test,
    ))

    export = command(commands, "export", "write a run or an account as JSON Lines",
                     reads.export, [store])
    export.add_argument("--run", help="a run's id: the run, then its spans")
    export.add_argument("--account", help="the account id (default: the store's only "
                        "account): the account, environments, agents, runs with their "
                        "spans, alerts")
    export.add_argument("--output", "-o", help="file to write (default: standard output)")
    return parser


def _notification_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
    command: Callable[..., argparse.ArgumentParser],
    common: Sequence[argparse.ArgumentParser],
    account: argparse.ArgumentParser,
) -> None:
    """``monitors``, ``destinations`` and ``deliveries`` (see docs/notifications.md).

    Lists, show, update, delete, rotate and resend take ``--account`` to narrow them to one
    account; a create works in one account: the one named, or the store's only one.
    """
    parents = [*common, account]

    def in_one_account(made: argparse.ArgumentParser) -> argparse.ArgumentParser:
        made.add_argument("--account", help="the account to create it in (default: the "
                          "store's only account)")
        return made
    def status_options(made: argparse.ArgumentParser, on: str, off: tuple[str, str]) -> None:
        """``--OFF``/``--ON`` setting the ``status`` member to ``off[1]`` or ``active``."""
        chosen = made.add_mutually_exclusive_group()
        chosen.add_argument(f"--{off[0]}", dest="status", action="store_const", const=off[1],
                            help=f"make it {off[1]}")
        chosen.add_argument(f"--{on}", dest="status", action="store_const", const="active",
                            help="make it active")

    def clear_option(made: argparse.ArgumentParser, names: Sequence[str], note: str) -> None:
        made.add_argument("--clear", action="append", choices=names, metavar="FIELD",
                          help=f"empty a field (repeatable): {', '.join(names)}{note}")

    monitors = _group(commands, "monitors", "list, create, show, update and delete monitors",
                      ["monitor"])
    listed = command(monitors, "list", "list monitors with their level and last value",
                     notify.monitors_list, parents)
    listed.add_argument("--metric", choices=METRICS, help="only monitors of this metric")
    listed.add_argument("--level", choices=LEVELS,
                        help="only monitors at this level")
    create = in_one_account(command(monitors, "create", "create a monitor; print it",
                                    notify.monitors_create, common))
    create.add_argument("--name", required=True, help="its name (the alert is monitor:NAME)")
    create.add_argument("--metric", required=True, choices=METRICS, help="what it measures")
    create.add_argument("--window", required=True, type=notify.parse_window,
                        help="the window measured: seconds, or 15m, 1h, 7d")
    create.add_argument("--comparison", choices=COMPARISONS,
                        help="how the value is compared with a threshold (default gt)")
    create.add_argument("--warning", type=float, help="the warning threshold")
    create.add_argument("--critical", type=float, help="the critical threshold")
    create.add_argument("--hysteresis", type=float,
                        help="how far back past a threshold the value must come to leave it")
    create.add_argument("--every", type=notify.parse_window,
                        help="evaluate this often: seconds, or 1m, 1h (default 60 s)")
    create.add_argument("--agent-id", dest="agent_id", help="only this agent's runs")
    create.add_argument("--environment-id", dest="environment_id",
                        help="only this environment's runs")
    create.add_argument("--description", help="what the monitor is for")
    create.add_argument("--paused", action="store_true", help="create it paused")
    shown = command(monitors, "show", "show a monitor", notify.monitors_show, parents)
    shown.add_argument("monitor_id", metavar="MONITOR_ID", help="the monitor's id")
    update = command(monitors, "update", "change a monitor (what is not given stays); print "
                     "it", notify.monitors_update, parents)
    update.add_argument("monitor_id", metavar="MONITOR_ID", help="the monitor's id")
    update.add_argument("--name", help="its name")
    update.add_argument("--metric", choices=METRICS, help="what it measures")
    update.add_argument("--window", type=notify.parse_window,
                        help="the window measured: seconds, or 15m, 1h, 7d")
    update.add_argument("--comparison", choices=COMPARISONS, help="gt, ge, lt or le")
    update.add_argument("--warning", type=float, help="the warning threshold")
    update.add_argument("--critical", type=float, help="the critical threshold")
    update.add_argument("--hysteresis", type=float,
                        help="how far back past a threshold the value must come to leave it")
    update.add_argument("--every", type=notify.parse_window,
                        help="evaluate this often: seconds, or 1m, 1h")
    update.add_argument("--agent-id", dest="agent_id", help="only this agent's runs")
    update.add_argument("--environment-id", dest="environment_id",
                        help="only this environment's runs")
    update.add_argument("--description", help="what the monitor is for")
    status_options(update, "resume", ("pause", "paused"))
    clear_option(update, notify.MONITOR_CLEARABLE, "")
    deleted = command(monitors, "delete", "delete a monitor (an alert it raised stays)",
                      notify.monitors_delete, parents)
    deleted.add_argument("monitor_id", metavar="MONITOR_ID", help="the monitor's id")

    destinations = _group(commands, "destinations", "list, create, update, delete webhook "
                          "destinations and rotate their secrets", ["destination"])
    command(destinations, "list", "list webhook destinations (never their secrets)",
            notify.destinations_list, parents)
    create = in_one_account(command(
        destinations, "create", "create a webhook destination; print its signing secret once",
        notify.destinations_create, common,
    ))
    create.add_argument("--name", required=True, help="its name")
    create.add_argument("--url", required=True,
                        help="where to POST (http or https; private addresses are refused)")
    create.add_argument("--format", choices=BODY_FORMATS, help="the body (default standard)")
    create.add_argument("--event-type", dest="event_types", action="append",
                        choices=EVENT_TYPES,
                        help="send only this event type (repeat for more; default all)")
    create.add_argument("--description", help="what the destination is for")
    update = command(destinations, "update", "change a destination (what is not given stays); "
                     "print it", notify.destinations_update, parents)
    update.add_argument("destination_id", metavar="DESTINATION_ID", help="the destination's id")
    update.add_argument("--name", help="its name")
    update.add_argument("--url", help="where to POST (http or https; private addresses are "
                        "refused)")
    update.add_argument("--format", choices=BODY_FORMATS, help="the body")
    update.add_argument("--event-type", dest="event_types", action="append",
                        choices=EVENT_TYPES,
                        help="send only this event type (repeat for more; replaces the list)")
    update.add_argument("--description", help="what the destination is for")
    status_options(update, "enable", ("disable", "disabled"))
    clear_option(update, notify.DESTINATION_CLEARABLE, " (no event types: every type)")
    deleted = command(destinations, "delete", "delete a destination; its pending deliveries "
                      "become dead letters", notify.destinations_delete, parents)
    deleted.add_argument("destination_id", metavar="DESTINATION_ID",
                         help="the destination's id")
    rotate = command(destinations, "rotate", "make a new signing secret and print it once; "
                     "the previous ones keep signing for the grace period",
                     notify.destinations_rotate, parents)
    rotate.add_argument("destination_id", metavar="DESTINATION_ID",
                        help="the destination's id")
    rotate.add_argument("--grace", type=notify.parse_window,
                        help="how long the previous secrets keep signing: seconds, or 1h, 1d "
                        "(default 1 day, at most a week; 0 stops them now)")

    deliveries = _group(commands, "deliveries", "list webhook deliveries, resend one",
                        ["delivery"])
    listed = command(deliveries, "list", "list deliveries, newest first",
                     notify.deliveries_list, parents)
    listed.add_argument("--status", choices=DELIVERY_STATUSES,
                        help="only deliveries in this status (dead: gave up)")
    listed.add_argument("--destination-id", dest="destination_id",
                        help="only deliveries to this destination")
    listed.add_argument("--limit", type=int, default=50, help="at most this many deliveries")
    resend = command(deliveries, "resend", "send a delivered or dead delivery again",
                     notify.deliveries_resend, parents)
    resend.add_argument("delivery_id", metavar="DELIVERY_ID", help="the delivery's id")


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``governance`` command; its exit status (1 when refused, 2 on bad usage)."""
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        status = handler(args)
        sys.stdout.flush()
        return status
    except (GovernanceError, CommandError) as error:
        text = _describe(error) if isinstance(error, GovernanceError) else str(error)
        print(f"error: {text}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        # The reader went away (`governance runs list | head`): say nothing more, and keep
        # the interpreter's final flush from failing on the closed pipe.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
