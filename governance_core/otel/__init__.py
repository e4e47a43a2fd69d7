"""OpenTelemetry traces recorded as governed runs.

The mapping (:mod:`governance_core.otel.mapping`) is pure and needs no OpenTelemetry
package; :func:`ingest` records decoded spans through the core's operations. The in-process
exporter, :class:`governance_core.otel.exporter.GovernanceSpanExporter`, needs the ``otel``
extra (``opentelemetry-sdk``) and is imported from its module.
"""

from governance_core.otel.ingest import IngestResult, ingest
from governance_core.otel.mapping import (
    DEFAULT_SENSITIVE_ATTRIBUTES,
    DEFAULT_SPAN_TYPES,
    MappingSettings,
)
from governance_core.otel.model import Event, Rejection, Resource, Span

__all__ = [
    "DEFAULT_SENSITIVE_ATTRIBUTES",
    "DEFAULT_SPAN_TYPES",
    "Event",
    "IngestResult",
    "MappingSettings",
    "Rejection",
    "Resource",
    "Span",
    "ingest",
]
