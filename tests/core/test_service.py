"""The facade: authentication, idempotency keys, bulk, and secrets shown once."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.errors import (
    BadAuthToken,
    IdempotencyKeyAlreadyUsed,
    NotAuthenticated,
    NotFound,
    ValidationErrors,
)
from governance_core.idempotency import fingerprint
from governance_core.service import Bootstrap, Governance
from tests.core.accounts_world import World, canonical, fails, field_codes
from tests.stores import scratch_schema

KEY = "request-key-0001"


# -- authentication ------------------------------------------------------------------------
def test_no_token_is_not_authenticated(gov: Governance, boot: Bootstrap) -> None:
    for token in (None, ""):
        assert isinstance(fails(gov.call, "teams/list", token=token), NotAuthenticated)


@pytest.mark.parametrize(
    "token", ["Bearer pf_x", "not-a-token", "pf_", "pf_unknownunknownunknownunknownunknown1"]
)
def test_an_unknown_or_malformed_token_is_a_bad_authtoken(
    gov: Governance, boot: Bootstrap, token: str
) -> None:
    assert isinstance(fails(gov.call, "teams/list", token=token), BadAuthToken)


@pytest.mark.parametrize("action", ["suspend", "revoke"])
def test_a_suspended_or_revoked_token_is_a_bad_authtoken(
    world: World, action: str
) -> None:
    getattr(world.a.session, f"{action}_api_token")(world.a.api_token_id)
    error = fails(world.gov.call, "teams/list", token=world.a.api_token)
    assert isinstance(error, BadAuthToken)
    assert action[:6] in error.message


@pytest.mark.parametrize("action", ["suspend", "revoke"])
def test_a_token_changed_by_another_process_stops_working_at_once(
    tmp_path: Path, action: str
) -> None:
    # The first Governance keeps the token it authenticated while nothing changes; a change
    # committed by another connection (another process, here another store on the same file,
    # or plain SQL) is seen by the very next call.
    path = tmp_path / "governance.db"
    with Governance.open(path) as first, Governance.open(path) as second:
        boot = first.bootstrap()
        other = second.bootstrap(admin_email="other@example.com")
        for _ in range(3):
            assert first.call("teams/list", token=boot.token)["status"] == "success"
        session = second.as_account(boot.account_id, admin_user_id=boot.admin_user_id)
        getattr(session, f"{action}_api_token")(boot.token_id)
        assert isinstance(fails(first.call, "teams/list", token=boot.token), BadAuthToken)
        assert first.call("teams/list", token=other.token)["status"] == "success"
        raw = sqlite3.connect(path, isolation_level=None)
        raw.execute(
            "UPDATE api_tokens SET data = json_set(data, '$.status', 'suspended')"
            " WHERE id = ?", (other.token_id,),
        )
        raw.close()
        assert isinstance(fails(first.call, "teams/list", token=other.token), BadAuthToken)


def test_a_token_changed_by_another_postgres_process_stops_working_at_once() -> None:
    # PostgreSQL keeps its counts the same way; plain SQL is counted too.
    import psycopg

    with scratch_schema("marks") as url, Governance.open(url) as first, \
            Governance.open(url) as second:
        boot = first.bootstrap()
        other = second.bootstrap(admin_email="other@example.com")
        for _ in range(3):
            assert first.call("teams/list", token=boot.token)["status"] == "success"
        session = second.as_account(boot.account_id, admin_user_id=boot.admin_user_id)
        session.suspend_api_token(boot.token_id)
        assert isinstance(fails(first.call, "teams/list", token=boot.token), BadAuthToken)
        assert first.call("teams/list", token=other.token)["status"] == "success"
        second.as_account(other.account_id).create_team(name="Platform")
        assert first.call("teams/list", token=other.token)["status"] == "success"
        with psycopg.connect(url, autocommit=True) as raw:
            raw.execute(
                "UPDATE api_tokens SET status = 'suspended',"
                " data = (data::jsonb || '{\"status\": \"suspended\"}')::json"
                " WHERE id = %s",
                (other.token_id,),
            )
        assert isinstance(fails(first.call, "teams/list", token=other.token), BadAuthToken)


def test_writes_of_other_processes_to_other_tables_keep_the_token(tmp_path: Path) -> None:
    # Several server processes write spans all the time: that alone must not make every call
    # read its token again.
    path = tmp_path / "governance.db"
    with Governance.open(path) as first, Governance.open(path) as second:
        boot = first.bootstrap()
        for _ in range(2):  # the first call also stamps the token's last use
            first.call("teams/list", token=boot.token)
        second.as_account(boot.account_id).create_team(name="Platform")
        reads: list[str] = []
        with first.store._use() as link:  # type: ignore[attr-defined]
            link.conn.set_trace_callback(reads.append)
        first.call("teams/list", token=boot.token)
        assert not [sql for sql in reads if "FROM [api_tokens]" in sql or "FROM [accounts]" in sql]


def test_a_token_changed_in_another_thread_stops_working_at_once(tmp_path: Path) -> None:
    with Governance.open(tmp_path / "governance.db") as gov:
        boot = gov.bootstrap()
        assert gov.call("teams/list", token=boot.token)["status"] == "success"
        session = gov.as_account(boot.account_id, admin_user_id=boot.admin_user_id)
        worker = threading.Thread(target=session.suspend_api_token, args=(boot.token_id,))
        worker.start()
        worker.join()
        assert isinstance(fails(gov.call, "teams/list", token=boot.token), BadAuthToken)


def test_an_expired_token_is_a_bad_authtoken(world: World) -> None:
    clock = world.gov.clock
    assert isinstance(clock, FixedClock)
    issued = world.a.session.create_api_token(expires_at=clock.now + timedelta(hours=1))
    assert world.gov.call("teams/list", token=issued.token)["status"] == "success"
    clock.advance(timedelta(hours=1))
    error = fails(world.gov.call, "teams/list", token=issued.token)
    assert isinstance(error, BadAuthToken)
    assert "expired" in error.message


def test_a_token_of_a_deleted_account_is_a_bad_authtoken(world: World) -> None:
    world.gov.store.delete("accounts", world.b.boot.account_id)
    assert isinstance(fails(world.gov.call, "teams/list", token=world.b.api_token), BadAuthToken)


def test_token_use_stamps_last_used_at_and_the_admin_users_last_active_at(
    gov: Governance, boot: Bootstrap
) -> None:
    clock = gov.clock
    assert isinstance(clock, FixedClock)
    session = gov.as_account(boot.account_id, admin_user_id=boot.admin_user_id)
    assert session.show_admin_user(boot.admin_user_id)["last_active_at"] is None
    assert session.show_api_token(boot.token_id)["last_used_at"] is None
    first_use = clock.now
    gov.call("teams/list", token=boot.token)
    stamped = session.show_admin_user(boot.admin_user_id)["last_active_at"]
    assert stamped == session.show_api_token(boot.token_id)["last_used_at"]
    assert stamped.startswith(first_use.strftime("%Y-%m-%dT%H:%M:%S"))
    # Within a minute a use is not stamped again (one write a minute at most, not one a call).
    gov.call("teams/list", token=boot.token)
    assert session.show_api_token(boot.token_id)["last_used_at"] == stamped
    clock.advance(timedelta(minutes=1))
    gov.call("teams/list", token=boot.token)
    later = session.show_api_token(boot.token_id)["last_used_at"]
    assert later > stamped
    assert session.show_admin_user(boot.admin_user_id)["last_active_at"] == later


def test_stamping_use_does_not_undo_a_change_made_after_the_lookup(
    gov: Governance, boot: Bootstrap
) -> None:
    principal = gov.authenticate(boot.token)
    gov.call("admin_users/update", {"admin_user_id": boot.admin_user_id, "name": "Ann"},
             principal=principal)
    gov.clock.advance(timedelta(minutes=2))  # type: ignore[attr-defined]
    gov.call("teams/list", token=boot.token)
    user = gov.call("admin_users/show", {"admin_user_id": boot.admin_user_id},
                    principal=principal)["details"]
    assert user["name"] == "Ann"


def test_an_unknown_operation_is_not_found(gov: Governance, boot: Bootstrap) -> None:
    assert isinstance(fails(gov.call, "teams/explode", token=boot.token), NotFound)


# -- idempotency ---------------------------------------------------------------------------
def test_a_failed_request_is_not_stored_so_its_key_can_be_retried(world: World) -> None:
    gov, principal = world.gov, world.a.principal
    error = fails(gov.call, "teams/create", {"idempotency_key": KEY}, principal=principal)
    assert field_codes(error) == {"name": "required_value"}
    made = gov.call("teams/create", {"idempotency_key": KEY, "name": "Ops"}, principal=principal)
    assert made["details"]["name"] == "Ops"


@pytest.mark.parametrize(
    "where",
    [
        lambda key: ({"name": "Ops", "idempotency_key": key}, ()),
        lambda key: ({"details": {"name": "Ops", "idempotency_key": key}}, ()),
        lambda key: ({"details": {"name": "Ops"}}, (key,)),
        lambda key: ({"name": "Ops", "idempotency_key": key}, (key, key)),
    ],
    ids=["body", "details", "header", "all-agree"],
)
def test_a_key_is_read_from_body_details_or_header(world: World, where: Any) -> None:
    gov, principal = world.gov, world.a.principal
    params, extra = where(KEY)
    first = gov.call("teams/create", params, principal=principal, idempotency_keys=extra)
    # The same request in another envelope form is the same request.
    again = gov.call(
        "teams/create", {"name": "Ops"}, principal=principal, idempotency_keys=[KEY]
    )
    assert canonical(again) == canonical(first)
    assert world.a.session.list_teams()["pagination"]["item_count"] == 2


@pytest.mark.parametrize(
    ("params", "extra"),
    [
        ({"name": "Ops", "idempotency_key": "key-one-0001"}, ("key-two-0002",)),
        ({"idempotency_key": "key-one-0001", "details": {"name": "Ops",
                                                         "idempotency_key": "key-two-0002"}}, ()),
        ({"name": "Ops", "idempotency_key": 12345678}, ()),
        ({"name": "Ops", "idempotency_key": "short"}, ()),
        ({"name": "Ops", "idempotency_key": "k" * 129}, ()),
    ],
    ids=["body-vs-header", "body-vs-details", "not-a-string", "7-chars", "129-chars"],
)
def test_a_bad_or_disagreeing_key_names_idempotency_key(
    world: World, params: dict[str, Any], extra: tuple[str, ...]
) -> None:
    error = fails(world.gov.call, "teams/create", params, principal=world.a.principal,
                  idempotency_keys=extra)
    assert isinstance(error, ValidationErrors)
    assert field_codes(error) == {"idempotency_key": "invalid_value"}


@pytest.mark.parametrize("length", [8, 128])
def test_keys_of_8_and_128_characters_are_accepted(world: World, length: int) -> None:
    params = {"name": "Ops", "idempotency_key": "k" * length}
    first = world.gov.call("teams/create", params, principal=world.a.principal)
    assert world.gov.call("teams/create", params, principal=world.a.principal) == first


def test_keys_are_scoped_by_account_and_operation(world: World) -> None:
    gov = world.gov
    mine = gov.call("teams/create", {"name": "Ops", "idempotency_key": KEY},
                    principal=world.a.principal)
    theirs = gov.call("teams/create", {"name": "Ops", "idempotency_key": KEY},
                      principal=world.b.principal)
    assert theirs["details"]["id"] != mine["details"]["id"]
    other_op = gov.call("environments/create", {"name": "Ops", "idempotency_key": KEY},
                        principal=world.a.principal)
    assert other_op["details"]["type"] == "environment"


def test_a_key_reused_with_another_request_is_refused(world: World) -> None:
    gov, principal = world.gov, world.a.principal
    gov.call("teams/create", {"name": "Ops", "idempotency_key": KEY}, principal=principal)
    error = fails(gov.call, "teams/create", {"name": "Dev", "idempotency_key": KEY},
                  principal=principal)
    assert isinstance(error, IdempotencyKeyAlreadyUsed)


def test_a_key_stored_with_the_earlier_fingerprint_still_replays(world: World) -> None:
    # Keys stored before fingerprints were versioned hold the digest of the sorted JSON of
    # [operation, members] written by the standard library.
    gov, principal = world.gov, world.a.principal
    params = {"name": "Opérations", "idempotency_key": KEY}
    first = gov.call("teams/create", params, principal=principal)
    (stored,) = gov.store.query("idempotency_keys")
    legacy = hashlib.sha256(json.dumps(
        ["teams/create", {"name": "Opérations"}], sort_keys=True, separators=(",", ":"),
        default=str,
    ).encode()).hexdigest()
    gov.store.put("idempotency_keys", {**stored, "fingerprint": legacy})
    assert gov.call("teams/create", params, principal=principal) == first
    error = fails(gov.call, "teams/create", {**params, "name": "Dev"}, principal=principal)
    assert isinstance(error, IdempotencyKeyAlreadyUsed)


def test_fingerprints_ignore_member_order_and_envelope_and_survive_odd_values() -> None:
    same = fingerprint("op", {"b": 1, "a": {"y": [1, 2], "x": None}})
    assert same == fingerprint("op", {"details": {"a": {"x": None, "y": [1, 2]}, "b": 1}})
    assert same.startswith("2:") and same != fingerprint("other", {"b": 1, "a": {}})
    for odd in ({1: "int key"}, {"text": "\ud800"}, {"n": float("nan")}, {"o": Decimal(1)}):
        assert fingerprint("op", odd) == fingerprint("op", dict(odd))


def test_a_replayed_token_create_withholds_the_secret(world: World) -> None:
    gov, principal = world.gov, world.a.principal
    first = gov.call("api_tokens/create", {"idempotency_key": KEY}, principal=principal)
    assert first["token"].startswith("pf_")
    again = gov.call("api_tokens/create", {"idempotency_key": KEY}, principal=principal)
    assert again["token"] is None
    assert again["details"] == first["details"]
    stored = gov.store.query("idempotency_keys")
    assert all(first["token"] not in canonical(record) for record in stored)


def test_a_replayed_invite_create_withholds_the_token_and_its_url(world: World) -> None:
    gov, principal = world.gov, world.a.principal
    params = {"email": "joe@acme.test", "idempotency_key": KEY}
    first = gov.call("admin_user_invites/create", params, principal=principal)["details"]
    again = gov.call("admin_user_invites/create", params, principal=principal)["details"]
    assert first["token"] in first["invite_url"]
    assert again["token"] is None
    assert again["invite_url"] == first["invite_url"].split("?")[0]
    assert {k: v for k, v in again.items() if k not in ("token", "invite_url")} == {
        k: v for k, v in first.items() if k not in ("token", "invite_url")
    }


# -- bulk ----------------------------------------------------------------------------------
def _item(kind: str, key: str, **members: Any) -> dict[str, Any]:
    return {"_type": kind, "idempotency_key": key, **members}


def test_bulk_runs_items_in_order_and_stops_at_the_first_error(world: World) -> None:
    items = [
        _item("teams/create", "item-0001", name="One"),
        _item("teams/create", "item-0002", details={"name": "Two"}),
        _item("teams/show", "item-0003", team_id="0" * 32),
        _item("teams/create", "item-0004", name="Never"),
    ]
    out = world.gov.call("bulk", {"items": items}, principal=world.a.principal)
    assert out["status"] == "success"
    assert list(out["outputs"]) == ["item-0001", "item-0002", "item-0003"]
    assert out["outputs"]["item-0002"]["details"]["name"] == "Two"
    assert out["outputs"]["item-0003"] == {
        "status": "error", "code": "not_found", "message": "team not found",
    }
    names = {s["name"] for s in world.a.session.list_teams()["summaries"]}
    assert names == {"Core", "One", "Two"}


def test_a_bulk_item_error_carries_its_field_errors(world: World) -> None:
    out = world.gov.call("bulk", {"items": [_item("people/create", "item-0001", name="Al")]},
                         principal=world.a.principal)
    error = out["outputs"]["item-0001"]
    assert error["code"] == "validation_errors"
    assert error["errors"]["email"]["code"] == "required_value"


def test_resending_a_bulk_request_replays_done_items_and_runs_the_rest(world: World) -> None:
    gov, principal = world.gov, world.a.principal
    items = [
        _item("teams/create", "item-0001", name="One"),
        _item("people/create", "item-0002", name="Al"),
        _item("teams/create", "item-0003", name="Three"),
    ]
    first = gov.call("bulk", {"items": items}, principal=principal)
    assert first["outputs"]["item-0002"]["code"] == "validation_errors"
    assert "item-0003" not in first["outputs"]
    # The failed item was not stored, so the corrected item may reuse its key.
    items[1] = {**items[1], "email": "al@acme.test", "team_ids": [world.a.team_id]}
    second = gov.call("bulk", {"items": items}, principal=principal)
    assert second["outputs"]["item-0001"] == first["outputs"]["item-0001"]
    assert second["outputs"]["item-0002"]["details"]["team_ids"] == [world.a.team_id]
    assert second["outputs"]["item-0003"]["details"]["name"] == "Three"
    names = sorted(s["name"] for s in world.a.session.list_teams()["summaries"])
    assert names == ["Core", "One", "Three"]


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({}, {"items": "required_value"}),
        ({"items": "x"}, {"items": "invalid_value"}),
        ({"items": []}, {"items": "invalid_value"}),
        ({"items": [_item("teams/list", f"key-{i:05d}") for i in range(1001)]},
         {"items": "invalid_value"}),
        ({"items": [_item("teams/list", "same-key-1"), _item("teams/list", "same-key-1")]},
         {"items": {"1": {"idempotency_key": "invalid_value"}}}),
        ({"items": [{"_type": "teams/list"}]},
         {"items": {"0": {"idempotency_key": "required_value"}}}),
        ({"items": [_item("teams/list", "short")]},
         {"items": {"0": {"idempotency_key": "invalid_value"}}}),
        ({"items": [_item("bulk", "item-0001")]}, {"items": {"0": {"_type": "invalid_value"}}}),
        ({"items": [{"idempotency_key": "item-0001"}]},
         {"items": {"0": {"_type": "required_value"}}}),
    ],
    ids=["missing", "not-a-list", "empty", "1001-items", "duplicate-keys", "no-key",
         "short-key", "nested-bulk", "no-type"],
)
def test_a_bad_bulk_request_is_refused_whole(
    world: World, params: dict[str, Any], expected: Any
) -> None:
    before = world.a.session.list_teams()["pagination"]["item_count"]
    error = fails(world.gov.call, "bulk", params, principal=world.a.principal)
    assert field_codes(error) == expected
    assert world.a.session.list_teams()["pagination"]["item_count"] == before


def test_a_bulk_request_of_1000_items_runs(world: World) -> None:
    items = [_item("teams/show", f"key-{i:05d}", team_id=world.a.team_id) for i in range(1000)]
    out = world.gov.call("bulk", {"items": items}, principal=world.a.principal)
    assert len(out["outputs"]) == 1000


def test_bulk_needs_a_token(world: World) -> None:
    items = [_item("teams/list", "item-0001")]
    assert isinstance(fails(world.gov.call, "bulk", {"items": items}), NotAuthenticated)
    out = world.gov.call("bulk", {"items": items}, token=world.a.api_token)
    assert out["outputs"]["item-0001"]["status"] == "success"


# -- embedding -----------------------------------------------------------------------------
def test_as_account_of_an_unknown_account_is_not_found(gov: Governance) -> None:
    assert isinstance(fails(gov.as_account, "0" * 32), NotFound)


def test_the_typed_methods_send_only_what_is_passed(world: World) -> None:
    session = world.a.session
    person = session.update_person(world.a.person_id, title="Lead")
    assert person["title"] == "Lead"
    assert person["team_ids"] == [world.a.team_id]
    cleared = session.update_person(world.a.person_id, title=None, team_ids=[])
    assert cleared["title"] is None
    assert cleared["team_ids"] == []
    listed = session.list_people(sorting="-email", page_size=1, offset=0)
    assert listed["sorting"] == {"field": "email", "direction": "desc", "nulls": "auto"}
    assert listed["pagination"]["page_size"] == 1
