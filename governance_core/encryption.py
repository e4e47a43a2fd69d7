"""Encryption at rest of sensitive values (decisions 11).

Stores encrypt each sensitive value (and each webhook signing secret) with a
:class:`ValueCipher` before writing it and decrypt it on read. Three ciphers exist:

- :class:`FernetCipher`, with a key: Fernet (AES-128-CBC with HMAC-SHA256, from the
  ``cryptography`` package, which the ``http`` and ``encryption`` extras install). Several keys
  may be given for rotation: the first encrypts, every one decrypts.
- :class:`NoKeyCipher`, the default of :class:`~governance_core.context.Config`: it refuses to
  store a value (:class:`EncryptionKeyMissing`, saying how to pass a key), so nothing sensitive
  is ever written readable by accident.
- :class:`PlaintextForTests`, chosen explicitly by tests that do not care about encryption: it
  stores bytes as they are.

Values stored before a key was configured are plain bytes. Every cipher still reads them (they
are readable in the database already); ``governance keys rekey``
(:func:`governance_core.domain.sensitive_values.rekey`) encrypts them under the key.

Key files (:func:`read_key_file`, :func:`write_key_file`) hold one key a line, the first
encrypting; they are written with mode 0600.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from governance_core.errors import InvalidValue, UnexpectedError

if TYPE_CHECKING:
    from cryptography.fernet import Fernet, MultiFernet

__all__ = [
    "EncryptionKeyMissing",
    "FernetCipher",
    "NoKeyCipher",
    "PlaintextForTests",
    "ValueCipher",
    "cipher_from_key",
    "generate_key",
    "is_encrypted",
    "read_key_file",
    "write_key_file",
]

_MISSING_EXTRA = (
    "encryption of sensitive values needs the 'cryptography' package: "
    "install agent-runs-governance[encryption] (from a checkout: pip install '.[encryption]')"
)

_HOW_TO_PASS_A_KEY = (
    "pass a key: Governance.open(location, encryption_key=key) with a key from "
    "governance_core.encryption.generate_key() kept somewhere safe, or "
    "Config(cipher=FernetCipher(key)); `governance serve` reads $GOVERNANCE_ENCRYPTION_KEY or "
    "a key file (docs/serving.md, 'Encryption key'); tests that do not need encryption may "
    "choose Config(cipher=PlaintextForTests())"
)

KEY_FILE_MODE = 0o600
"""The permissions of a key file this module writes: its owner alone reads and writes it."""

_FERNET_START = b"gA"
"""How every Fernet token begins: its version byte 0x80 in url-safe base64."""


class EncryptionKeyMissing(UnexpectedError):
    """A sensitive value was to be stored, or an encrypted one read, without a key."""


@runtime_checkable
class ValueCipher(Protocol):
    """Turns stored bytes into ciphertext and back."""

    def encrypt(self, data: bytes) -> bytes:
        """Return the ciphertext of ``data``."""
        ...

    def decrypt(self, token: bytes) -> bytes:
        """Return the plaintext of ``token``."""
        ...


def is_encrypted(token: bytes) -> bool:
    """Tell whether stored bytes are a Fernet token rather than a value stored in plain.

    Values stored in plain are the JSON of a record's values (``{...}``) or a webhook secret
    (``whsec_...``); neither begins as a Fernet token does.
    """
    return token.startswith(_FERNET_START)


class NoKeyCipher:
    """The cipher without a key: it refuses to store, and reads only values stored in plain.

    Storing raises :class:`EncryptionKeyMissing`, whose message says how to pass a key (or
    how tests choose :class:`PlaintextForTests`). Reading a value stored in plain before
    keys were required returns it; reading an encrypted one raises, since only its key opens it.
    """

    def encrypt(self, data: bytes) -> bytes:
        """Refuse: a sensitive value is never stored without a key."""
        raise EncryptionKeyMissing(
            f"a sensitive value cannot be stored: no encryption key is configured; "
            f"{_HOW_TO_PASS_A_KEY}"
        )

    def decrypt(self, token: bytes) -> bytes:
        """Return a value stored in plain; refuse an encrypted one."""
        if is_encrypted(token):
            raise EncryptionKeyMissing(
                f"a stored sensitive value is encrypted and no encryption key is configured; "
                f"{_HOW_TO_PASS_A_KEY}"
            )
        return token

    def __repr__(self) -> str:
        return "NoKeyCipher()"


class PlaintextForTests:
    """Stores bytes as they are: for tests that do not exercise encryption, chosen explicitly.

    Anyone who reads the database reads these values, so never configure it for a store
    that holds real data.
    """

    def encrypt(self, data: bytes) -> bytes:
        """Return ``data`` unchanged."""
        return data

    def decrypt(self, token: bytes) -> bytes:
        """Return ``token`` unchanged."""
        return token

    def __repr__(self) -> str:
        return "PlaintextForTests()"


def _require_cryptography() -> None:
    try:
        import cryptography.fernet  # noqa: F401
    except ImportError as error:
        raise ImportError(_MISSING_EXTRA) from error


def _key_list(key: str | bytes | Sequence[str]) -> list[str]:
    if isinstance(key, bytes):
        key = key.decode("ascii", "replace")
    texts = [key] if isinstance(key, str) else list(key)
    return [part.strip() for text in texts for part in text.split(",") if part.strip()]


class FernetCipher:
    """Fernet encryption with one key, or several for rotation.

    ``key`` is a url-safe base64 Fernet key as :func:`generate_key` makes, several such keys
    separated by commas, or a sequence of them: the first encrypts, every one of them
    decrypts, so a new key can be put first while values written under the old one stay
    readable. A value stored in plain before any key was configured is read as it is
    (:func:`is_encrypted`). The key never appears in ``repr``.
    """

    def __init__(self, key: str | bytes | Sequence[str]) -> None:
        _require_cryptography()
        from cryptography.fernet import Fernet, MultiFernet

        parts = _key_list(key)
        if not parts:
            raise InvalidValue("the encryption key is empty")
        try:
            self._keys: list[Fernet] = [Fernet(part) for part in parts]
        except ValueError as error:
            raise InvalidValue(
                "the encryption key is not a valid Fernet key "
                "(32 url-safe base64-encoded bytes; make one with generate_key())"
            ) from error
        self._fernet: MultiFernet = MultiFernet(self._keys)

    @property
    def key_count(self) -> int:
        """How many keys decrypt (the first of them encrypts)."""
        return len(self._keys)

    def encrypt(self, data: bytes) -> bytes:
        """Return the Fernet token of ``data`` under the first key."""
        return self._fernet.encrypt(data)

    def decrypt(self, token: bytes) -> bytes:
        """Return the plaintext of a token made under any of the keys, or of a plain value.

        Raises :class:`~governance_core.errors.UnexpectedError` when no key opens it (the
        value was written under a key no longer configured, or the data is damaged).
        """
        from cryptography.fernet import InvalidToken

        if not is_encrypted(token):
            return token
        try:
            return self._fernet.decrypt(token)
        except InvalidToken as error:
            raise UnexpectedError(
                "a stored sensitive value cannot be decrypted with the configured key "
                "(if it was written under an earlier key, configure that key after the "
                "current one until `governance keys rekey` has run)"
            ) from error

    def is_current(self, token: bytes) -> bool:
        """Tell whether ``token`` was made under the first key (so a rekey leaves it alone)."""
        from cryptography.fernet import InvalidToken

        if not is_encrypted(token):
            return False
        try:
            # Checks the token's HMAC under the first key without decrypting it.
            self._keys[0].extract_timestamp(token)
        except InvalidToken:
            return False
        return True

    def reencrypt(self, token: bytes) -> bytes:
        """Return ``token``'s plaintext (plain, or under any key) encrypted under the first key."""
        return self.encrypt(self.decrypt(token))

    def __repr__(self) -> str:
        return f"FernetCipher(<{len(self._keys)} key(s) hidden>)"


