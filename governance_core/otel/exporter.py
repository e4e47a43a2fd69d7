"""An OpenTelemetry SDK ``SpanExporter`` that records spans into an embedded ``Governance``.

It needs the ``otel`` extra (``opentelemetry-sdk``). Spans go through the same mapping as
the OTLP endpoint (:func:`governance_core.otel.ingest`), with no HTTP in between::

    provider.add_span_processor(BatchSpanProcessor(GovernanceSpanExporter(governance, token)))
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

try:
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
    from opentelemetry.trace import SpanKind, StatusCode
except ImportError as missing:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "GovernanceSpanExporter needs the otel extra (opentelemetry-sdk): "
        "pip install '.[otel]' from a checkout"
    ) from missing

from governance_core.errors import GovernanceError, TemporarilyUnavailable
from governance_core.otel.ingest import ExportCutShort, ExportSteps, IngestResult, ingest
from governance_core.otel.mapping import MappingSettings
from governance_core.otel.model import Event, Resource, Span
from governance_core.service import Governance

if TYPE_CHECKING:
    from governance_core.context import Principal

__all__ = ["GovernanceSpanExporter", "from_readable_span"]

_log = logging.getLogger("governance_core.otel")

_KINDS = {
    SpanKind.INTERNAL: "internal", SpanKind.SERVER: "server", SpanKind.CLIENT: "client",
    SpanKind.PRODUCER: "producer", SpanKind.CONSUMER: "consumer",
}
_STATUS = {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}


def _plain(attributes: Mapping[str, Any] | None) -> dict[str, Any]:
    return {
        key: list(value) if isinstance(value, tuple) else value
        for key, value in (attributes or {}).items()
    }


def from_readable_span(span: ReadableSpan) -> Span:
    """The mapping's plain :class:`~governance_core.otel.model.Span` of an SDK span."""
    context = span.get_span_context()
    parent = span.parent
    scope = span.instrumentation_scope
    return Span(
        trace_id=format(context.trace_id, "032x") if context else "",
        span_id=format(context.span_id, "016x") if context else "",
        parent_span_id=format(parent.span_id, "016x") if parent else "",
        parent_is_remote=bool(parent and parent.is_remote),
        name=span.name,
        kind=_KINDS.get(span.kind, "unspecified"),
        start_time_unix_nano=span.start_time or 0,
        end_time_unix_nano=span.end_time or 0,
        attributes=_plain(span.attributes),
        events=tuple(
            Event(event.name, event.timestamp, _plain(event.attributes)) for event in span.events
        ),
        status_code=_STATUS.get(span.status.status_code, "unset"),
        status_message=span.status.description or "",
        resource=Resource(_plain(span.resource.attributes)),
        scope_name=scope.name if scope else "",
        scope_version=(scope.version or "") if scope else "",
    )


class GovernanceSpanExporter(SpanExporter):
    """Records each exported batch as governed runs of an embedded ``Governance``.

    ``caller`` is a token (account or ``agent_deployment``) or an already known principal
    (``governance.as_account(account_id).principal``). A batch is written in ``steps``
    (:class:`~governance_core.otel.ingest.ExportSteps`), each its own transaction, as the
    OTLP endpoint writes an export, so that the embedder's other writers take turns with a
    large batch. A busy store is retried ``retries`` times, waiting as it asks (at most
    ``max_wait`` seconds a time), as the OTLP exporters do: the whole batch is written again,
    and the spans its earlier steps stored are found stored, not stored twice. A batch still
    refused is logged (with how many of its spans were stored) and reported as a failed
    export. Spans refused one by one are logged, and ``last_result`` holds the latest
    batch's outcome.
    """

    def __init__(
        self,
        governance: Governance,
        caller: str | Principal,
        settings: MappingSettings | None = None,
        *,
        retries: int = 3,
        max_wait: float = 2.0,
        sleep: Callable[[float], None] = time.sleep,
        steps: ExportSteps | None = None,
    ) -> None:
        self.governance = governance
        self.principal = (
            governance.authenticate(caller) if isinstance(caller, str) else caller
        )
        self.settings = settings or MappingSettings()
        self.retries = retries
        self.max_wait = max_wait
        self._sleep = sleep
        self.steps = steps or ExportSteps()
        self.last_result: IngestResult | None = None

    def _ingest(self, spans: list[Span]) -> IngestResult:
        for _ in range(self.retries):
            try:
                return ingest(
                    self.governance, self.principal, spans, self.settings, steps=self.steps
                )
            except TemporarilyUnavailable as busy:
                self._sleep(min(self.max_wait, busy.retry_after_ms / 1000))
        return ingest(self.governance, self.principal, spans, self.settings, steps=self.steps)

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        """Record one batch of finished spans."""
        try:
            result = self._ingest([from_readable_span(span) for span in spans])
        except ExportCutShort as cut:
            _log.warning("batch recorded in part: %s", cut.message)
            return SpanExportResult.FAILURE
        except GovernanceError as error:
            _log.warning("spans not recorded: %s", error.message)
            return SpanExportResult.FAILURE
        self.last_result = result
        for rejection in result.rejected:
            _log.warning("span not recorded: %s", rejection.describe())
        return SpanExportResult.SUCCESS

    def shutdown(self) -> None:
        """Nothing to release: the ``Governance`` belongs to the caller."""

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Every export is written before it returns: nothing is buffered here."""
        return True
