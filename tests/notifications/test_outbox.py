"""The outbox: an event and its deliveries are written in the transaction of their cause,
for the cause's account only."""

from __future__ import annotations

import pytest

from governance_core.errors import ValidationErrors
from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller
from tests.notifications.world import deliveries, destination, new_run, raise_alert


class Boom(Exception):
    """Raised to roll a transaction back."""


def events(caller: Caller) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = caller.call(
        "notification_events/list", sorting="id")["summaries"]
    return rows


def test_each_raise_update_and_clear_is_one_event_with_one_delivery_per_destination(
    caller: Caller,
) -> None:
    destination(caller, "https://one.example.com/")
    destination(caller, "https://two.example.com/")
    run_id = new_run(caller)
    raise_alert(caller, run_id)
    raise_alert(caller, run_id)  # unchanged: no event
    raise_alert(caller, run_id, severity="critical")
    caller.call("alerts/clear", agent_instance_id=run_id, name="slow")
    assert [event["event_type"] for event in events(caller)] == [
        "alert.raised", "alert.updated", "alert.cleared"]
    rows = deliveries(caller)
    assert len(rows) == 6 and {row["status"] for row in rows} == {"pending"}
    assert {row["event_id"] for row in rows} == {event["id"] for event in events(caller)}


def test_a_rolled_back_raise_leaves_no_event_and_no_delivery(
    ngov: Governance, caller: Caller
) -> None:
    destination(caller, "https://one.example.com/")
    run_id = new_run(caller)
    with pytest.raises(Boom), ngov.transaction():
        raise_alert(caller, run_id)
        assert len(deliveries(caller)) == 1
        raise Boom()
    assert events(caller) == [] and deliveries(caller) == []
    assert caller.call("alerts/list")["summaries"] == []


def test_another_accounts_alerts_never_reach_this_accounts_destination(
    ngov: Governance, caller: Caller, nboot: Bootstrap
) -> None:
    destination(caller, "https://mine.example.com/")
    other = account_caller(ngov, ngov.bootstrap(account_name="Other", admin_email="o@o.test"))
    raise_alert(other, new_run(other))
    assert deliveries(caller) == [] and events(caller) == []
    assert len(events(other)) == 1 and deliveries(other) == []


def test_a_destination_subscribed_to_some_types_gets_only_those(caller: Caller) -> None:
    destination(caller, "https://cleared.example.com/", event_types=["alert.cleared"])
    run_id = new_run(caller)
    raise_alert(caller, run_id)
    caller.call("alerts/clear", agent_instance_id=run_id, name="slow")
    assert [row["event_type"] for row in deliveries(caller)] == ["alert.cleared"]


def test_event_types_are_checked_by_name(caller: Caller) -> None:
    with pytest.raises(ValidationErrors) as raised:
        caller.call("destinations/create", name="x", url="https://x.example.com/",
                    event_types=["alert.raised", "alert.exploded"])
    nested = raised.value.errors["event_types"]
    assert isinstance(nested, ValidationErrors) and list(nested.errors) == ["1"]


def test_an_alert_raised_with_an_ingestion_token_is_in_the_outbox_too(
    ngov: Governance, caller: Caller
) -> None:
    destination(caller, "https://one.example.com/")
    run_id = new_run(caller)
    raise_alert(caller.ingestion(*_agent_and_environment(caller, run_id)), run_id,
                name="ingested")
    assert [row["event_type"] for row in deliveries(caller)] == ["alert.raised"]


def _agent_and_environment(caller: Caller, run_id: str) -> tuple[str, str]:
    run = caller.details("agent_instances/show", agent_instance_id=run_id)
    return run["agent_id"], run["environment_id"]
