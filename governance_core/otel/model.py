"""Decoded OpenTelemetry trace data as plain values: what every decoder hands the mapping.

The OTLP decoders (protobuf and JSON, in the HTTP layer) and the in-process exporter each
turn their input into these classes, so the mapping never sees protobuf or SDK objects.
Ids are lowercase hex strings as OTLP's JSON encoding writes them; times are nanoseconds
since the Unix epoch; attribute values are JSON values (``bytes`` become base64 text).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["SPAN_KINDS", "STATUS_CODES", "Event", "Rejection", "Resource", "Span"]

SPAN_KINDS = ("unspecified", "internal", "server", "client", "producer", "consumer")
"""OTLP's ``SpanKind`` values by number."""

STATUS_CODES = ("unset", "ok", "error")
"""OTLP's ``Status.StatusCode`` values by number."""


@attrs.frozen
class Resource:
    """What produced the spans: the resource's attributes (``service.name`` and the like)."""

    attributes: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Event:
    """A timed event inside a span (an exception, a ``gen_ai.evaluation.result``...)."""

    name: str
    time_unix_nano: int
    attributes: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Span:
    """One finished OpenTelemetry span with the resource and scope it was exported under.

    ``trace_id`` (32 hex digits) and ``span_id`` (16) are empty strings when the input lacked
    them; the mapping rejects such spans. ``parent_is_remote`` is true when the parent lives
    in another process (the span is then the root of what this process recorded).
    """

    trace_id: str
    span_id: str
    name: str
    start_time_unix_nano: int
    end_time_unix_nano: int
    parent_span_id: str = ""
    kind: str = "unspecified"
    attributes: Mapping[str, Any] = attrs.field(factory=dict)
    events: tuple[Event, ...] = ()
    status_code: str = "unset"
    status_message: str = ""
    parent_is_remote: bool = False
    resource: Resource = attrs.field(factory=Resource)
    scope_name: str = ""
    scope_version: str = ""


@attrs.frozen
class Rejection:
    """A span the mapping did not store, and why (reported in OTLP's ``partial_success``)."""

    trace_id: str
    span_id: str
    reason: str

    def describe(self) -> str:
        """One line naming the span and the reason."""
        return f"span {self.span_id or '?'} of trace {self.trace_id or '?'}: {self.reason}"
