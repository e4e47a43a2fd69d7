"""The one error hierarchy of the library.

Every failure the library reports is a :class:`GovernanceError`. Each subclass carries the
interface's error ``code`` as a class attribute; the HTTP layer maps codes to status numbers in
one table, and the core knows none of them.

    GovernanceError
    +-- BadRequest                  bad_request
    +-- BadAuthToken                bad_authtoken
    +-- NotAuthenticated            not_authenticated
    +-- NotPermitted                not_permitted
    +-- NotImplementedOperation     not_implemented
    +-- UnknownError                unknown
    +-- NotFound                    not_found
    +-- UnexpectedRefType           unexpected_ref_type
    +-- UnexpectedError             unexpected
    +-- InvalidAction               invalid_action
    +-- AlertUnknown                alert_unknown
    +-- AlertAlreadyCleared         alert_already_cleared
    +-- InvalidValue                invalid_value
    +-- RequiredValue               required_value
    +-- IdempotencyKeyAlreadyUsed   idempotency_key_already_used
    +-- TemporarilyUnavailable      temporarily_unavailable (carries retry_after_ms)
    |   +-- WriteConflict           (a concurrent write collided; the write may be re-run)
    +-- Conflict                    conflict
    +-- ValidationErrors            validation_errors (carries a map of field to error)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

__all__ = [
    "AlertAlreadyCleared",
    "AlertUnknown",
    "BadAuthToken",
    "BadRequest",
    "Conflict",
    "FieldErrors",
    "GovernanceError",
    "IdempotencyKeyAlreadyUsed",
    "InvalidAction",
    "InvalidValue",
    "NotAuthenticated",
    "NotFound",
    "NotImplementedOperation",
    "NotPermitted",
    "RequiredValue",
    "TemporarilyUnavailable",
    "UnexpectedError",
    "UnexpectedRefType",
    "UnknownError",
    "ValidationErrors",
    "WriteConflict",
    "error_class_for_code",
]


class GovernanceError(Exception):
    """Root of every error the library raises on purpose."""

    code: ClassVar[str] = "unknown"
    default_message: ClassVar[str] = "an error occurred"

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)

    def to_payload(self) -> dict[str, Any]:
        """The interface's error body for this error."""
        return {"status": "error", "code": self.code, "message": self.message}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


class BadRequest(GovernanceError):
    """The request cannot be read: malformed JSON, wrong media type, bad query syntax."""

    code = "bad_request"
    default_message = "the request could not be read"


class BadAuthToken(GovernanceError):
    """The token is unknown, malformed, expired, suspended or revoked."""

    code = "bad_authtoken"
    default_message = "the access token is not valid"


class NotAuthenticated(GovernanceError):
    """No token was given."""

    code = "not_authenticated"
    default_message = "an access token is required"


class NotPermitted(GovernanceError):
    """The token's scope or the caller's identity does not allow the operation."""

    code = "not_permitted"
    default_message = "this operation is not permitted"


class NotImplementedOperation(GovernanceError):
    """The operation is known to the interface but not offered here."""

    code = "not_implemented"
    default_message = "this operation is not implemented"


class UnknownError(GovernanceError):
    """A failure of unknown cause."""

    code = "unknown"
    default_message = "an unknown error occurred"


class NotFound(GovernanceError):
    """The resource does not exist, is malformed, or belongs to another account."""

    code = "not_found"
    default_message = "not found"


class UnexpectedRefType(GovernanceError):
    """An id names another kind of resource than the field expects."""

    code = "unexpected_ref_type"
    default_message = "the id refers to another kind of resource"


class UnexpectedError(GovernanceError):
    """A bug: something that should not happen did."""

    code = "unexpected"
    default_message = "an unexpected error occurred"


class InvalidAction(GovernanceError):
    """The resource's state does not allow the action."""

    code = "invalid_action"
    default_message = "the action is not allowed in the current state"


class AlertUnknown(GovernanceError):
    """No alert of that name exists on the instance."""

    code = "alert_unknown"
    default_message = "no such alert"


class AlertAlreadyCleared(GovernanceError):
    """The alert is cleared already."""

    code = "alert_already_cleared"
    default_message = "the alert is already cleared"


class InvalidValue(GovernanceError):
    """A value is present but not acceptable."""

    code = "invalid_value"
    default_message = "invalid value"


class RequiredValue(GovernanceError):
    """A required value is missing."""

    code = "required_value"
    default_message = "a value is required"


class IdempotencyKeyAlreadyUsed(GovernanceError):
    """The idempotency key was used before with a different request."""

    code = "idempotency_key_already_used"
    default_message = "the idempotency key was already used with a different request"


