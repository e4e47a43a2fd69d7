"""``governance policies test``: back-test policy text over the runs a store recorded.

It runs the core's ``policies/test`` in one account (``--account``, or the store's only one)
and prints what the policy would have decided: the spans by outcome, and the runs and spans
it would have stopped (docs/policies.md, "Back-testing").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from governance_core.operations.policies import BACKTEST_DAYS, BACKTEST_LIMIT
from governance_core.policies.backtest import BACKTEST_MODES
from governance_http.cli.output import CommandError, console, print_json, print_table
from governance_http.cli.stores import one_account, open_store

__all__ = ["add_test_arguments", "policies_test"]


def _bounded(low: int, high: int) -> Any:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be from {low} to {high}")
        return value

    return parse


def add_test_arguments(parser: argparse.ArgumentParser) -> None:
    """The arguments of ``governance policies test``."""
    parser.add_argument("file", metavar="FILE",
                        help="the Cedar policy text to test (- reads standard input)")
    parser.add_argument("--days", type=_bounded(*BACKTEST_DAYS[:2]), default=BACKTEST_DAYS[2],
                        help="judge the runs started in this many last days")
    parser.add_argument("--policy", metavar="POLICY_ID",
                        help="test the text as a new version of this saved policy (its mode "
                        "and scope are the defaults)")
    parser.add_argument("--mode", choices=BACKTEST_MODES,
                        help="judge as enforce or observe would (default: the saved policy's, "
                        "else enforce)")
    parser.add_argument("--agent", metavar="AGENT_ID", help="only this agent's runs")
    parser.add_argument("--environment", metavar="ENVIRONMENT_ID",
                        help="only the runs in this environment")
    parser.add_argument("--limit", type=_bounded(*BACKTEST_LIMIT[:2]), default=20,
                        help="list at most this many stopped runs and spans")
    parser.add_argument("--account", help="the account to test in (default: the store's "
                        "only account)")


def _source(name: str) -> str:
    if name == "-":
        return sys.stdin.read()
    try:
        return Path(name).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise CommandError(f"cannot read {name}: {error}") from error


def _counts(title: str, counts: dict[str, int]) -> str:
    return f"{title}: " + ", ".join(f"{outcome} {number:,}" for outcome, number in counts.items())


def policies_test(args: argparse.Namespace) -> int:
    """Print what the policy text in FILE would have decided over the recorded runs."""
    params: dict[str, Any] = {"source": _source(args.file), "days": args.days,
                              "limit": args.limit}
    for member, value in (("policy_id", args.policy), ("mode", args.mode),
                          ("agent_id", args.agent), ("environment_id", args.environment)):
        if value is not None:
            params[member] = value
    with open_store(args.db) as gov:
        session = one_account(gov, args.account, purpose="to test in")
        report = session.call("policies/test", params)
    report.pop("status", None)
    if args.json:
        print_json(report)
        return 0
    policy, window = report["policy"], report["window"]
    out = console()
    out.print(
        f"policy {policy['name']} v{policy['version']} ({policy['mode']}): "
        f"{report['spans']:,} spans of {report['runs']:,} runs started from "
        f"{window['since']} to {window['until']}", markup=False, highlight=False,
    )
    out.print(_counts("outcomes", report["outcomes"]), markup=False)
    if report["observed_outcomes"] is not None:
        out.print(_counts("enforcing would say", report["observed_outcomes"]), markup=False)
    out.print(f"spans with a warning: {report['warnings']:,}; spans a statement failed to "
              f"evaluate on (held): {report['errors']:,}", markup=False)
    runs, spans = report["stopped_runs"], report["stopped_spans"]
    out.print(f"stopped: {spans['count']:,} spans in {runs['count']:,} runs", markup=False)
    print_table(
        ("RUN", "STARTED", "STOPPED SPANS", "FIRST STOPPED", "ITS SPAN"),
        [(run["agent_instance_id"], run["started_at"], run["stopped_spans"],
          f"{run['first_action']['kind']} {run['first_action']['name']}",
          run["first_agent_span_id"]) for run in runs["items"]],
        right=("STOPPED SPANS",), title="stopped runs", empty="no run would have been stopped",
    )
    if len(runs["items"]) < runs["count"]:
        out.print(f"... and {runs['count'] - len(runs['items']):,} more runs (--limit)",
                  markup=False)
    return 0
