"""Query strings as request members.

Keys are kept flat as sent (``pagination[offset]`` stays one key: the core reads that form).
A key given once is a string, a repeated key (or one ending in ``[]``) a list of strings, and a
key without ``=`` (``?redacted``) is the flag ``"true"``; the core converts types per field.
"""

from __future__ import annotations

from urllib.parse import unquote_plus

from governance_core.errors import BadRequest

__all__ = ["QueryValue", "parse_query"]

QueryValue = str | list[str]

FLAG = "true"
_LIST_SUFFIX = "[]"


def _decode(text: str) -> str:
    try:
        return unquote_plus(text, errors="strict")
    except UnicodeDecodeError:
        raise BadRequest("the query string is not valid UTF-8 once percent-decoded") from None


def _check_name(name: str) -> None:
    depth = 0
    for char in name:
        depth += {"[": 1, "]": -1}.get(char, 0)
        if depth not in (0, 1):
            break
    if depth != 0 or not name or name.startswith("["):
        raise BadRequest(f"malformed query parameter name {name!r}")


def parse_query(query_string: str) -> dict[str, QueryValue]:
    """Return the members of a raw query string (``a=1&b=2&b=3&flag``)."""
    members: dict[str, QueryValue] = {}
    for part in query_string.split("&"):
        if not part:
            continue
        raw_name, has_value, raw_value = part.partition("=")
        name = _decode(raw_name)
        value = _decode(raw_value) if has_value else FLAG
        _check_name(name)
        if name.endswith(_LIST_SUFFIX):
            name = name[: -len(_LIST_SUFFIX)]
            _check_name(name)
            members.setdefault(name, [])
        present = members.get(name)
        if present is None:
            members[name] = value
        elif isinstance(present, list):
            present.append(value)
        else:
            members[name] = [present, value]
    return members
