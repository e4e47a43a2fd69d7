"""The encryption key as an operator meets it: made by init and serve, rekey, rotate, refusals.

A key is never printed (but by ``keys new``, and by ``init`` for a store with no file beside
it); a key file is mode 0600; a sensitive value never reaches the database file in plain.
"""

from __future__ import annotations

import base64
import builtins
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from governance_core.context import Config
from governance_core.domain.sensitive_values import rekey as core_rekey
from governance_core.encryption import (
    FernetCipher,
    NoKeyCipher,
    PlaintextForTests,
    generate_key,
    read_key_file,
)
from governance_core.errors import InvalidValue, UnexpectedError
from governance_core.service import Governance
from governance_http import serving
from governance_http.cli import keys
from governance_http.settings import (
    ENCRYPTION_KEY_FILE_VARIABLE,
    ENCRYPTION_KEY_VARIABLE,
    encryption_key,
    open_governance,
)
from tests.http.extras import limited_to
from tests.http.server import Served, free_port
from tests.http.support import run

PLAYGROUND_SECRET = "QQ123456C"
"""A sensitive value the playground run records (an applicant's national id)."""

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _no_key_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENCRYPTION_KEY_VARIABLE, raising=False)
    monkeypatch.delenv(ENCRYPTION_KEY_FILE_VARIABLE, raising=False)


@pytest.fixture
def not_serving(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """``governance serve`` does everything but start the server; the stores it would serve."""
    served: list[str] = []
    monkeypatch.setattr(serving, "serve", lambda db, **options: served.append(str(db)))
    return served


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def _readable(db: Path) -> bytes:
    """What whoever reads the database file reads: its bytes, and the stored values decoded."""
    with sqlite3.connect(db) as raw:
        raw.execute("VACUUM")  # freed pages may still hold old bytes; the test reads the file
        stored = [json.loads(data)["ciphertext"]
                  for (data,) in raw.execute("SELECT data FROM sensitive_values")]
    files = b"".join(p.read_bytes() for p in db.parent.iterdir() if p.name.startswith(db.name))
    return files + b"".join(base64.b64decode(text) for text in stored)


def _record_playground(gov: Governance) -> str:
    """Record the playground run (it holds sensitive values) into the store's only account."""
    [account] = gov.store.query("accounts")
    session = gov.as_account(account["id"])
    agent = session.call("playground/create_loan_application_review_agent")["agent"]
    run_id: str = session.details(
        "playground/register_loan_application_review_agent_instance", {"agent_id": agent["id"]}
    )["id"]
    session.call("playground/record_loan_application_review_spans",
                 {"agent_instance_id": run_id})
    return run_id


def _revealed(gov: Governance) -> list[Any]:
    """Every sensitive value of the store, read back through single-span reads."""
    found = []
    for account in gov.store.query("accounts"):
        session = gov.as_account(account["id"])
        for span in gov.store.query("agent_spans"):
            shown = session.details("agent_spans/show", agent_span_id=span["id"])
            found.append(json.dumps(shown["payload"]))
    return found


def _old_store(db: Path) -> None:
    """A store as earlier versions left it without a key: sensitive values in plain."""
    with Governance.open(db, config=Config(cipher=PlaintextForTests())) as gov:
        gov.bootstrap()
        _record_playground(gov)
    assert PLAYGROUND_SECRET.encode() in _readable(db)


# -- init and serve make the key of a SQLite store ----------------------------------------------
def test_init_makes_a_0600_key_file_beside_the_store_and_never_prints_the_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.db"
    status, out, _ = run(capsys, "init", "--db", str(db))
    assert status == 0
    key_file = tmp_path / "g.db.key"
    assert _mode(key_file) == 0o600
    key = read_key_file(key_file)
    assert key not in out
    assert f"{'key file (mode 0600):':30} {key_file}" in out.splitlines()

    assert run(capsys, "demo", "--db", str(db))[0] == 0
    with open_governance(db) as gov:
        assert isinstance(gov.config.cipher, FernetCipher)
        assert any(PLAYGROUND_SECRET in value for value in _revealed(gov))
    assert PLAYGROUND_SECRET.encode() not in _readable(db)


def test_serve_makes_the_key_before_serving_and_prints_no_secret(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], not_serving: list[str]
) -> None:
    db = tmp_path / "new.db"
    status, out, _ = run(capsys, "serve", "--db", str(db), "--port", str(free_port()))
    assert status == 0 and not_serving == [str(db)]
    key_file = tmp_path / "new.db.key"
    assert _mode(key_file) == 0o600
    assert read_key_file(key_file) not in out
    assert f"encryption key: made {key_file} (mode 0600)" in out
    assert "rekey" not in out

    key = read_key_file(key_file)
    status, out, _ = run(capsys, "serve", "--db", str(db), "--port", str(free_port()))
    assert status == 0 and "encryption key" not in out
    assert read_key_file(key_file) == key


