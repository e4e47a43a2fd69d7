"""Keys for sensitive values: none means refusal, plain values from before are rekeyed, rotation.

A store's sensitive values (and webhook secrets) must never be readable by whoever reads the
database file: without a key storing one is refused, values stored in plain by earlier
versions are encrypted by :func:`rekey`, and a new key is rotated in without losing a value.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.context import Config
from governance_core.domain.sensitive_values import Rekeyed, rekey
from governance_core.encryption import (
    EncryptionKeyMissing,
    FernetCipher,
    NoKeyCipher,
    PlaintextForTests,
    generate_key,
    is_encrypted,
    read_key_file,
    write_key_file,
)
from governance_core.errors import InvalidValue, UnexpectedError
from governance_core.ids import SeededIds
from governance_core.notifications.secrets import active_secrets
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from governance_core.testing import make_governance
from tests.core.insight_world import insight_world
from tests.core.runs import account_caller
from tests.core.test_sensitive_values import PAYLOAD, SSN, write_sensitive_run

RESULT_SECRET = "result-secret-77"
LOOPBACK = ("127.0.0.1/32",)


@pytest.fixture
def keys() -> tuple[str, str]:
    return generate_key(), generate_key()


def _open(location: str | Path, cipher: Any) -> Governance:
    config = Config(cipher=cipher, webhook_allowed_networks=LOOPBACK)
    return Governance.open(location, config=config, clock=FixedClock(), ids=SeededIds(5))


def _file_bytes(folder: Path) -> bytes:
    return b"".join(path.read_bytes() for path in folder.iterdir() if path.is_file())


def _tokens(path: Path) -> list[bytes]:
    with sqlite3.connect(path) as db:
        rows = [json.loads(data) for (data,) in db.execute("SELECT data FROM sensitive_values")]
    return [base64.b64decode(row["ciphertext"]) for row in rows]


def _written(location: str | Path, cipher: Any) -> tuple[str, str, str]:
    """A run with a sensitive span (payload and result) and alert; (account, span, token)."""
    gov = _open(location, cipher)
    try:
        boot = gov.bootstrap()
        world = insight_world(gov, boot)
        span_id = write_sensitive_run(world)
    finally:
        gov.close()
    return boot.account_id, span_id, boot.token


def _shown(location: str | Path, cipher: Any, account_id: str, span_id: str) -> dict[str, Any]:
    gov = _open(location, cipher)
    try:
        shown: dict[str, Any] = gov.as_account(account_id).details(
            "agent_spans/show", agent_span_id=span_id)
    finally:
        gov.close()
    return shown


# -- no key: refused, with how ----------------------------------------------------------------
def test_without_a_key_a_sensitive_value_is_refused_and_nothing_is_written(
    tmp_path: Path,
) -> None:
    path = tmp_path / "store.db"
    gov = Governance.open(path, clock=FixedClock(), ids=SeededIds(5))
    assert isinstance(gov.config.cipher, NoKeyCipher)
    try:
        world = insight_world(gov, gov.bootstrap())
        with pytest.raises(EncryptionKeyMissing) as refused:
            world.span("read_pii", payload=PAYLOAD, sensitive_encoding=True)
        assert refused.value.code == "unexpected"
        for how in ("encryption_key=", "generate_key()", "GOVERNANCE_ENCRYPTION_KEY",
                    "PlaintextForTests()"):
            assert how in refused.value.message
        assert gov.store.count("sensitive_values") == 0
        assert gov.store.count("agent_spans") == 0
    finally:
        gov.close()
    assert SSN.encode() not in _file_bytes(tmp_path)


def test_without_a_key_an_encrypted_value_is_not_read_and_a_plain_one_is(
    tmp_path: Path, keys: tuple[str, str]
) -> None:
    encrypted, plain = tmp_path / "encrypted.db", tmp_path / "plain.db"
    account, span_id, _ = _written(encrypted, FernetCipher(keys[0]))
    with pytest.raises(EncryptionKeyMissing, match="encrypted and no encryption key"):
        _shown(encrypted, NoKeyCipher(), account, span_id)
    account, span_id, _ = _written(plain, PlaintextForTests())
    assert _shown(plain, NoKeyCipher(), account, span_id)["payload"] == PAYLOAD


def test_plaintext_is_a_choice_tests_make_and_make_governance_makes_it() -> None:
    gov, _ = make_governance()
    assert isinstance(gov.config.cipher, PlaintextForTests)
    assert isinstance(Governance(MemoryStore()).config.cipher, NoKeyCipher)
    keyed, _ = make_governance(cipher=NoKeyCipher())
    assert isinstance(keyed.config.cipher, NoKeyCipher)


# -- values stored in plain before a key ------------------------------------------------------
def test_plain_values_from_before_are_read_with_a_key_and_rekey_encrypts_them(
    tmp_path: Path, keys: tuple[str, str]
) -> None:
    path = tmp_path / "old.db"
    # The bytes earlier versions stored without a key: base64 of the JSON, no encryption.
    account, span_id, _ = _written(path, PlaintextForTests())
    tokens = _tokens(path)
    assert not any(is_encrypted(token) for token in tokens)
    assert SSN.encode() in b"".join(tokens)
    cipher = FernetCipher(keys[0])
    assert _shown(path, cipher, account, span_id)["payload"] == PAYLOAD

    gov = _open(path, cipher)
    try:
        assert rekey(gov.store, cipher) == Rekeyed(values_read=2, values_rewritten=2)
        assert rekey(gov.store, cipher) == Rekeyed(values_read=2, values_rewritten=0)
    finally:
        gov.close()
    assert all(cipher.is_current(token) for token in _tokens(path))
    with sqlite3.connect(path) as db:
        db.execute("VACUUM")  # freed pages may still hold the old bytes; the test reads the file
    content = _file_bytes(tmp_path)
    assert SSN.encode() not in content and RESULT_SECRET.encode() not in content
    shown = _shown(path, FernetCipher(keys[0]), account, span_id)
    assert shown["payload"] == PAYLOAD
    assert shown["result_payload"]["secret"]["value"] == RESULT_SECRET


def test_an_interrupted_rekey_keeps_its_finished_batches_and_a_second_run_ends_it(
    tmp_path: Path, keys: tuple[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "old.db"
    _written(path, PlaintextForTests())
    cipher = FernetCipher(keys[0])
    gov = _open(path, cipher)
    try:
        real_put, puts = gov.store.put, []

        def put_then_fail(table: str, record: dict[str, Any]) -> None:
            puts.append(record["id"])
            if len(puts) == 2:
                raise OSError("the disk went away")
            real_put(table, record)

        monkeypatch.setattr(gov.store, "put", put_then_fail)
        with pytest.raises(OSError, match="disk"):
            rekey(gov.store, cipher, batch_size=1)
        monkeypatch.undo()
        # The first batch was committed; the second rolled back whole.
        assert sorted(cipher.is_current(token) for token in _tokens(path)) == [False, True]
        assert rekey(gov.store, cipher, batch_size=1) == Rekeyed(2, 1)
    finally:
        gov.close()
    assert all(cipher.is_current(token) for token in _tokens(path))


def test_rekey_refuses_a_batch_size_below_one(keys: tuple[str, str]) -> None:
    with pytest.raises(InvalidValue, match="batch_size"):
        rekey(MemoryStore(), FernetCipher(keys[0]), batch_size=0)


# -- rotation ----------------------------------------------------------------------------------
def _rotate_and_check(location: str, keys: tuple[str, str]) -> None:
    old, new = keys
    account, span_id, _ = _written(location, FernetCipher(old))
    both = FernetCipher(f"{new},{old}")
    assert _shown(location, both, account, span_id)["payload"] == PAYLOAD
    with pytest.raises(UnexpectedError, match="cannot be decrypted"):
        _shown(location, FernetCipher(new), account, span_id)
    gov = _open(location, both)
    try:
        assert rekey(gov.store, both, batch_size=1) == Rekeyed(values_read=2, values_rewritten=2)
        assert rekey(gov.store, both).values_rewritten == 0
    finally:
        gov.close()
    shown = _shown(location, FernetCipher(new), account, span_id)
    assert shown["payload"] == PAYLOAD
    assert shown["result_payload"]["secret"]["value"] == RESULT_SECRET
    with pytest.raises(UnexpectedError, match="cannot be decrypted"):
        _shown(location, FernetCipher(old), account, span_id)


def test_rotation_on_sqlite_reads_with_both_keys_then_the_new_one_alone(
    tmp_path: Path, keys: tuple[str, str]
) -> None:
    _rotate_and_check(str(tmp_path / "rotated.db"), keys)


def test_rotation_on_postgres(keys: tuple[str, str]) -> None:
    if not os.environ.get("GOVERNANCE_TEST_POSTGRES_URL"):
        pytest.skip("set GOVERNANCE_TEST_POSTGRES_URL to run it on PostgreSQL")
    from tests.stores import scratch_schema

    with scratch_schema("rekey") as url:
        _rotate_and_check(url, keys)


# -- webhook secrets -------------------------------------------------------------------------
def test_webhook_secrets_kept_in_plain_are_encrypted_by_rekey(
    tmp_path: Path, keys: tuple[str, str]
) -> None:
    path = tmp_path / "hooks.db"
    gov = _open(path, NoKeyCipher())
    try:
        caller = account_caller(gov, gov.bootstrap())
        made = caller.call("destinations/create", name="hook", url="http://127.0.0.1:9/hook")
        secret, destination_id = made["secret"], made["details"]["id"]
        [entry] = gov.store.get("destinations", destination_id)["secrets"]  # type: ignore[index]
        assert entry["value"] == secret
        cipher = FernetCipher(keys[0])
        done = rekey(gov.store, cipher)
        assert (done.destinations_read, done.destinations_rewritten) == (1, 1)
        assert rekey(gov.store, cipher).destinations_rewritten == 0
        stored = gov.store.get("destinations", destination_id)["secrets"]  # type: ignore[index]
    finally:
        gov.close()
    [entry] = stored
    assert entry["sealed"] is True and secret not in entry["value"]
    assert cipher.is_current(entry["value"].encode("ascii"))
    assert active_secrets(stored, cipher, FixedClock()()) == [secret]
    with sqlite3.connect(path) as db:
        db.execute("VACUUM")  # freed pages may still hold the old bytes; the test reads the file
    assert secret.encode() not in _file_bytes(tmp_path)


# -- key files ---------------------------------------------------------------------------------
@pytest.fixture
def open_umask() -> Iterator[None]:
    previous = os.umask(0)
    yield
    os.umask(previous)


def test_a_key_file_is_written_0600_whole_and_never_overwritten_by_accident(
    tmp_path: Path, keys: tuple[str, str], open_umask: None
) -> None:
    path = tmp_path / "store.db.key"
    write_key_file(path, [keys[0]])
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_key_file(path) == keys[0]
    with pytest.raises(FileExistsError):
        write_key_file(path, [keys[1]])
    assert read_key_file(path) == keys[0]
    write_key_file(path, [keys[1], keys[0]], replace=True)
    assert path.stat().st_mode & 0o777 == 0o600
    assert read_key_file(path) == f"{keys[1]},{keys[0]}"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.db.key"]


def test_a_key_file_is_checked(tmp_path: Path, keys: tuple[str, str]) -> None:
    path = tmp_path / "k"
    with pytest.raises(InvalidValue, match="not a valid Fernet key"):
        write_key_file(path, ["not-a-key"])
    assert not path.exists()
    path.write_text("# the store's key\n\n")
    with pytest.raises(InvalidValue, match=f"the key file {path} holds no key"):
        read_key_file(path)
    path.write_text(f"# the store's key\n{keys[0]}\n\n  {keys[1]}  \n")
    assert read_key_file(path) == f"{keys[0]},{keys[1]}"


def test_no_key_appears_in_a_cipher_repr(keys: tuple[str, str]) -> None:
    cipher = FernetCipher(list(keys))
    assert cipher.key_count == 2
    assert not any(key in repr(cipher) for key in keys)
