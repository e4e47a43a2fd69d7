"""Signing secrets at rest: encrypted with the store's key, in plain (marked) without one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from governance_core.clock import SystemClock
from governance_core.context import Config
from governance_core.encryption import ValueCipher, cipher_from_key, generate_key
from governance_core.errors import UnexpectedError
from governance_core.notifications.sender import Sender
from governance_core.service import Governance
from governance_core.storage import MemoryStore
from tests.core.runs import account_caller
from tests.notifications.conftest import LOOPBACK_ONLY, Receiver, quick_settings
from tests.notifications.world import destination, new_run, raise_alert, verified


class Refusing:
    """A cipher without a key that refuses to encrypt, and reads plain values."""

    def encrypt(self, data: bytes) -> bytes:
        raise UnexpectedError("no encryption key is configured")

    def decrypt(self, token: bytes) -> bytes:
        return token


def facade(cipher: ValueCipher) -> Governance:
    return Governance(MemoryStore(), clock=SystemClock,
                      config=Config(cipher=cipher, webhook_allowed_networks=LOOPBACK_ONLY))


@pytest.fixture(params=["fernet", "refusing"])
def keyed(request: pytest.FixtureRequest) -> Iterator[Governance]:
    cipher = cipher_from_key(generate_key()) if request.param == "fernet" else Refusing()
    governance = facade(cipher)
    yield governance
    governance.close()


def test_a_secret_is_stored_encrypted_when_a_key_is_configured_and_signs_either_way(
    keyed: Governance, receiver: Receiver
) -> None:
    caller = account_caller(keyed, keyed.bootstrap())
    details, secret = destination(caller, receiver.url)
    [entry] = keyed.store.get("destinations", details["id"])["secrets"]  # type: ignore[index]
    if isinstance(keyed.config.cipher, Refusing):
        assert entry["sealed"] is False and entry["value"] == secret
    else:
        assert entry["sealed"] is True and secret not in entry["value"]
    raise_alert(caller, new_run(caller))
    sender = Sender(keyed, quick_settings())
    assert sender.run_once() == 1
    sender.close()
    assert verified(secret, receiver.received[0])["type"] == "alert.raised"
    rotated = caller.call("destinations/rotate_secret", destination_id=details["id"])["secret"]
    raise_alert(caller, new_run(caller), name="second")
    sender = Sender(keyed, quick_settings())
    sender.run_once()
    sender.close()
    verified(secret, receiver.received[-1])
    verified(rotated, receiver.received[-1])
