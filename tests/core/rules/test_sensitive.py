from __future__ import annotations

import builtins
import copy
from types import MappingProxyType
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.encryption import (
    EncryptionKeyMissing,
    FernetCipher,
    NoKeyCipher,
    PlaintextForTests,
    ValueCipher,
    cipher_from_key,
    generate_key,
)
from governance_core.errors import GovernanceError, InvalidValue, ValidationErrors
from governance_core.rules.sensitive import (
    has_markers,
    json_pointer,
    restore_sensitive,
    split_sensitive,
)


def marker(kind: str, value: object, labels: list[str] | None = None) -> dict[str, Any]:
    return {"$sensitive": kind, "labels": labels if labels is not None else ["pii"], "value": value}


def error_tree(error: GovernanceError) -> Any:
    if isinstance(error, ValidationErrors):
        return {name: error_tree(inner) for name, inner in error.errors.items()}
    return error.code


def test_split_removes_values_and_keys_them_by_pointer() -> None:
    payload = {
        "customer": {"name": "Ada", "ssn": marker("string", "123-45-6789")},
        "items": [marker("number", 12.5), {"paid": marker("boolean", False, [])}],
        "a/b~c": marker("number", 3),
    }
    original = copy.deepcopy(payload)
    redacted, values = split_sensitive(payload, "payload")
    assert payload == original
    assert redacted == {
        "customer": {"name": "Ada", "ssn": {"$sensitive": "string", "labels": ["pii"]}},
        "items": [
            {"$sensitive": "number", "labels": ["pii"]},
            {"paid": {"$sensitive": "boolean", "labels": []}},
        ],
        "a/b~c": {"$sensitive": "number", "labels": ["pii"]},
    }
    assert values == {
        "/customer/ssn": "123-45-6789",
        "/items/0": 12.5,
        "/items/1/paid": False,
        "/a~1b~0c": 3,
    }
    assert restore_sensitive(redacted, values) == payload
    assert has_markers(payload)
    assert has_markers(redacted)
    assert not has_markers({"a": [1, {"b": "$sensitive"}]})


def test_a_marker_at_the_top_and_no_markers() -> None:
    redacted, values = split_sensitive(marker("string", "x"), "payload")
    assert values == {"": "x"}
    assert restore_sensitive(redacted, values) == marker("string", "x")
    assert split_sensitive({"a": [1, "two", None]}, "payload") == ({"a": [1, "two", None]}, {})


def test_every_bad_marker_is_reported_along_its_path() -> None:
    payload = {
        "customer": {
            "ssn": marker("number", "123"),
            "age": marker("number", True),
            "vip": marker("boolean", 1),
        },
        "items": [marker("string", "ok"), marker("date", "2024-01-01")],
        "notes": {"$sensitive": "string", "labels": "pii", "value": "x"},
        "missing": {"$sensitive": "string"},
        "null": marker("string", None),
    }
    with pytest.raises(ValidationErrors) as raised:
        split_sensitive(payload, "result_payload")
    assert error_tree(raised.value) == {
        "result_payload": {
            "customer": {
                "ssn": "invalid_value", "age": "invalid_value", "vip": "invalid_value"
            },
            "items": {"1": "invalid_value"},
            "notes": "invalid_value",
            "missing": "invalid_value",
            "null": "invalid_value",
        }
    }
    customer = raised.value.errors["result_payload"]
    assert isinstance(customer, ValidationErrors)
    inner = customer.errors["customer"]
    assert isinstance(inner, ValidationErrors)
    assert "number" in inner.errors["ssn"].message


def test_labels_are_optional_and_other_members_are_kept() -> None:
    payload = {"x": {"$sensitive": "string", "value": "v", "hint": "last four"}}
    redacted, values = split_sensitive(payload, "payload")
    assert redacted == {"x": {"$sensitive": "string", "hint": "last four"}}
    assert values == {"/x": "v"}


