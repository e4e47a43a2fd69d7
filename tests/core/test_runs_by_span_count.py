"""The runs list sorted by span count, page by page, against the order computed here.

Runs are put with every kind of count: each of one bucket alone (fewer than 100 spans), several
counts sharing a bucket (100 and more), many runs of one count, runs not started, runs written
before buckets were kept (none: they come last), and another agent's runs (the filter). Every
page of every size lists them as sorting all of them would: by count, ties newest start first
(runs not started last), then by id, whether the runs of a bucket of several counts are
named by id or not.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from governance_core.clock import format_timestamp
from governance_core.domain import insights
from governance_core.domain.insights import RunFilter, list_runs
from governance_core.domain.runs import span_count_bucket
from governance_core.service import Bootstrap, Governance

COUNTS = (
    [0, 1, 4, 9, 10, 42, 99, 100, 105, 109, 150, 1000, 1050, 1099, 50_000]
    + [4] * 12 + [105] * 4 + [1050] * 3
)


def _put_runs(gov: Governance, boot: Bootstrap) -> tuple[list[dict[str, Any]], str]:
    """The runs put (records as stored) and the agent most of them belong to."""
    account = gov.store.get("accounts", boot.account_id)
    assert account is not None
    session = gov.session(boot.token)
    agent, other = (session.details("agents/create", name=name)["id"]
                    for name in ("counted", "other"))
    now = gov.clock()
    runs: list[dict[str, Any]] = []
    for index, count in enumerate(COUNTS * 2):
        started = now - timedelta(minutes=7 * index % 97)
        record: dict[str, Any] = {
            "id": gov.ids.new(account["partition"], started), "account_id": boot.account_id,
            "inserted_at": format_timestamp(started), "updated_at": format_timestamp(started),
            "agent_id": other if index % 5 == 0 else agent,
            "environment_id": boot.environment_id, "purpose": "live",
            "status": "pending" if index % 9 == 0 else "complete",
            "started_at": None if index % 9 == 0 else format_timestamp(started),
            "span_total": count, "span_bucket": span_count_bucket(count),
        }
        if index % 13 == 0:
            # Written before buckets were kept: no bucket, no total.
            del record["span_bucket"], record["span_total"]
        runs.append(record)
    with gov.store.transaction():
        for record in runs:
            gov.store.put("agent_instances", record)
    return runs, agent


def _expected(runs: list[dict[str, Any]], descending: bool) -> list[str]:
    by_id = sorted(runs, key=lambda run: run["id"])
    started = sorted(
        (run for run in by_id if run["started_at"]), key=lambda run: run["started_at"],
        reverse=True,
    )
    newest = started + [run for run in by_id if not run["started_at"]]
    counted = [run for run in newest if run.get("span_bucket") is not None]
    ordered = sorted(counted, key=lambda run: run["span_total"], reverse=descending)
    return [run["id"] for run in ordered + [run for run in newest if run not in counted]]


@pytest.mark.parametrize("named", [1000, 2], ids=["named-by-id", "too-many-to-name"])
@pytest.mark.parametrize("descending", [True, False])
def test_every_page_lists_the_runs_by_span_count(
    gov: Governance, boot: Bootstrap, descending: bool, named: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A bucket of several counts names its runs by id up to a bound, else filters them alone.
    monkeypatch.setattr(insights, "_NAMED_RUNS", named)
    runs, agent = _put_runs(gov, boot)
    ctx = gov.context(gov.authenticate(boot.token))
    for chosen, kept in (
        (RunFilter(), runs),
        (RunFilter(agent_ids=(agent,), status="complete"),
         [run for run in runs if run["agent_id"] == agent and run["status"] == "complete"]),
    ):
        expected = _expected(kept, descending)
        assert len(set(expected)) == len(expected) > 30
        for limit in (1, 7, 100):
            for offset in range(0, len(expected) + 2, limit):
                page, total = list_runs(
                    ctx, chosen, sort="spans", descending=descending, offset=offset, limit=limit
                )
                assert total == len(expected)
                assert [run["id"] for run in page] == expected[offset:offset + limit], (
                    chosen, limit, offset,
                )
