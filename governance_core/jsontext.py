"""JSON text as the library writes and reads it: compact, strict, and fast.

Every stored record, and every payload size estimate, is JSON text. :func:`dumps` writes
it with python-rapidjson, about three times as fast as the standard library, and refuses with
``ValueError`` what JSON cannot hold: NaN and the infinities, keys that are not strings, a
lone surrogate, bytes and other types. (The standard library writes ``NaN``, turns keys into
strings and escapes a lone surrogate, none of which reads back as the value written.)
Integers of any size are kept; tuples, like lists, are arrays. :func:`loads` reads what
:func:`dumps` wrote, and text the standard library wrote before (a lone surrogate escape,
which python-rapidjson refuses, is read by the standard library).

Text from outside (request bodies, OTLP/JSON exports) is measured before it is decoded
(:func:`nesting_exceeds`) and searched for lone surrogates after (:func:`lone_surrogates`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from itertools import accumulate
from typing import Any, Final

import rapidjson

__all__ = [
    "MAX_JSON_DEPTH",
    "PathPart",
    "dumps",
    "json_path",
    "loads",
    "lone_surrogates",
    "nesting_exceeds",
]

MAX_JSON_DEPTH: Final = 64
"""How deeply arrays and objects of a JSON text from outside may nest (decisions, section 14)."""

PathPart = str | int

_SURROGATE = re.compile("[\ud800-\udfff]")
_LEVEL = bytes.maketrans(b"[{]}", b"\x01\x01\xff\xff")
_NOT_BRACKET = bytes(byte for byte in range(256) if byte not in b"[]{}")


# NM_NONE: no NaN or infinities, which python-rapidjson writes by default; BM_NONE: no bytes.
_ENCODER = rapidjson.Encoder(
    ensure_ascii=False, number_mode=rapidjson.NM_NONE, bytes_mode=rapidjson.BM_NONE
)


def dumps(value: Any) -> str:
    """Return the compact JSON text of ``value`` (non-ASCII kept as it is).

    Raises ValueError naming the problem when ``value`` holds anything JSON cannot hold.
    """
    try:
        text = _ENCODER(value)
    except (TypeError, ValueError, OverflowError) as error:
        raise ValueError(f"not a JSON value: {error}") from None
    assert text is not None  # without a stream to write to, the text is returned
    return text


def loads(text: str | bytes) -> Any:
    """Return the value JSON ``text`` holds; ValueError when it is not JSON."""
    try:
        return rapidjson.loads(text)
    except rapidjson.JSONDecodeError:
        return json.loads(text)


def nesting_exceeds(raw: bytes, max_depth: int) -> bool:
    """Tell whether the JSON text ``raw`` nests arrays and objects more than ``max_depth`` deep.

    Every step is a C-speed bytes operation, so a 10 MiB body is measured in well under a
    second whatever its shape: escaped backslashes and quotes are dropped, the text between
    quotes (string contents) is cut out, the brackets left become +1/-1 and the deepest
    running sum is the depth. Malformed text may measure wrong; the decoder then refuses it.
    """
    unescaped = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    outside_strings = b"".join(unescaped.split(b'"')[::2])
    steps = memoryview(outside_strings.translate(_LEVEL, _NOT_BRACKET)).cast("b")
    return max(accumulate(steps), default=0) > max_depth


def lone_surrogates(value: Any, path: tuple[PathPart, ...] = ()) -> Iterator[tuple[PathPart, ...]]:
    """Yield the path of every string or member name in ``value`` holding a lone surrogate.

    A surrogate left after decoding is always lone: the decoder joins escaped pairs.
    A member name that holds one is named with its surrogates escaped.
    """
    if isinstance(value, str):
        if _SURROGATE.search(value):
            yield path
    elif isinstance(value, dict):
        for key, item in value.items():
            if _SURROGATE.search(key):
                yield (*path, _escaped(key))
            else:
                yield from lone_surrogates(item, (*path, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from lone_surrogates(item, (*path, index))


def json_path(path: tuple[PathPart, ...]) -> str:
    """Write a member path as ``a.b[0].c`` (the body itself is ``body``)."""
    text = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in path)
    return text.lstrip(".") or "body"


def _escaped(text: str) -> str:
    return _SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", text)