@pytest.mark.slow
def test_a_served_store_keeps_sensitive_values_encrypted_end_to_end(tmp_path: Path) -> None:
    db = tmp_path / "served.db"
    server = Served(db)
    try:
        server.wait_ready()
        [line] = [text for text in server.output_until("token (shown once")
                  if "token (shown once" in text]
        token = line.split()[-1]
        status, agent = server.request(
            "/playground/create_loan_application_review_agent", token, method="POST", body={})
        assert status == 200, agent
        status, run = server.request(
            "/playground/register_loan_application_review_agent_instance", token,
            method="POST", body={"agent_id": agent["agent"]["id"]})
        assert status == 200, run
        status, done = server.request(
            "/playground/record_loan_application_review_spans", token, method="POST",
            body={"agent_instance_id": run["details"]["id"]})
        assert status == 200, done
        revealed = [server.request(f"/agent_spans/{span_id}", token)[1]["details"]["payload"]
                    for span_id in done["ids"]]
        assert PLAYGROUND_SECRET in json.dumps(revealed)
    finally:
        server.stop()
    assert _mode(tmp_path / "served.db.key") == 0o600
    assert read_key_file(tmp_path / "served.db.key") not in "".join(server.lines.queue)
    assert PLAYGROUND_SECRET.encode() not in _readable(db)


def test_serve_on_an_old_store_makes_its_key_and_says_to_rekey(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], not_serving: list[str]
) -> None:
    db = tmp_path / "old.db"
    _old_store(db)
    status, out, _ = run(capsys, "serve", "--db", str(db), "--port", str(free_port()))
    assert status == 0
    with Governance.open(db) as gov:
        values = gov.store.count("sensitive_values")
    assert values > 0
    assert (f"{values} record(s) of sensitive values and 0 webhook destination(s) were stored "
            f"before this key: encrypt them with `governance keys rekey --db {db}`") in out


def test_the_http_extra_alone_makes_a_key_as_the_readme_install_does(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "governance_http", "init", "--db", "governance.db", "--json"],
        env=limited_to(tmp_path, "http"), cwd=tmp_path, capture_output=True, text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["encryption_key_file"] == "governance.db.key"
    assert _mode(tmp_path / "governance.db.key") == 0o600


# -- PostgreSQL: no file beside the store --------------------------------------------------------
def test_serve_on_postgres_without_a_key_refuses_saying_how(
    capsys: pytest.CaptureFixture[str], not_serving: list[str]
) -> None:
    url = "postgresql://gov:s3cret@127.0.0.1:1/gov"
    status, out, err = run(capsys, "serve", "--db", url, "--port", str(free_port()))
    assert (status, out, not_serving) == (1, "", [])
    assert err == (
        "error: the store postgresql://gov:***@127.0.0.1:1/gov keeps sensitive values "
        "encrypted and has no encryption key: set GOVERNANCE_ENCRYPTION_KEY to a key made by "
        "`governance keys new` (keep it in your secret store), or "
        "GOVERNANCE_ENCRYPTION_KEY_FILE to the path of a file holding it (mode 0600)\n"
    )


def test_a_named_key_file_that_does_not_exist_is_an_error_naming_the_variable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    not_serving: list[str],
) -> None:
    missing = tmp_path / "nowhere.key"
    monkeypatch.setenv(ENCRYPTION_KEY_FILE_VARIABLE, str(missing))
    status, _, err = run(capsys, "serve", "--db", str(tmp_path / "g.db"),
                         "--port", str(free_port()))
    assert (status, not_serving) == (1, [])
    assert err == f"error: {ENCRYPTION_KEY_FILE_VARIABLE} names {missing}, which does not exist\n"
    assert not missing.exists()


