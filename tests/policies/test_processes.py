"""Several processes on one database: policy changes are seen, an approval is used once, a
tool call is counted once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.policies.support import beside_another_process
from tests.stores import scratch_database

REFUNDS = (
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };"
)


def test_a_policy_change_in_one_process_is_seen_by_another(tmp_path: Path) -> None:
    with beside_another_process(tmp_path / "shared.db") as (world, reader):
        run = world.run()
        policy = world.policy('forbid (principal, action, resource == Tool::"email");')
        session = reader.session(world.boot.token)

        def decide() -> str:
            return str(session.details("decisions/decide", {
                "agent_instance_id": run, "action": {"kind": "tool_call", "name": "email"},
            })["outcome"])

        assert decide() == "deny"
        world.session.call("policies/update", {"policy_id": policy["id"], "mode": "disabled"})
        assert decide() == "allow"
        world.session.call("policies/update", {"policy_id": policy["id"], "mode": "enforce"})
        assert decide() == "deny"


@pytest.fixture
def postgres_url() -> Iterator[str]:
    with scratch_database("governance_policies") as url:
        yield url


def test_two_servers_never_both_use_one_approval(postgres_url: str) -> None:
    with beside_another_process(postgres_url) as (world, second):
        world.policy(REFUNDS)
        sessions = [world.session, second.session(world.boot.token)]
        for attempt in range(5):
            run = world.run()
            held = world.decide(run, "tool_call", "refund", {"amount": 500})
            world.session.call("approvals/approve", {"approval_id": held["approval_id"]})
            start = threading.Barrier(4)
            outcomes: list[str] = []

            def decide(
                index: int, run: str, start: threading.Barrier, outcomes: list[str]
            ) -> None:
                start.wait()
                outcomes.append(world.decide(
                    run, "tool_call", "refund", {"amount": 500}, session=sessions[index % 2]
                )["outcome"])

            threads = [
                threading.Thread(target=decide, args=(i, run, start, outcomes)) for i in range(4)
            ]
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            assert sorted(outcomes) == ["allow", *["pending_approval"] * 3], attempt


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
def test_tool_calls_decided_at_once_by_two_servers_are_each_counted_once(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    location = (
        str(tmp_path / "shared.db") if kind == "sqlite"
        else request.getfixturevalue("postgres_url")
    )
    with beside_another_process(location) as (world, second):
        world.policy('forbid (principal, action == Action::"call_tool", resource)'
                     " when { context.run.tool_calls >= 5 };")
        sessions = [world.session, second.session(world.boot.token)]
        run = world.run()
        start = threading.Barrier(8)
        outcomes: list[str] = []

        def decide(index: int) -> None:
            start.wait()
            for _ in range(2):
                outcomes.append(world.decide(
                    run, "tool_call", "search", session=sessions[index % 2]
                )["outcome"])

        threads = [threading.Thread(target=decide, args=(index,)) for index in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        # Whichever server decided it, each allowed call took the next number: five of them.
        assert sorted(outcomes) == ["allow"] * 5 + ["deny"] * 11
        numbers = sorted(
            decision["tool_call_number"] for decision in world.gov.store.query("decisions")
            if decision["outcome"] == "allow"
        )
        assert numbers == [1, 2, 3, 4, 5]
