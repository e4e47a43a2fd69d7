"""Commands for notifications: monitors, webhook destinations and their deliveries.

Everything goes through the core's operations (``monitors/*``, ``destinations/*``,
``deliveries/*``), so a command checks what the API checks. Lists cover every account
without ``--account``; a create works in one account (the store's only one, or the one
named); show, update, delete, rotate and resend find the record in whichever account holds
it.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
from collections.abc import Iterator
from typing import Any

from governance_core.errors import NotFound
from governance_core.operations.destinations import DEFAULT_GRACE
from governance_core.service import Governance, Session
from governance_http.cli.output import CommandError, print_json, print_table
from governance_http.cli.stores import account_sessions, one_account, open_store, pages

__all__ = [
    "DESTINATION_CLEARABLE",
    "MONITOR_CLEARABLE",
    "SECRET_SHOWN_ONCE",
    "deliveries_list",
    "deliveries_resend",
    "destinations_create",
    "destinations_delete",
    "destinations_list",
    "destinations_rotate",
    "destinations_update",
    "monitors_create",
    "monitors_delete",
    "monitors_list",
    "monitors_show",
    "monitors_update",
    "parse_window",
]

SECRET_SHOWN_ONCE = "signing secret (shown once, keep it)"
MONITOR_CLEARABLE = ("warning", "critical", "agent-id", "environment-id", "description")
"""What ``monitors update --clear`` empties (a monitor keeps a warning or a critical)."""
DESTINATION_CLEARABLE = ("description", "event-types")
"""What ``destinations update --clear`` empties (no event types: every type)."""

_DURATION = re.compile(r"(\d+)([smhdw]?)")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_window(text: str) -> int:
    """Seconds from ``3600`` or a duration such as ``90s``, ``15m``, ``1h``, ``7d``, ``2w``."""
    matched = _DURATION.fullmatch(text.strip())
    if matched is None:
        raise argparse.ArgumentTypeError(
            f"{text!r} is neither a number of seconds nor a duration such as 15m, 1h, 7d"
        )
    amount, unit = matched.groups()
    return int(amount) * _SECONDS[unit]


def _summaries(
    session: Session, operation: str, params: dict[str, Any],
) -> Iterator[dict[str, Any]]:
    for page in pages(session.call, operation, params):
        yield from page["summaries"]


def _listed(
    gov: Governance, account_id: str | None, operation: str, params: dict[str, Any],
) -> list[dict[str, Any]]:
    return [
        summary
        for session in account_sessions(gov, account_id)
        for summary in _summaries(session, operation, params)
    ]


def _find(
    gov: Governance, account_id: str | None, operation: str, member: str, record_id: str,
    kind: str,
) -> tuple[Session, dict[str, Any]]:
    """The session of the account holding the record and its details."""
    for session in account_sessions(gov, account_id):
        try:
            return session, session.details(operation, {member: record_id})
        except NotFound:
            continue
    raise CommandError(f"no {kind} {record_id} in this store")


def _print_details(
    args: argparse.Namespace, details: dict[str, Any], keys: tuple[str, ...],
) -> None:
    if args.json:
        print_json(details)
        return
    for key in keys:
        value = details.get(key)
        print(f"{key + ':':24} {'-' if value is None else value}")


def _set(params: dict[str, Any], args: argparse.Namespace, names: dict[str, str]) -> None:
    """Copy the options given (not None) into ``params`` under their operation member."""
    for option, member in names.items():
        value = getattr(args, option)
        if value is not None:
            params[member] = value


def _cleared(params: dict[str, Any], args: argparse.Namespace) -> None:
    """Set the members ``--clear`` names to null; one also given a value is refused."""
    for name in dict.fromkeys(args.clear or ()):
        member = name.replace("-", "_")
        if member in params:
            raise CommandError(f"--{name} and --clear {name} contradict each other")
        params[member] = None


_MONITOR_KEYS = (
    "id", "account_id", "name", "metric", "comparison", "window_seconds", "warning", "critical",
    "hysteresis", "agent_id", "environment_id", "status", "level", "last_value",
    "last_evaluated_at", "next_evaluation_at", "evaluate_every_seconds", "alert_instance_id",
    "description", "version",
)


def _scope(monitor: dict[str, Any]) -> str:
    """What a monitor covers, by kind: its ids are in ``show`` and ``--json``."""
    kinds = [kind for kind in ("agent", "environment") if monitor[f"{kind}_id"]]
    return "+".join(kinds) or "account"


def _monitor_rows(monitors: list[dict[str, Any]]) -> list[tuple[object, ...]]:
    return [
        (m["id"], m["name"], m["metric"], m["comparison"], m["window_seconds"], m["warning"],
         m["critical"], _scope(m), m["status"], m["level"], m["last_value"])
        for m in monitors
    ]


def monitors_list(args: argparse.Namespace) -> int:
    """Print monitors with their level and last value, oldest first."""
    params: dict[str, Any] = {"sorting": "inserted_at"}
    _set(params, args, {"metric": "metric", "level": "level"})
    with open_store(args.db) as gov:
        monitors = (_listed(gov, args.account, "monitors/list", params))
    if args.json:
        print_json(monitors)
        return 0
    print_table(
        ("ID", "NAME", "METRIC", "CMP", "WINDOW S", "WARNING", "CRITICAL", "SCOPE",
         "STATUS", "LEVEL", "VALUE"),
        _monitor_rows(monitors), right=("WINDOW S", "WARNING", "CRITICAL", "VALUE"),
        empty="no monitors",
    )
    return 0


def monitors_create(args: argparse.Namespace) -> int:
    """Create a monitor in one account; print it."""
    params: dict[str, Any] = {"name": args.name, "metric": args.metric,
                              "window_seconds": args.window}
    _set(params, args, {
        "comparison": "comparison", "warning": "warning", "critical": "critical",
        "hysteresis": "hysteresis", "every": "evaluate_every_seconds",
        "agent_id": "agent_id", "environment_id": "environment_id",
        "description": "description",
    })
    if args.paused:
        params["status"] = "paused"
    with open_store(args.db) as gov:
        session = one_account(gov, args.account, purpose="to create the monitor in")
        monitor = session.details("monitors/create", params)
    _print_details(args, monitor, _MONITOR_KEYS)
    return 0


def monitors_show(args: argparse.Namespace) -> int:
    """Print a monitor: what it measures, its thresholds, level and last value."""
    with open_store(args.db) as gov:
        _, monitor = _find(gov, args.account, "monitors/show", "monitor_id", args.monitor_id,
                           "monitor")
    _print_details(args, monitor, _MONITOR_KEYS)
    return 0


_MONITOR_OPTIONS = {
    "name": "name", "metric": "metric", "window": "window_seconds", "comparison": "comparison",
    "warning": "warning", "critical": "critical", "hysteresis": "hysteresis",
    "every": "evaluate_every_seconds", "agent_id": "agent_id",
    "environment_id": "environment_id", "description": "description", "status": "status",
}


def monitors_update(args: argparse.Namespace) -> int:
    """Change a monitor (through ``monitors/update``); print it as it stands after."""
    params: dict[str, Any] = {}
    _set(params, args, _MONITOR_OPTIONS)
    _cleared(params, args)
    with open_store(args.db) as gov:
        session, _ = _find(gov, args.account, "monitors/show", "monitor_id", args.monitor_id,
                           "monitor")
        monitor = session.details("monitors/update", {**params, "monitor_id": args.monitor_id})
    _print_details(args, monitor, _MONITOR_KEYS)
    return 0


def monitors_delete(args: argparse.Namespace) -> int:
    """Delete a monitor; an alert it raised stays, to be cleared by hand."""
    with open_store(args.db) as gov:
        session, _ = _find(gov, args.account, "monitors/show", "monitor_id", args.monitor_id,
                           "monitor")
        monitor = session.details("monitors/delete", {"monitor_id": args.monitor_id})
    if args.json:
        print_json(monitor)
    else:
        print(f"monitor {monitor['id']} ({monitor['name']}) deleted")
    return 0


_DESTINATION_KEYS = (
    "id", "account_id", "name", "url", "body_format", "event_types", "status", "description",
    "version", "inserted_at", "updated_at",
)


def _print_destination(args: argparse.Namespace, destination: dict[str, Any]) -> None:
    shown = destination if args.json else {
        **destination, "event_types": ",".join(destination["event_types"]) or "all",
    }
    _print_details(args, shown, _DESTINATION_KEYS)


def _find_destination(gov: Governance, args: argparse.Namespace) -> Session:
    session, _ = _find(gov, args.account, "destinations/show", "destination_id",
                       args.destination_id, "destination")
    return session


def destinations_update(args: argparse.Namespace) -> int:
    """Change a destination (through ``destinations/update``); print it (never its secrets)."""
    params: dict[str, Any] = {}
    _set(params, args, {"name": "name", "url": "url", "format": "body_format",
                        "event_types": "event_types", "description": "description",
                        "status": "status"})
    _cleared(params, args)
    if "event_types" in params and params["event_types"] is None:
        params["event_types"] = []
    with open_store(args.db) as gov:
        session = _find_destination(gov, args)
        destination = session.details(
            "destinations/update", {**params, "destination_id": args.destination_id}
        )
    _print_destination(args, destination)
    return 0


def destinations_delete(args: argparse.Namespace) -> int:
    """Delete a destination; its pending deliveries become dead letters."""
    with open_store(args.db) as gov:
        session = _find_destination(gov, args)
        destination = session.details(
            "destinations/delete", {"destination_id": args.destination_id}
        )
    if args.json:
        print_json(destination)
    else:
        print(f"destination {destination['id']} ({destination['name']}) deleted; its pending "
              "deliveries become dead letters")
    return 0


def destinations_rotate(args: argparse.Namespace) -> int:
    """Give a destination a new signing secret, printed once; the old ones sign on for a grace."""
    params: dict[str, Any] = {"destination_id": args.destination_id}
    _set(params, args, {"grace": "grace_seconds"})
    with open_store(args.db) as gov:
        session = _find_destination(gov, args)
        answer = session.call("destinations/rotate_secret", params)
    details, secret = answer["details"], str(answer["secret"])
    grace = params.get("grace_seconds", DEFAULT_GRACE)
    if args.json:
        print(json.dumps({**details, "secret": secret, "grace_seconds": grace}, indent=2,
                         default=str))
    else:
        print(f"{'destination id:':42} {details['id']}")
        print(f"{'new ' + SECRET_SHOWN_ONCE + ':':42} {secret}")
        print(f"{'previous secrets keep signing for:':42} {grace} s")
    return 0


def destinations_list(args: argparse.Namespace) -> int:
    """Print webhook destinations (never their secrets), oldest first."""
    with open_store(args.db) as gov:
        destinations = (_listed(gov, args.account, "destinations/list",
                                    {"sorting": "inserted_at"}))
    if args.json:
        print_json(destinations)
        return 0
    print_table(
        ("ID", "NAME", "URL", "FORMAT", "STATUS", "EVENT TYPES"),
        [(d["id"], d["name"], d["url"], d["body_format"], d["status"],
          ",".join(d["event_types"]) or "all") for d in destinations],
        empty="no destinations",
    )
    return 0


def destinations_create(args: argparse.Namespace) -> int:
    """Create a webhook destination in one account; print its signing secret once."""
    params: dict[str, Any] = {"name": args.name, "url": args.url}
    _set(params, args, {"format": "body_format", "event_types": "event_types",
                        "description": "description"})
    with open_store(args.db) as gov:
        session = one_account(gov, args.account, purpose="to create the destination in")
        answer = session.call("destinations/create", params)
    details, secret = answer["details"], str(answer["secret"])
    if args.json:
        print(json.dumps({**details, "secret": secret}, indent=2, default=str))
    else:
        print(f"{'destination id:':38} {details['id']}")
        print(f"{'url:':38} {details['url']}")
        print(f"{SECRET_SHOWN_ONCE + ':':38} {secret}")
    return 0


def deliveries_list(args: argparse.Namespace) -> int:
    """Print deliveries, newest first: status, attempts and the last error."""
    params: dict[str, Any] = {"sorting": "-inserted_at"}
    _set(params, args, {"status": "status", "destination_id": "destination_id"})
    with open_store(args.db) as gov:
        # Each account's newest ``--limit``, then the newest of those across accounts.
        rows = sorted(
            (row for session in account_sessions(gov, args.account)
             for row in itertools.islice(_summaries(session, "deliveries/list", params),
                                         args.limit)),
            key=lambda row: row["inserted_at"], reverse=True,
        )[:args.limit]
    if args.json:
        print_json(rows)
        return 0
    print_table(
        ("ID", "EVENT TYPE", "STATUS", "ATTEMPTS", "LAST CODE", "LAST ERROR", "NEXT ATTEMPT"),
        [(d["id"], d["event_type"], d["status"],
          d["attempt_count"], d["last_status_code"], d["last_error"], d["next_attempt_at"])
         for d in rows],
        right=("ATTEMPTS", "LAST CODE"), empty="no deliveries",
    )
    return 0


def deliveries_resend(args: argparse.Namespace) -> int:
    """Send a delivered or dead delivery again, with a fresh round of attempts."""
    with open_store(args.db) as gov:
        session, _ = _find(gov, args.account, "deliveries/show", "delivery_id",
                           args.delivery_id, "delivery")
        resent = session.details("deliveries/resend", {"delivery_id": args.delivery_id})
    if args.json:
        print_json(resent)
    else:
        print(f"delivery {resent['id']} is {resent['status']}, next attempt at "
              f"{resent['next_attempt_at']}")
    return 0