def test_init_on_postgres_prints_a_key_once_and_serve_then_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, not_serving: list[str]
) -> None:
    if not os.environ.get("GOVERNANCE_TEST_POSTGRES_URL"):
        pytest.skip("set GOVERNANCE_TEST_POSTGRES_URL to run it on PostgreSQL")
    from tests.stores import scratch_schema

    with scratch_schema("keys") as url:
        status, out, _ = run(capsys, "init", "--db", url, "--json")
        assert status == 0
        key = json.loads(out)["encryption_key"]
        FernetCipher(key)
        monkeypatch.setenv(ENCRYPTION_KEY_VARIABLE, key)
        status, out, _ = run(capsys, "serve", "--db", url, "--port", str(free_port()))
        assert (status, not_serving) == (0, [url])
        assert key not in out


# -- where the key comes from --------------------------------------------------------------------
def test_the_variable_wins_then_the_named_file_then_the_file_beside_the_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "g.db"
    assert encryption_key(db) is None
    assert encryption_key("postgresql://gov@127.0.0.1/gov") is None
    beside, named, variable = generate_key(), generate_key(), generate_key()
    (tmp_path / "g.db.key").write_text(beside + "\n")
    assert encryption_key(db) == beside
    (tmp_path / "named.key").write_text(named + "\n")
    monkeypatch.setenv(ENCRYPTION_KEY_FILE_VARIABLE, str(tmp_path / "named.key"))
    assert encryption_key(db) == named
    assert encryption_key("postgresql://gov@127.0.0.1/gov") == named
    monkeypatch.setenv(ENCRYPTION_KEY_VARIABLE, variable)
    assert encryption_key(db) == variable


def test_a_bad_key_is_an_error_naming_where_it_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "g.db"
    (tmp_path / "g.db.key").write_text("not-a-key\n")
    with pytest.raises(InvalidValue, match=f"^the key file {db}.key: the encryption key is not"):
        open_governance(db)
    monkeypatch.setenv(ENCRYPTION_KEY_VARIABLE, "still-not-a-key")
    with pytest.raises(InvalidValue, match=f"^{ENCRYPTION_KEY_VARIABLE}: the encryption key"):
        open_governance(db)


def test_without_any_key_open_governance_refuses_to_store_a_sensitive_value(
    tmp_path: Path,
) -> None:
    with open_governance(tmp_path / "g.db") as gov:
        assert isinstance(gov.config.cipher, NoKeyCipher)
        gov.bootstrap()
        with pytest.raises(UnexpectedError, match="no encryption key is configured"):
            _record_playground(gov)
    assert PLAYGROUND_SECRET.encode() not in _readable(tmp_path / "g.db")


# -- rekey and rotation --------------------------------------------------------------------------
def test_keys_rekey_encrypts_an_old_store_and_a_second_run_rewrites_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "old.db"
    _old_store(db)
    with Governance.open(db) as gov:
        values = gov.store.count("sensitive_values")
    status, out, _ = run(capsys, "keys", "rekey", "--db", str(db), "--batch-size", "2")
    assert status == 0
    key_file = tmp_path / "old.db.key"
    assert _mode(key_file) == 0o600 and read_key_file(key_file) not in out
    assert out.splitlines() == [
        f"encryption key: made {key_file} (mode 0600); back it up with the store: without it "
        "the sensitive values cannot be read",
        f"sensitive values: {values} of {values} record(s) encrypted again under the first key",
        "webhook secrets: 0 of 0 destination(s) encrypted again under the first key",
    ]
    assert PLAYGROUND_SECRET.encode() not in _readable(db)
    status, out, _ = run(capsys, "keys", "rekey", "--db", str(db), "--json")
    assert status == 0
    assert json.loads(out) == {"values_read": values, "values_rewritten": 0,
                               "destinations_read": 0, "destinations_rewritten": 0,
                               "dropped_old_keys": None}
    with open_governance(db) as gov:
        assert any(PLAYGROUND_SECRET in value for value in _revealed(gov))


