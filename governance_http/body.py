"""Request bodies: read within the size limit, checked for nesting depth, then decoded.

The limits (decisions, section 14) are enforced before any work: a declared ``Content-Length``
over the limit is refused without reading, a chunked body is read no further than one byte past
the limit, and the nesting depth is measured on the raw bytes before the decoder runs, so a
hostile body can neither fill memory nor exhaust the decoder's recursion.

Text is checked here, once, for every operation: a string or member name holding a lone
UTF-16 surrogate (U+D800 to U+DFFF unpaired, which JSON's escapes allow but no UTF-8 text can
carry) is a ``validation_errors`` answer naming where it sits, so no such text reaches the
core, the store or a response. The query string (strict UTF-8 once percent-decoded) and
headers (Latin-1 by WSGI) cannot carry one.
"""

from __future__ import annotations

import json
import re
import zlib
from typing import Any, Final

import attrs
import falcon

from governance_core.errors import BadRequest, FieldErrors
from governance_core.jsontext import MAX_JSON_DEPTH, json_path, lone_surrogates, nesting_exceeds

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_JSON_DEPTH",
    "NO_BODY",
    "BodyLimits",
    "GzipTooLarge",
    "UnreadableGzip",
    "gunzip",
    "json_path",
    "lone_surrogates",
    "nesting_exceeds",
    "read_body",
]

MAX_BODY_BYTES: Final = 10 * 1024 * 1024

NO_BODY: Final = object()
"""What :func:`read_body` answers for an absent or empty body (``null`` counts as absent)."""

_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


@attrs.frozen
class BodyLimits:
    """How large and how deeply nested a request body may be."""

    max_bytes: int = MAX_BODY_BYTES
    max_depth: int = MAX_JSON_DEPTH


class UnreadableGzip(ValueError):
    """A ``Content-Encoding: gzip`` body that is not gzip, or is cut short."""


class GzipTooLarge(ValueError):
    """A gzip body that inflates past the size limit."""


def gunzip(raw: bytes, limit: int) -> bytes:
    """Inflate every member of the gzip body ``raw`` (RFC 1952 allows several, end to end).

    No more than ``limit + 1`` bytes are ever inflated, whatever the members hold, so a body
    that inflates to gigabytes costs no more than the limit: :class:`GzipTooLarge` past it,
    :class:`UnreadableGzip` for bytes that are not gzip or a member cut short.
    """
    inflated: list[bytes] = []
    size = 0
    rest = raw
    while True:
        inflater = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
        try:
            part = inflater.decompress(rest, limit + 1 - size)
        except zlib.error as error:
            raise UnreadableGzip(f"the gzip body cannot be read: {error}") from None
        size += len(part)
        if size > limit:
            raise GzipTooLarge(f"the decompressed request body is larger than {limit} bytes")
        inflated.append(part)
        if not inflater.eof:
            raise UnreadableGzip("the gzip body is truncated")
        rest = inflater.unused_data
        if not rest:
            return b"".join(inflated)


def _check_text(raw: bytes, value: Any) -> None:
    if not _SURROGATE_ESCAPE.search(raw):
        return
    errors = FieldErrors()
    for path in lone_surrogates(value):
        errors.invalid(
            path or "body", "must be valid Unicode text: it holds a lone UTF-16 surrogate"
        )
    errors.raise_if_any()


def _is_json(content_type: str | None) -> bool:
    if content_type is None:
        return True
    media_type = content_type.split(";", 1)[0].strip().lower()
    return media_type in ("", "application/json") or (
        media_type.startswith("application/") and media_type.endswith("+json")
    )


def _read_raw(req: falcon.Request, limit: int) -> bytes:
    length = req.content_length
    if length is not None:
        if length > limit:
            raise falcon.HTTPContentTooLarge(
                description=f"the request body is larger than {limit} bytes"
            )
        return req.bounded_stream.read() if length else b""
    if "chunked" in (req.get_header("Transfer-Encoding") or "").lower():
        raw: bytes = req.stream.read(limit + 1)
        if len(raw) > limit:
            raise falcon.HTTPContentTooLarge(
                description=f"the request body is larger than {limit} bytes"
            )
        return raw
    return b""


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


def read_body(req: falcon.Request, limits: BodyLimits) -> Any:
    """Return the decoded JSON body of ``req``, or :data:`NO_BODY`.

    Raises 413 for a body over the size limit and ``bad_request`` for a body that is not JSON
    (by media type or by content) or that nests deeper than allowed.
    """
    raw = _read_raw(req, limits.max_bytes)
    if not raw.strip():
        return NO_BODY
    if not _is_json(req.content_type):
        raise BadRequest(
            f"the request body must be JSON (application/json), not {req.content_type}"
        )
    if nesting_exceeds(raw, limits.max_depth):
        raise BadRequest(f"the request body nests more than {limits.max_depth} levels deep")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise BadRequest("the request body is not valid UTF-8") from None
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        raise BadRequest(f"the request body is not valid JSON: {error}") from None
    _check_text(raw, value)
    return NO_BODY if value is None else value
