"""``governance deliver``: run the webhook sender apart from the server.

It takes the same lease as the sender inside ``governance serve``, so running both sends
each delivery from one of them at a time; serve's can be turned off with
``GOVERNANCE_SENDER=off``.
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from types import FrameType

import attrs

from governance_core.notifications.addresses import parse_networks
from governance_core.notifications.sender import (
    RetryPolicy,
    Sender,
    SenderSettings,
    SenderUnavailable,
)
from governance_http.cli.output import CommandError
from governance_http.cli.stores import open_store

__all__ = ["add_arguments", "deliver"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of ``governance deliver``."""
    parser.add_argument("--once", action="store_true",
                        help="make one pass (send what is due), print a count and exit")
    parser.add_argument("--poll-seconds", type=float, default=1.0,
                        help="pause between passes")
    parser.add_argument("--lease-seconds", type=float, default=30.0,
                        help="how long the lease outlives a sender that stops renewing it")
    parser.add_argument("--parallel", type=int, default=8,
                        help="destinations drained at once")
    parser.add_argument("--max-attempts", type=int, default=10,
                        help="attempts before a delivery is dead (a dead letter)")
    parser.add_argument("--retry-base-seconds", type=float, default=5.0,
                        help="the first retry's wait; each next one doubles it")
    parser.add_argument("--allow-network", action="append", default=[],
                        help="a network webhooks may reach although not public (repeatable; "
                        "adds to $GOVERNANCE_WEBHOOK_ALLOWED_NETWORKS)")


def _settings(args: argparse.Namespace) -> SenderSettings:
    for name in ("poll_seconds", "lease_seconds", "retry_base_seconds"):
        if getattr(args, name) <= 0:
            raise CommandError(f"--{name.replace('_', '-')} must be more than 0")
    for name in ("parallel", "max_attempts"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be at least 1")
    try:
        base = SenderSettings.from_environment()
    except ValueError as error:
        raise CommandError(str(error)) from error
    try:
        extra = parse_networks(args.allow_network)
    except ValueError as error:
        raise CommandError(f"--allow-network: {error}") from error
    return attrs.evolve(
        base,
        allowed_networks=(*base.allowed_networks, *extra),
        poll_seconds=args.poll_seconds, lease_seconds=args.lease_seconds,
        parallel=args.parallel,
        retry=RetryPolicy(max_attempts=args.max_attempts, base_seconds=args.retry_base_seconds),
    )


def deliver(args: argparse.Namespace) -> int:
    """Send the outbox's deliveries until interrupted (or once, with ``--once``)."""
    settings = _settings(args)
    with open_store(args.db) as governance:
        governance.config = attrs.evolve(
            governance.config,
            webhook_allowed_networks=tuple(str(net) for net in settings.allowed_networks),
        )
        try:
            sender = Sender(governance, settings)
        except SenderUnavailable as error:
            raise CommandError(str(error)) from error
        if args.once:
            attempted = sender.run_once()
            sender.close()
            print(json.dumps({"attempted": attempted}) if args.json
                  else f"{attempted} deliveries attempted")
            return 0
        stop = threading.Event()

        def stopping(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, stopping)
        signal.signal(signal.SIGINT, stopping)
        print(f"delivering webhooks (holder {sender.holder}); Ctrl-C stops", flush=True)
        sender.run(stop)
    return 0