def test_restore_is_pure_and_ignores_unknown_pointers() -> None:
    redacted = {"a": {"$sensitive": "string", "labels": []}, "b": [1]}
    frozen = copy.deepcopy(redacted)
    restored = restore_sensitive(redacted, {"/a": "secret", "/zzz": 1, "/b/0": 9})
    assert restored == {"a": {"$sensitive": "string", "labels": [], "value": "secret"}, "b": [1]}
    assert redacted == frozen
    # A marker without a stored value stays redacted.
    assert restore_sensitive(redacted, {"/other": 1}) == redacted


def test_json_pointer_escapes() -> None:
    assert json_pointer(()) == ""
    assert json_pointer(("a/b", "m~n", 0, "")) == "/a~1b/m~0n/0/"


# --------------------------------------------------------------------------- properties

KEYS = st.text(alphabet="ab/~0 $", max_size=4).filter(lambda k: k != "$sensitive")
MARKERS = st.one_of(
    st.builds(marker, st.just("string"), st.text(max_size=5)),
    st.builds(marker, st.just("number"), st.integers() | st.floats(allow_nan=False)),
    st.builds(marker, st.just("boolean"), st.booleans()),
    st.builds(
        lambda v: {"$sensitive": "string", "value": v}, st.text(max_size=3)
    ),
)
PAYLOADS = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4) | MARKERS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=150, deadline=None)
@given(payload=PAYLOADS)
def test_split_then_restore_is_identity(payload: object) -> None:
    redacted, values = split_sensitive(payload, "payload")
    assert restore_sensitive(redacted, values) == payload
    assert has_markers(redacted) == has_markers(payload)
    assert has_markers(payload) or values == {}
    # Nothing secret is left in the redacted payload.
    assert restore_sensitive(redacted, {}) == redacted
    assert "value" not in repr(_markers(redacted))


def _markers(node: object) -> list[dict[str, Any]]:
    if isinstance(node, dict):
        if "$sensitive" in node:
            return [node]
        return [m for value in node.values() for m in _markers(value)]
    if isinstance(node, list):
        return [m for item in node for m in _markers(item)]
    return []


# --------------------------------------------------------------------------- encryption


def test_no_key_refuses_to_store_and_plaintext_is_a_choice_for_tests() -> None:
    for key in (None, "", "   "):
        cipher = cipher_from_key(key)
        assert isinstance(cipher, NoKeyCipher)
        with pytest.raises(EncryptionKeyMissing):
            cipher.encrypt(b"x")
    plain = PlaintextForTests()
    assert plain.decrypt(plain.encrypt(b"x")) == b"x"


def test_fernet_round_trip_and_rotation() -> None:
    old, new = generate_key(), generate_key()
    cipher = cipher_from_key(old)
    assert isinstance(cipher, FernetCipher)
    assert isinstance(cipher, ValueCipher)
    token = cipher.encrypt(b"123-45-6789")
    assert b"123-45-6789" not in token
    assert cipher.decrypt(token) == b"123-45-6789"
    rotated = cipher_from_key(f"{new}, {old}")
    assert rotated.decrypt(token) == b"123-45-6789"
    assert cipher_from_key(new).decrypt(rotated.encrypt(b"v")) == b"v"
    assert old not in repr(cipher)
    with pytest.raises(GovernanceError) as raised:
        cipher_from_key(new).decrypt(token)
    assert raised.value.code == "unexpected"


def test_bad_key() -> None:
    with pytest.raises(InvalidValue):
        cipher_from_key("not-a-key")


def test_missing_extra_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    real_import = builtins.__import__

    def no_cryptography(name: str, *args: Any, **kwargs: Any) -> Any:
        if name.startswith("cryptography"):
            raise ImportError("No module named 'cryptography'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cryptography)
    with pytest.raises(ImportError, match=r"agent-runs-governance\[encryption\]"):
        cipher_from_key("any-key")
    with pytest.raises(ImportError, match="encryption"):
        generate_key()


def test_markers_inside_other_mappings_and_list_types_are_split() -> None:
    class Items(list[object]):
        pass

    secret = {"$sensitive": "string", "value": "s"}
    payload = MappingProxyType({"a": Items([1, secret]), "b": (secret,)})
    redacted, values = split_sensitive(payload, "payload")
    assert values == {"/a/1": "s", "/b/0": "s"}
    assert redacted == {"a": [1, {"$sensitive": "string"}], "b": [{"$sensitive": "string"}]}
