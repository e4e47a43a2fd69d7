"""Encryption at rest of sensitive values (decisions 11).

Stores encrypt each sensitive value with a :class:`ValueCipher` before writing it and decrypt
it on read. Without a key, :class:`PlainCipher` stores bytes as they are. With a key,
:class:`FernetCipher` uses Fernet (AES-128-CBC with HMAC-SHA256, from the ``cryptography``
package, installed with the ``encryption`` extra: ``pip install '.[encryption]'`` from a
checkout, the extra of the ``agent-runs-governance`` distribution).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, runtime_checkable

from governance_core.errors import InvalidValue, UnexpectedError

if TYPE_CHECKING:
    from cryptography.fernet import MultiFernet

__all__ = [
    "FernetCipher",
    "PlainCipher",
    "ValueCipher",
    "cipher_from_key",
    "generate_key",
]

_MISSING_EXTRA = (
    "encryption of sensitive values needs the 'cryptography' package: "
    "install agent-runs-governance[encryption] (from a checkout: pip install '.[encryption]')"
)


@runtime_checkable
class ValueCipher(Protocol):
    """Turns stored bytes into ciphertext and back."""

    def encrypt(self, data: bytes) -> bytes:
        """Return the ciphertext of ``data``."""
        ...

    def decrypt(self, token: bytes) -> bytes:
        """Return the plaintext of ``token``."""
        ...


class PlainCipher:
    """The cipher used without a key: bytes are stored as they are."""

    def encrypt(self, data: bytes) -> bytes:
        """Return ``data`` unchanged."""
        return data

    def decrypt(self, token: bytes) -> bytes:
        """Return ``token`` unchanged."""
        return token

    def __repr__(self) -> str:
        return "PlainCipher()"


def _require_cryptography() -> None:
    try:
        import cryptography.fernet  # noqa: F401
    except ImportError as error:
        raise ImportError(_MISSING_EXTRA) from error


class FernetCipher:
    """Fernet encryption with one key, or several for rotation.

    ``key`` is a url-safe base64 Fernet key as :func:`generate_key` makes, or several such
    keys separated by commas: the first encrypts, every one of them decrypts, so a new key
    can be put first while values written under the old one stay readable. The key never
    appears in ``repr``.
    """

    def __init__(self, key: str | bytes) -> None:
        _require_cryptography()
        from cryptography.fernet import Fernet, MultiFernet

        text = key.decode("ascii", "replace") if isinstance(key, bytes) else key
        parts = [part.strip() for part in text.split(",") if part.strip()]
        if not parts:
            raise InvalidValue("the encryption key is empty")
        try:
            self._fernet: MultiFernet = MultiFernet([Fernet(part) for part in parts])
        except ValueError as error:
            raise InvalidValue(
                "the encryption key is not a valid Fernet key "
                "(32 url-safe base64-encoded bytes; make one with generate_key())"
            ) from error

    def encrypt(self, data: bytes) -> bytes:
        """Return the Fernet token of ``data`` under the first key."""
        return self._fernet.encrypt(data)

    def decrypt(self, token: bytes) -> bytes:
        """Return the plaintext of a token made under any of the keys.

        Raises :class:`~governance_core.errors.UnexpectedError` when no key opens it (the
        value was written under a key no longer configured, or the data is damaged).
        """
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(token)
        except InvalidToken as error:
            raise UnexpectedError(
                "a stored sensitive value cannot be decrypted with the configured key"
            ) from error

    def __repr__(self) -> str:
        return "FernetCipher(<key hidden>)"


def cipher_from_key(key: str | None) -> ValueCipher:
    """Return the cipher for a configured key: Fernet with one, plain without (None or blank)."""
    if key is None or not key.strip():
        return PlainCipher()
    return FernetCipher(key)


def generate_key() -> str:
    """Return a new random Fernet key, as text to put in configuration."""
    _require_cryptography()
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode("ascii")
