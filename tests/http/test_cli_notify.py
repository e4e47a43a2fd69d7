"""The notification commands: monitors, destinations and deliveries, for people and --json."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import attrs
import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from governance_core.context import Config
from governance_core.service import Governance
from governance_http.cli import main
from governance_http.cli.notify import SECRET_SHOWN_ONCE, parse_window
from tests.http.support import as_json, run
from tests.notifications.conftest import LOOPBACK_ONLY, Received, Receiver

HOOK = "https://hooks.example.com/governance"


@attrs.frozen
class Store:
    db: str
    account_id: str
    token: str
    agent_id: str


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Store:
    db = str(tmp_path / "g.db")
    made = as_json(capsys, "init", "--db", db, "--account-name", "Acme")
    with Governance.open(db) as gov:
        agent = gov.session(made["token"]).details("agents/create", name="Support bot")
    return Store(db, made["account_id"], made["token"], agent["id"])


def test_parse_window_reads_seconds_and_durations() -> None:
    assert [parse_window(text) for text in ("90", "90s", "15m", "1h", "7d", "2w")] == [
        90, 90, 900, 3600, 7 * 86400, 14 * 86400]
    with pytest.raises(argparse.ArgumentTypeError, match="15m"):
        parse_window("an hour")


def test_monitors_are_created_listed_and_shown(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    made = as_json(capsys, "monitors", "create", "--db", store.db, "--name", "denials",
                   "--metric", "policy_denials", "--window", "1h", "--comparison", "ge",
                   "--warning", "1", "--critical", "5", "--agent-id", store.agent_id)
    assert (made["metric"], made["window_seconds"], made["warning"], made["critical"]) == (
        "policy_denials", 3600, 1, 5)
    assert made["agent_id"] == store.agent_id and made["account_id"] == store.account_id
    assert made["level"] == "unknown" and made["status"] == "active"
    paused = as_json(capsys, "monitors", "create", "--db", store.db, "--name", "busy",
                     "--metric", "run_count", "--window", "600", "--warning", "100",
                     "--every", "5m", "--paused")
    assert paused["evaluate_every_seconds"] == 300 and paused["status"] == "paused"

    assert [m["id"] for m in as_json(capsys, "monitors", "list", "--db", store.db)] == [
        made["id"], paused["id"]]
    assert [m["id"] for m in as_json(capsys, "monitors", "list", "--db", store.db,
                                     "--metric", "run_count")] == [paused["id"]]
    status, out, _ = run(capsys, "monitors", "list", "--db", store.db)
    assert status == 0 and made["id"] in out and "policy_denials" in out and "agent" in out
    assert paused["id"] in out and "account" in out

    assert as_json(capsys, "monitors", "show", "--db", store.db, made["id"]) == made
    status, out, _ = run(capsys, "monitors", "show", "--db", store.db, made["id"])
    shown = dict(line.split(":", 1) for line in out.splitlines())
    assert status == 0 and shown["agent_id"].strip() == store.agent_id
    assert shown["environment_id"].strip() == "-" and shown["level"].strip() == "unknown"
    status, _, err = run(capsys, "monitors", "show", "--db", store.db, "0" * 32)
    assert status == 1 and f"no monitor {'0' * 32}" in err


def test_a_bad_monitor_is_refused_naming_the_field(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    base = ("monitors", "create", "--db", store.db, "--name", "m", "--metric", "run_count")
    status, _, err = run(capsys, *base, "--window", "1h")
    assert status == 1 and "warning:" in err, "a threshold is needed"
    status, _, err = run(capsys, *base, "--window", "10", "--warning", "1")
    assert status == 1 and "window_seconds:" in err
    status, _, err = run(capsys, *base, "--window", "1h", "--warning", "1",
                         "--environment-id", "0" * 32)
    assert status == 1 and "environment_id:" in err
    with pytest.raises(SystemExit) as usage:
        main([*base, "--window", "an hour", "--warning", "1"])
    assert usage.value.code == 2
    assert "an hour" in capsys.readouterr().err
    assert as_json(capsys, "monitors", "list", "--db", store.db) == []


def test_a_create_in_a_store_of_several_accounts_names_one(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    other = as_json(capsys, "accounts", "create", "--db", store.db, "--account-name", "Globex")
    args = ("destinations", "create", "--db", store.db, "--name", "hook", "--url", HOOK)
    status, _, err = run(capsys, *args)
    assert status == 1 and "--account ID" in err and other["account_id"] in err
    made = as_json(capsys, *args, "--account", other["account_id"])
    assert made["account_id"] == other["account_id"]
    listed = as_json(capsys, "destinations", "list", "--db", store.db,
                     "--account", store.account_id)
    assert listed == []


def test_a_destination_prints_its_secret_once(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    status, out, err = run(capsys, "destinations", "create", "--db", store.db, "--name", "ops",
                           "--url", HOOK, "--format", "slack", "--event-type", "alert.raised",
                           "--event-type", "monitor.state_changed")
    assert status == 0, err
    [secret] = [line.split()[-1] for line in out.splitlines() if SECRET_SHOWN_ONCE in line]
    [listed] = as_json(capsys, "destinations", "list", "--db", store.db)
    assert listed["body_format"] == "slack" and listed["url"] == HOOK
    assert listed["event_types"] == ["alert.raised", "monitor.state_changed"]
    assert secret not in json.dumps(listed)
    status, out, _ = run(capsys, "destinations", "list", "--db", store.db)
    assert status == 0 and listed["id"] in out and HOOK in out and secret not in out

    made = as_json(capsys, "destinations", "create", "--db", store.db, "--name", "second",
                   "--url", HOOK)
    assert made["secret"] and made["secret"] != secret and made["body_format"] == "standard"
    status, _, err = run(capsys, "destinations", "create", "--db", store.db, "--name", "bad",
                         "--url", "http://127.0.0.1/hook")
    assert status == 1 and "url:" in err


def test_dead_deliveries_are_listed_and_resent(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    as_json(capsys, "destinations", "create", "--db", store.db, "--name", "ops", "--url", HOOK)
    with Governance.open(store.db) as gov:
        session = gov.session(store.token)
        run_id = session.details("agent_instances/register", agent_id=store.agent_id,
                                 agent_version={"external_identifier": "1"})["id"]
        for name in ("slow", "costly"):
            session.details("alerts/raise", agent_instance_id=run_id, name=name,
                            severity="warning")
        # What the sender leaves after the last attempt fails.
        first = gov.store.query("deliveries", [])[0]
        gov.store.put("deliveries", {**first, "status": "dead"})

    every = as_json(capsys, "deliveries", "list", "--db", store.db)
    assert sorted(d["status"] for d in every) == ["dead", "pending"]
    [dead] = as_json(capsys, "deliveries", "list", "--db", store.db, "--status", "dead")
    assert dead["id"] == first["id"]
    assert len(as_json(capsys, "deliveries", "list", "--db", store.db, "--limit", "1")) == 1
    status, out, _ = run(capsys, "deliveries", "list", "--db", store.db, "--status", "dead")
    assert status == 0 and dead["id"] in out and "alert.raised" in out

    status, out, err = run(capsys, "deliveries", "resend", "--db", store.db, dead["id"])
    assert status == 0, err
    assert f"delivery {dead['id']} is pending" in out
    assert as_json(capsys, "deliveries", "list", "--db", store.db, "--status", "dead") == []
    status, _, err = run(capsys, "deliveries", "resend", "--db", store.db, dead["id"])
    assert status == 1 and "invalid_action" in err, "a pending delivery is sent as scheduled"
    status, _, err = run(capsys, "deliveries", "resend", "--db", store.db, "0" * 32)
    assert status == 1 and f"no delivery {'0' * 32}" in err


def test_a_monitor_is_updated_paused_resumed_and_deleted(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    made = as_json(capsys, "monitors", "create", "--db", store.db, "--name", "failures",
                   "--metric", "failed_runs", "--window", "1h", "--warning", "1",
                   "--agent-id", store.agent_id)
    update = ("monitors", "update", "--db", store.db, made["id"])
    changed = as_json(capsys, *update, "--warning", "2", "--critical", "10", "--every", "5m",
                      "--window", "2h", "--comparison", "ge", "--pause")
    assert (changed["warning"], changed["critical"], changed["evaluate_every_seconds"],
            changed["window_seconds"], changed["comparison"], changed["status"]) == (
        2, 10, 300, 7200, "ge", "paused")
    assert changed["version"] == made["version"] + 1 and changed["name"] == "failures"
    assert as_json(capsys, *update, "--warning", "2")["version"] == changed["version"], (
        "nothing changed, no new version")
    resumed = as_json(capsys, *update, "--resume", "--clear", "agent-id", "--clear",
                      "warning", "--description", "every agent's failures")
    assert resumed["status"] == "active" and resumed["agent_id"] is None
    assert resumed["warning"] is None and resumed["critical"] == 10
    assert resumed["description"] == "every agent's failures"

    status, out, _ = run(capsys, *update, "--name", "all failures")
    shown = dict(line.split(":", 1) for line in out.splitlines())
    assert status == 0 and shown["name"].strip() == "all failures"
    status, _, err = run(capsys, *update, "--clear", "critical")
    assert status == 1 and "warning:" in err, "a monitor keeps a threshold"
    status, _, err = run(capsys, *update, "--window", "10")
    assert status == 1 and "window_seconds:" in err
    status, _, err = run(capsys, *update, "--critical", "5", "--clear", "critical")
    assert status == 1 and "--critical and --clear critical contradict" in err
    with pytest.raises(SystemExit) as usage:
        main([*update, "--pause", "--resume"])
    assert usage.value.code == 2 and "not allowed with" in capsys.readouterr().err
    assert as_json(capsys, "monitors", "show", "--db", store.db, made["id"])["name"] == (
        "all failures")

    status, out, _ = run(capsys, "monitors", "delete", "--db", store.db, made["id"])
    assert status == 0 and f"monitor {made['id']} (all failures) deleted" in out
    assert as_json(capsys, "monitors", "list", "--db", store.db) == []
    status, _, err = run(capsys, "monitors", "delete", "--db", store.db, made["id"])
    assert status == 1 and f"no monitor {made['id']}" in err


def test_a_destination_is_updated_disabled_and_deleted(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    made = as_json(capsys, "destinations", "create", "--db", store.db, "--name", "ops",
                   "--url", HOOK)
    update = ("destinations", "update", "--db", store.db, made["id"])
    changed = as_json(capsys, *update, "--name", "chat", "--format", "slack", "--url",
                      HOOK + "/chat", "--event-type", "alert.raised", "--event-type",
                      "alert.cleared", "--description", "the chat room", "--disable")
    assert (changed["name"], changed["body_format"], changed["url"], changed["status"],
            changed["event_types"], changed["description"]) == (
        "chat", "slack", HOOK + "/chat", "disabled", ["alert.raised", "alert.cleared"],
        "the chat room")
    assert changed["version"] == 2 and "secret" not in changed and made["secret"] not in str(
        changed)
    status, out, _ = run(capsys, *update, "--enable", "--clear", "event-types", "--clear",
                         "description")
    shown = dict(line.split(":", 1) for line in out.splitlines())
    assert status == 0 and shown["event_types"].strip() == "all"
    assert shown["status"].strip() == "active" and shown["description"].strip() == "-"
    status, _, err = run(capsys, *update, "--url", "http://169.254.169.254/latest")
    assert status == 1 and "url:" in err
    status, _, err = run(capsys, *update, "--event-type", "alert.raised", "--clear",
                         "event-types")
    assert status == 1 and "contradict" in err

    status, out, _ = run(capsys, "destinations", "delete", "--db", store.db, made["id"])
    assert status == 0 and f"destination {made['id']} (chat) deleted" in out
    assert as_json(capsys, "destinations", "list", "--db", store.db) == []
    status, _, err = run(capsys, "destinations", "rotate", "--db", store.db, made["id"])
    assert status == 1 and f"no destination {made['id']}" in err


def test_rotate_prints_the_new_secret_once_and_the_old_one_signs_for_the_grace(
    store: Store, capsys: pytest.CaptureFixture[str],
) -> None:
    receiver = Receiver()
    try:
        with Governance.open(store.db,
                             config=Config(webhook_allowed_networks=LOOPBACK_ONLY)) as gov:
            session = gov.session(store.token)
            created = session.call("destinations/create", name="hook", url=receiver.url)
            run_id = session.details("agent_instances/register", agent_id=store.agent_id,
                                     agent_version={"external_identifier": "1"})["id"]
        destination_id, old = created["details"]["id"], str(created["secret"])

        def deliver_alert(name: str) -> Received:
            with Governance.open(store.db) as gov:
                gov.session(store.token).call("alerts/raise", agent_instance_id=run_id,
                                              name=name, severity="warning")
            assert run(capsys, "deliver", "--db", store.db, "--once",
                       "--allow-network", "127.0.0.1/32")[0] == 0
            return receiver.received[-1]

        status, out, err = run(capsys, "destinations", "rotate", "--db", store.db,
                               destination_id)
        assert status == 0, err
        [new] = [line.split()[-1] for line in out.splitlines() if SECRET_SHOWN_ONCE in line]
        assert new.startswith("whsec_") and new != old and "86400 s" in out
        message = deliver_alert("first")
        assert Webhook(old).verify(message.body, message.headers)["type"] == "alert.raised"
        assert Webhook(new).verify(message.body, message.headers)["type"] == "alert.raised"

        rotated = as_json(capsys, "destinations", "rotate", "--db", store.db, destination_id,
                          "--grace", "0")
        newest = rotated["secret"]
        assert rotated["grace_seconds"] == 0 and rotated["id"] == destination_id
        assert rotated["version"] == 3
        message = deliver_alert("second")
        Webhook(newest).verify(message.body, message.headers)
        for ended in (old, new):
            with pytest.raises(WebhookVerificationError):
                Webhook(ended).verify(message.body, message.headers)
        listed = json.dumps(as_json(capsys, "destinations", "list", "--db", store.db))
        assert not any(secret in listed for secret in (old, new, newest))
    finally:
        receiver.close()
