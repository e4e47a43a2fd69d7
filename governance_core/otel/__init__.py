"""OpenTelemetry traces recorded as governed runs.

The mapping (:mod:`governance_core.otel.mapping`) is pure and needs no OpenTelemetry
package; :func:`ingest` records decoded spans through the core's operations. The in-process
exporter, :class:`governance_core.otel.exporter.GovernanceSpanExporter`, and the OTLP codec
that turns export bytes into spans and answers into bytes
(:mod:`governance_core.otel.otlp_codec`) need the ``otel`` extra and are imported from their
modules, so that this package imports without it.
"""

from governance_core.otel.idle import (
    ROOT_MISSING_ALERT,
    ROOT_WAIT_VARIABLE,
    end_idle_runs,
    parse_root_wait,
)
from governance_core.otel.ingest import IngestResult, ingest
from governance_core.otel.mapping import (
    DEFAULT_ROOT_WAIT,
    DEFAULT_SENSITIVE_ATTRIBUTES,
    DEFAULT_SPAN_TYPES,
    MappingSettings,
)
from governance_core.otel.model import Event, Rejection, Resource, Span

__all__ = [
    "DEFAULT_ROOT_WAIT",
    "DEFAULT_SENSITIVE_ATTRIBUTES",
    "DEFAULT_SPAN_TYPES",
    "Event",
    "IngestResult",
    "MappingSettings",
    "ROOT_MISSING_ALERT",
    "ROOT_WAIT_VARIABLE",
    "Rejection",
    "Resource",
    "Span",
    "end_idle_runs",
    "ingest",
    "parse_root_wait",
]