class Conflict(GovernanceError):
    """The write collides with data already stored (an id or a unique identifier)."""

    code = "conflict"
    default_message = "conflict with existing data"


class TemporarilyUnavailable(GovernanceError):
    """Storage is busy or the service is overloaded; retry after ``retry_after_ms``."""

    code = "temporarily_unavailable"
    default_message = "temporarily unavailable, retry later"

    def __init__(
        self, message: str | None = None, *, retry_after_ms: int = 1000, rate_limited: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms
        self.rate_limited = rate_limited

    def to_payload(self) -> dict[str, Any]:
        """The interface's retry-shaped error body."""
        return {**super().to_payload(), "retry_after_ms": self.retry_after_ms}


class WriteConflict(TemporarilyUnavailable):
    """A write transaction collided with a concurrent one and was rolled back whole.

    Stores that do not serialise writers raise it (a serialization failure, a deadlock, a
    unique key inserted concurrently); nothing of the transaction was kept, so the operation
    may be run again from the start. Left unretried it answers as ``temporarily_unavailable``.
    """

    default_message = "a concurrent write collided with this one, retry shortly"


class ValidationErrors(GovernanceError):
    """One or more named fields are wrong; ``errors`` maps each field to its error."""

    code = "validation_errors"
    default_message = "the request has invalid fields"

    def __init__(
        self, errors: Mapping[str, GovernanceError], message: str | None = None
    ) -> None:
        self.errors = dict(errors)
        if message is None:
            message = "invalid fields: " + ", ".join(sorted(self.errors))
        super().__init__(message)

    def to_payload(self) -> dict[str, Any]:
        """The interface's validation-shaped error body, recursive."""
        return {
            **super().to_payload(),
            "errors": {name: error.to_payload() for name, error in self.errors.items()},
        }


_BY_CODE: dict[str, type[GovernanceError]] = {
    cls.code: cls
    for cls in (
        BadRequest, BadAuthToken, NotAuthenticated, NotPermitted, NotImplementedOperation,
        UnknownError, NotFound, UnexpectedRefType, UnexpectedError, InvalidAction, AlertUnknown,
        AlertAlreadyCleared, InvalidValue, RequiredValue, IdempotencyKeyAlreadyUsed,
        TemporarilyUnavailable, Conflict, ValidationErrors,
    )
}


def error_class_for_code(code: str) -> type[GovernanceError]:
    """The error class that carries ``code``."""
    return _BY_CODE[code]


PathPart = str | int


class FieldErrors:
    """Collects errors on named fields, then raises them together as :class:`ValidationErrors`.

    A path of several parts reports a nested member or list item the interface's recursive
    way: ``add(("items", 0, "name"), RequiredValue())`` gives ``items -> 0 -> name``.
    """

    def __init__(self) -> None:
        self._tree: dict[str, Any] = {}

    def __bool__(self) -> bool:
        return bool(self._tree)

    def add(self, path: PathPart | Sequence[PathPart], error: GovernanceError) -> None:
        """Record ``error`` on the field at ``path``; the first error of a field is kept."""
        parts = [str(p) for p in ((path,) if isinstance(path, (str, int)) else path)]
        node = self._tree
        for part in parts[:-1]:
            child = node.setdefault(part, {})
            if isinstance(child, GovernanceError):
                return
            node = child
        node.setdefault(parts[-1], error)

    def required(self, path: PathPart | Sequence[PathPart], message: str | None = None) -> None:
        """Record a missing required value at ``path``."""
        self.add(path, RequiredValue(message or f"{_label(path)} is required"))

    def invalid(self, path: PathPart | Sequence[PathPart], message: str) -> None:
        """Record an unacceptable value at ``path``."""
        self.add(path, InvalidValue(message))

    def merge(self, prefix: PathPart | Sequence[PathPart], error: GovernanceError) -> None:
        """Record ``error`` (possibly itself a ValidationErrors) under ``prefix``."""
        self.add(prefix, error)

    def to_error(self) -> ValidationErrors:
        """The collected errors as one exception."""
        return ValidationErrors(_build(self._tree))

    def raise_if_any(self) -> None:
        """Raise the collected errors, if there are any."""
        if self._tree:
            raise self.to_error()



def _label(path: PathPart | Sequence[PathPart]) -> str:
    if isinstance(path, (str, int)):
        return str(path)
    return ".".join(str(p) for p in path)


def _build(tree: Mapping[str, Any]) -> dict[str, GovernanceError]:
    out: dict[str, GovernanceError] = {}
    for name, node in tree.items():
        out[name] = node if isinstance(node, GovernanceError) else ValidationErrors(_build(node))
    return out