def cipher_from_key(key: str | None) -> ValueCipher:
    """Return the cipher for a configured key: Fernet with one, :class:`NoKeyCipher` without.

    ``None`` or blank text means no key: storing a sensitive value is then refused.
    """
    if key is None or not key.strip():
        return NoKeyCipher()
    return FernetCipher(key)


def generate_key() -> str:
    """Return a new random Fernet key, as text to put in configuration."""
    _require_cryptography()
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")


def read_key_file(path: str | Path) -> str:
    """Return the keys a key file holds (one a line, the first encrypting), comma-separated.

    Blank lines and lines starting with ``#`` are skipped. Raises
    :class:`~governance_core.errors.InvalidValue` naming the file when it holds no key.
    """
    lines = Path(path).read_text(encoding="ascii").splitlines()
    keys = [line.strip() for line in lines if line.strip() and not line.startswith("#")]
    if not keys:
        raise InvalidValue(f"the key file {path} holds no key")
    return ",".join(keys)


def write_key_file(path: str | Path, keys: Sequence[str], *, replace: bool = False) -> None:
    """Write ``keys`` (the first encrypting) to ``path``, one a line, with mode 0600.

    The file is written beside its final place and renamed over it, so a reader sees the
    old keys or the new ones, never part of them. Without ``replace`` an existing file is
    left alone and ``FileExistsError`` raised. Each key is checked first.
    """
    if not keys:
        raise InvalidValue("a key file needs at least one key")
    FernetCipher(list(keys))
    target = Path(path)
    if not replace and target.exists():
        raise FileExistsError(f"the key file {target} exists already")
    descriptor, temporary = tempfile.mkstemp(
        dir=target.parent, prefix=f".{target.name}.", suffix=".tmp"
    )
    try:
        os.fchmod(descriptor, KEY_FILE_MODE)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write("".join(f"{key.strip()}\n" for key in keys))
            file.flush()
            os.fsync(file.fileno())
        if replace:
            os.replace(temporary, target)
        else:
            # A hard link fails when the target appeared meanwhile: never overwrite a key.
            os.link(temporary, target)
            os.unlink(temporary)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