def test_rotate_then_rekey_leaves_only_the_new_key_and_every_value_readable(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "g.db"
    key_file = tmp_path / "g.db.key"
    assert run(capsys, "init", "--db", str(db))[0] == 0
    assert run(capsys, "demo", "--db", str(db))[0] == 0
    old = read_key_file(key_file)

    status, out, _ = run(capsys, "keys", "rotate", "--db", str(db))
    assert status == 0
    new, kept = read_key_file(key_file).split(",")
    assert kept == old and new != old and _mode(key_file) == 0o600
    assert new not in out and old not in out
    assert f"`governance keys rekey --db {db} --drop-old-keys`" in out
    with open_governance(db) as gov:
        assert any(PLAYGROUND_SECRET in value for value in _revealed(gov))
        _record_playground(gov)  # written under the new key, read with both

    status, out, _ = run(capsys, "keys", "rekey", "--db", str(db), "--drop-old-keys")
    assert status == 0
    assert out.splitlines()[-1] == f"{key_file} now holds only the first key"
    assert read_key_file(key_file) == new and _mode(key_file) == 0o600
    with open_governance(db) as gov:
        revealed = _revealed(gov)
        assert sum(PLAYGROUND_SECRET in value for value in revealed) >= 2
        count = gov.store.count("sensitive_values")
    with Governance.open(db, encryption_key=old) as stale, \
            pytest.raises(UnexpectedError, match="cannot be decrypted"):
        _revealed(stale)
    assert count > 0


def test_drop_old_keys_is_refused_while_a_server_writes_under_an_old_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "g.db"
    assert run(capsys, "init", "--db", str(db))[0] == 0
    old = read_key_file(tmp_path / "g.db.key")
    assert run(capsys, "keys", "rotate", "--db", str(db))[0] == 0
    passes: list[int] = []

    def rekey_while_a_stale_server_writes(store: Any, cipher: FernetCipher, **options: Any) -> Any:
        done = core_rekey(store, cipher, **options)
        if not passes:
            with Governance.open(db, encryption_key=old) as stale_server:
                _record_playground(stale_server)
        passes.append(1)
        return done

    monkeypatch.setattr(keys, "rekey", rekey_while_a_stale_server_writes)
    status, _, err = run(capsys, "keys", "rekey", "--db", str(db), "--drop-old-keys")
    assert status == 1
    assert "a server still runs without the new key" in err
    assert len(read_key_file(tmp_path / "g.db.key").split(",")) == 2


def test_rotate_refuses_keys_from_the_variable_and_stores_without_a_key_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "g.db"
    status, _, err = run(capsys, "keys", "rotate", "--db", str(db))
    assert status == 1
    assert err == (f"error: no key file at {db}.key: `governance serve` or `governance init` "
                   "makes one\n")
    monkeypatch.setenv(ENCRYPTION_KEY_VARIABLE, generate_key())
    status, _, err = run(capsys, "keys", "rotate", "--db", str(db))
    assert status == 1
    assert err.startswith(f"error: the key comes from {ENCRYPTION_KEY_VARIABLE}: put a new key")
    assert not (tmp_path / "g.db.key").exists()


def test_keys_new_prints_one_new_key_and_nothing_else(capsys: pytest.CaptureFixture[str]) -> None:
    status, out, _ = run(capsys, "keys", "new")
    status_again, again, _ = run(capsys, "keys", "new")
    assert (status, status_again) == (0, 0)
    assert len(out.splitlines()) == 1 and out != again
    assert FernetCipher(out.strip()).key_count == 1


def test_docs_name_every_keys_command() -> None:
    serving_doc = (ROOT / "docs" / "serving.md").read_text()
    for command in ("governance keys new", "governance keys rotate", "governance keys rekey",
                    "--drop-old-keys", "--batch-size", ENCRYPTION_KEY_FILE_VARIABLE):
        assert command in serving_doc, command


def test_a_key_where_cryptography_is_not_installed_names_the_extra(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = tmp_path / "g.db"
    assert run(capsys, "init", "--db", str(db))[0] == 0
    real_import = builtins.__import__

    def no_cryptography(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("cryptography"):
            raise ImportError("No module named 'cryptography'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cryptography)
    status, _, err = run(capsys, "accounts", "list", "--db", str(db), "--json")
    assert status == 1
    assert err.startswith(f"error: unexpected: the key file {db}.key: encryption of sensitive "
                          "values needs the 'cryptography' package: install "
                          "agent-runs-governance[encryption]")
