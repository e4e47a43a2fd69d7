"""Reading request members: bare or ``details``-wrapped, typed, with errors named per field.

An operation reads each member it accepts through :class:`Fields`, which collects every
problem and raises them together (``validation_errors``) when :meth:`Fields.done` is called.
Members it does not read are ignored; server-managed members are simply never read.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Collection, Mapping
from datetime import datetime
from typing import Any

from governance_core import jsontext
from governance_core.clock import parse_timestamp
from governance_core.errors import FieldErrors
from governance_core.ids import is_pfid

__all__ = ["BODY", "SAFE_INTEGER", "Fields", "flatten_params"]

BODY = "_body"
"""The member under which a body that is not a JSON object (a bare string) is passed."""

SAFE_INTEGER = 2**53 - 1
"""The largest integer member accepted (unless a field says less): JSON clients read every
integer up to it exactly, and every store holds it."""

_JSON_ONLY = "strings as keys, no NaN or infinity, no lone surrogate, no other type"
_DIGITS = re.compile(r"-?[0-9]{1,30}")
_MISSING = object()
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def flatten_params(params: Mapping[str, Any] | None) -> dict[str, Any]:
    """Path, query and body members as one mapping; a ``details`` object's members win."""
    flat = dict(params or {})
    details = flat.pop("details", None)
    if details is None:
        return flat
    if type(details) is dict or isinstance(details, Mapping):
        flat.update(details)
    else:
        flat["details"] = details
    return flat


class Fields:
    """Typed access to request members, collecting field errors as it goes."""

    def __init__(
        self, params: Mapping[builtins.str, Any] | None, errors: FieldErrors | None = None
    ):
        self.data = flatten_params(params)
        self.errors = errors or FieldErrors()
        # The wrapper is transparent only as an object: anything else would be ignored silently.
        if "details" in self.data:
            wrong = FieldErrors()
            wrong.invalid("details", "details must be an object")
            raise wrong.to_error()

    def has(self, name: builtins.str) -> builtins.bool:
        """Whether the member was sent at all (``null`` counts as sent)."""
        return name in self.data

    def raw(self, name: builtins.str, default: Any = None) -> Any:
        """The member as sent."""
        return self.data.get(name, default)

    @property
    def body(self) -> Any:
        """A body that was not a JSON object, or None."""
        return self.data.get(BODY)

    def _get(self, name: builtins.str, required: builtins.bool, nullable: builtins.bool) -> Any:
        value = self.data.get(name, _MISSING)
        if value is _MISSING or (value is None and required):
            if required:
                self.errors.required(name)
            return _MISSING
        if value is None:
            if not nullable:
                self.errors.invalid(name, f"{name} may not be null")
            return _MISSING
        return value

    def str(
        self,
        name: builtins.str,
        *,
        required: builtins.bool = False,
        nullable: builtins.bool = True,
        choices: Collection[builtins.str] | None = None,
        max_length: builtins.int = 10_000,
        min_length: builtins.int = 0,
        strip: builtins.bool = True,
        default: builtins.str | None = None,
    ) -> builtins.str | None:
        """A string member; blank counts as missing when required."""
        value = self._get(name, required, nullable)
        if value is _MISSING:
            return default
        if not isinstance(value, str):
            self.errors.invalid(name, f"{name} must be a string")
            return default
        if strip:
            value = value.strip()
        if required and not value:
            self.errors.required(name, f"{name} may not be blank")
            return default
        if choices is not None and value not in choices:
            self.errors.invalid(name, f"{name} must be one of: {', '.join(sorted(choices))}")
            return default
        if not min_length <= len(value) <= max_length:
            self.errors.invalid(
                name, f"{name} must be {min_length} to {max_length} characters long"
            )
            return default
        return value

    def int(
        self,
        name: builtins.str,
        *,
        required: builtins.bool = False,
        nullable: builtins.bool = True,
        minimum: builtins.int | None = None,
        maximum: builtins.int | None = None,
        default: builtins.int | None = None,
    ) -> builtins.int | None:
        """An integer member (a numeric string from a query is accepted)."""
        value = self._get(name, required, nullable)
        if value is _MISSING:
            return default
        if isinstance(value, str) and _DIGITS.fullmatch(value.strip()):
            value = int(value)
        if isinstance(value, bool) or not isinstance(value, int):
            self.errors.invalid(name, f"{name} must be an integer")
            return default
        # Unbounded fields still stop at the integers every store and JSON client hold.
        minimum = -SAFE_INTEGER if minimum is None else minimum
        maximum = SAFE_INTEGER if maximum is None else maximum
        if not minimum <= value <= maximum:
            self.errors.invalid(name, f"{name} must be from {minimum} to {maximum}")
            return default
        return value

    def bool(
        self, name: builtins.str, *, default: builtins.bool = False, nullable: builtins.bool = True
    ) -> builtins.bool:
        """A boolean member (``true``/``false`` strings from a query are accepted)."""
        value = self._get(name, False, nullable)
        if value is _MISSING:
            return default
        if isinstance(value, str) and value.lower() in _TRUE | _FALSE:
            return value.lower() in _TRUE
        if not isinstance(value, bool):
            self.errors.invalid(name, f"{name} must be true or false")
            return default
        return value

    def timestamp(
        self, name: builtins.str, *, required: builtins.bool = False, nullable: builtins.bool = True
    ) -> datetime | None:
        """An ISO 8601 date-time member, as an aware UTC datetime."""
        value = self._get(name, required, nullable)
        if value is _MISSING:
            return None
        if isinstance(value, str):
            try:
                return parse_timestamp(value)
            except ValueError:
                pass
        self.errors.invalid(name, f"{name} must be an ISO 8601 date-time")
        return None

    def id(
        self, name: builtins.str, *, required: builtins.bool = False, nullable: builtins.bool = True
    ) -> builtins.str | None:
        """An id member: a well-formed PFID, or an ``invalid_value`` error."""
        value = self._get(name, required, nullable)
        if value is _MISSING:
            return None
        if not is_pfid(value):
            self.errors.invalid(name, f"{name} must be a well-formed id")
            return None
        return str(value)

    def ids(
        self, name: builtins.str, *, required: builtins.bool = False
    ) -> list[builtins.str] | None:
        """A list of ids; each bad item is reported under its index."""
        value = self._get(name, required, True)
        if value is _MISSING:
            return None
        if not isinstance(value, list):
            self.errors.invalid(name, f"{name} must be a list of ids")
            return None
        good: list[builtins.str] = []
        for index, item in enumerate(value):
            if is_pfid(item):
                if item not in good:
                    good.append(item)
            else:
                self.errors.invalid((name, index), "must be a well-formed id")
        return good

    def object(
        self, name: builtins.str, *, required: builtins.bool = False, nullable: builtins.bool = True
    ) -> dict[builtins.str, Any] | None:
        """A JSON object member, holding JSON values only.

        A caller in the same process can pass a NaN, a non-string key or any Python object,
        which no store would keep: that is an ``invalid_value`` on the member.
        """
        value = self._get(name, required, nullable)
        if value is _MISSING:
            return None
        if not isinstance(value, dict):
            self.errors.invalid(name, f"{name} must be an object")
            return None
        try:
            jsontext.dumps(value)
        except ValueError:
            self.errors.invalid(name, f"{name} must hold JSON values only: {_JSON_ONLY}")
            return None
        return value

    def done(self) -> None:
        """Raise every collected field error at once."""
        self.errors.raise_if_any()
