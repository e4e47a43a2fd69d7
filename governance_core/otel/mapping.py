"""The mapping from OpenTelemetry spans to the library's records, as pure functions.

Nothing here reads or writes a store: each function turns decoded spans
(:mod:`governance_core.otel.model`) into the members of core operations. The table in
``docs/opentelemetry.md`` describes the same mapping for users.
"""

from __future__ import annotations

import base64
import hashlib
import re
from collections.abc import Container, Iterable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import attrs

from governance_core.clock import format_timestamp
from governance_core.domain.runs import party_value
from governance_core.ids import encode_random_part, time_and_partition_text
from governance_core.otel.model import Event, Rejection, Span

__all__ = [
    "DEFAULT_ROOT_WAIT",
    "DEFAULT_SENSITIVE_ATTRIBUTES",
    "DEFAULT_SPAN_TYPES",
    "DEFAULT_VERSION",
    "EVALUATION_EVENT",
    "MappingSettings",
    "RunTarget",
    "TraceGroup",
    "agent_version_member",
    "agent_name",
    "counts_usage",
    "derived_span_id",
    "group_spans",
    "is_root",
    "quality_records",
    "run_parties",
    "run_status",
    "schema_name",
    "span_members",
    "timestamp",
    "tool_type",
]

DEFAULT_SENSITIVE_ATTRIBUTES: Final[tuple[str, ...]] = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.prompt",
    "gen_ai.prompt.*",
    "gen_ai.completion",
    "gen_ai.completion.*",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "input.value",
    "output.value",
    "llm.input_messages.*",
    "llm.output_messages.*",
    "llm.prompts.*",
    "llm.prompt_template.variables",
    "retrieval.documents.*",
    "reranker.input_documents.*",
    "reranker.output_documents.*",
    "reranker.query",
    "embedding.embeddings.*",
    "traceloop.entity.input",
    "traceloop.entity.output",
    "ai.prompt",
    "ai.prompt.*",
    "ai.response.text",
    "ai.response.toolCalls",
    "ai.response.object",
    "ai.response.reasoning",
    "ai.toolCall.args",
    "ai.toolCall.result",
    "ai.value",
    "ai.values",
    "ai.embedding",
    "ai.embeddings",
)
"""Attributes that carry what a model or a tool was given or produced (messages, prompts,
arguments, documents): stored as sensitive values, not in the payload. ``*`` matches any
characters, dots included."""

DEFAULT_ROOT_WAIT: Final = timedelta(hours=1)
"""How long a trace's run waits for its root after its latest span before it is ended
(:func:`governance_core.otel.idle.end_idle_runs`)."""

DEFAULT_VERSION: Final = "unversioned"
"""The agent version's external identifier when the resource has no ``service.version``."""

EVALUATION_EVENT: Final = "gen_ai.evaluation.result"
"""The GenAI event whose occurrences become quality payloads."""

FALLBACK_AGENT: Final = "unknown_service"
"""The agent's external identifier when the resource names none (the SDK's own default)."""

_RESULT_PREFIXES: Final = (
    "gen_ai.response.",
    "gen_ai.usage.",
    "gen_ai.output.",
    "gen_ai.completion",
    "gen_ai.tool.call.result",
    "gen_ai.evaluation.",
    "output.",
    "llm.output_messages.",
    "llm.token_count.",
    "retrieval.documents.",
    "reranker.output_documents.",
    "traceloop.entity.output",
    "error.",
    "exception.",
    "ai.response.",
    "ai.usage.",
    "ai.toolCall.result",
    "ai.embedding",
)
"""Attributes about what a span produced go to ``result_payload``; the rest to ``payload``."""

_ALIASES: Final = (
    # (source attribute, GenAI attribute it stands for); the GenAI name is what cost reads.
    # Usage aliases are written on model calls only (see counts_usage).
    ("llm.token_count.prompt", "gen_ai.usage.input_tokens"),
    ("llm.token_count.completion", "gen_ai.usage.output_tokens"),
    ("llm.token_count.prompt_details.cache_read", "gen_ai.usage.cache_read.input_tokens"),
    ("gen_ai.usage.prompt_tokens", "gen_ai.usage.input_tokens"),
    ("gen_ai.usage.completion_tokens", "gen_ai.usage.output_tokens"),
    # The Vercel AI SDK's own telemetry: input counts include cached ones, as GenAI's do.
    ("ai.usage.inputTokens", "gen_ai.usage.input_tokens"),
    ("ai.usage.promptTokens", "gen_ai.usage.input_tokens"),
    ("ai.usage.tokens", "gen_ai.usage.input_tokens"),
    ("ai.usage.outputTokens", "gen_ai.usage.output_tokens"),
    ("ai.usage.completionTokens", "gen_ai.usage.output_tokens"),
    ("ai.usage.cachedInputTokens", "gen_ai.usage.cache_read.input_tokens"),
    ("llm.model_name", "gen_ai.request.model"),
    ("embedding.model_name", "gen_ai.request.model"),
    ("ai.model.id", "gen_ai.request.model"),
    ("gen_ai.response.model", "gen_ai.request.model"),
    ("llm.provider", "gen_ai.provider.name"),
    ("gen_ai.system", "gen_ai.provider.name"),
    ("llm.system", "gen_ai.provider.name"),
)

_USAGE_PREFIXES: Final = ("gen_ai.usage.", "llm.token_count.", "ai.usage.")
"""Attributes that report token counts: counted on model calls only."""

UNCOUNTED_USAGE: Final = "otel.uncounted_usage"
"""The ``result_payload`` member holding the usage a span that is not a model call reports."""

_MODEL_OPERATIONS: Final = frozenset({"chat", "text_completion", "generate_content", "embeddings"})
_MODEL_KINDS: Final = frozenset({"llm", "embedding"})
_MODEL_REQUEST_TYPES: Final = frozenset({"chat", "completion", "embedding"})
_VERCEL_MODEL_CALLS: Final = (".dogenerate", ".dostream", ".doembed")

_TOOL_SCHEMAS: Final = frozenset({
    "gen_ai:execute_tool", "openinference:tool", "traceloop:tool", "ai:tool_call",
})
_TOOL_NAMES: Final = ("gen_ai.tool.name", "tool.name", "ai.toolCall.name", "traceloop.entity.name")
_AGENT_NAMES: Final = ("gen_ai.agent.name", "agent.name", "agent_name")

_NAME_CHARACTERS = re.compile(r"[^a-z0-9_.\-]+")
_NAME_MAX = 100

_LLM_RISK: Final = {
    "action_profile": {
        "external_communication": "allowed",
        "create_data": "disallowed",
        "read_data": "disallowed",
        "update_data": "disallowed",
        "destroy_data": "disallowed",
        "financial_transactions": "disallowed",
    },
}
_RETRIEVAL_RISK: Final = {
    "action_profile": {
        "read_data": "allowed",
        "create_data": "disallowed",
        "update_data": "disallowed",
        "destroy_data": "disallowed",
        "financial_transactions": "disallowed",
    },
}

_SPAN_KINDS: Final[tuple[tuple[str, str, Mapping[str, Any] | None], ...]] = (
    # (schema name, title, data_risk); None declares nothing: every value unknown.
    ("gen_ai:chat", "Chat completion", _LLM_RISK),
    ("gen_ai:text_completion", "Text completion", _LLM_RISK),
    ("gen_ai:generate_content", "Content generation", _LLM_RISK),
    ("gen_ai:embeddings", "Embeddings", _LLM_RISK),
    ("gen_ai:execute_tool", "Tool call", None),
    ("gen_ai:invoke_agent", "Agent invocation", None),
    ("gen_ai:create_agent", "Agent creation", None),
    ("gen_ai:invoke_workflow", "Workflow", None),
    ("openinference:llm", "LLM call", _LLM_RISK),
    ("openinference:embedding", "Embeddings", _LLM_RISK),
    ("openinference:retriever", "Retrieval", _RETRIEVAL_RISK),
    ("openinference:tool", "Tool call", None),
    ("openinference:chain", "Chain", None),
    ("openinference:agent", "Agent", None),
    ("openinference:reranker", "Reranker", None),
    ("openinference:guardrail", "Guardrail", None),
    ("openinference:evaluator", "Evaluator", None),
    ("traceloop:workflow", "Workflow", None),
    ("traceloop:task", "Task", None),
    ("traceloop:agent", "Agent", None),
    ("traceloop:tool", "Tool call", None),
    ("ai:generate_text", "Text generation (AI SDK)", None),
    ("ai:stream_text", "Text streaming (AI SDK)", None),
    ("ai:generate_object", "Object generation (AI SDK)", None),
    ("ai:stream_object", "Object streaming (AI SDK)", None),
    ("ai:embed", "Embedding (AI SDK)", None),
    ("ai:embed_many", "Embeddings (AI SDK)", None),
    ("ai:generate_text.do_generate", "Model call (AI SDK)", _LLM_RISK),
    ("ai:stream_text.do_stream", "Model call (AI SDK)", _LLM_RISK),
    ("ai:generate_object.do_generate", "Model call (AI SDK)", _LLM_RISK),
    ("ai:stream_object.do_stream", "Model call (AI SDK)", _LLM_RISK),
    ("ai:embed.do_embed", "Embeddings call (AI SDK)", _LLM_RISK),
    ("ai:embed_many.do_embed", "Embeddings call (AI SDK)", _LLM_RISK),
    ("ai:tool_call", "Tool call", None),
    ("otel:span", "Span", None),
)

SUMMARY_TEMPLATE: Final = (
    '{% if ["otel.span"].agent %}{{ ["otel.span"].agent }}: {% endif %}{{ ["otel.span"].name }}'
)
"""Every default type's summary: the agent that took the step (when the span names one) and
the span's name, so the run's tree shows which agent did what."""

DEFAULT_SPAN_TYPES: Final[tuple[dict[str, Any], ...]] = tuple(
    {
        "name": name,
        "title": title,
        "params_schema": {"type": "object"},
        "result_schema": {"type": "object"},
        "template": SUMMARY_TEMPLATE,
        **({} if risk is None else {"data_risk": dict(risk)}),
    }
    for name, title, risk in _SPAN_KINDS
)
"""The span types registered with an agent version first seen through OpenTelemetry.

A model call sends its prompt to the model's provider (external communication) and reads,
writes or pays for nothing itself; a retrieval reads data. What the data is, no default can
know, so every category stays ``unknown``; tools, agents and chains stay wholly ``unknown``
until the user declares them in their own schema version.
"""


@attrs.frozen
class MappingSettings:
    """What a user may configure about the mapping.

    ``sensitive_attributes`` are attribute names (``*`` matches any characters) whose values
    are stored as sensitive values (decisions 11) with ``sensitive_labels``. ``root_wait`` is
    how long a trace's run waits for its root span after its latest span before an export
    ends it (None: exports end no run).
    """

    sensitive_attributes: tuple[str, ...] = DEFAULT_SENSITIVE_ATTRIBUTES
    sensitive_labels: tuple[str, ...] = ("opentelemetry",)
    root_wait: timedelta | None = attrs.field(default=DEFAULT_ROOT_WAIT, kw_only=True)
    _pattern: re.Pattern[str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        parts = [
            ".*".join(re.escape(piece) for piece in name.split("*"))
            for name in self.sensitive_attributes
            if name
        ]
        object.__setattr__(self, "_pattern", re.compile("|".join(parts) or "(?!)"))

    @classmethod
    def from_text(cls, text: str | None) -> MappingSettings:
        """Settings from a comma-separated attribute list.

        The list replaces the defaults, or adds to them when it starts with ``+``; empty or
        None keeps the defaults.
        """
        if text is None or not text.strip():
            return cls()
        text = text.strip()
        extend = text.startswith("+")
        names = tuple(name.strip() for name in text.lstrip("+").split(",") if name.strip())
        return cls((*DEFAULT_SENSITIVE_ATTRIBUTES, *names) if extend else names)

    def is_sensitive(self, name: str) -> bool:
        """Whether attribute ``name`` is stored as a sensitive value."""
        return self._pattern.fullmatch(name) is not None


@attrs.frozen
class RunTarget:
    """The agent, version and environment a resource's spans are recorded under."""

    agent: str
    version: str
    environment: str | None


@attrs.frozen
class TraceGroup:
    """The spans of one trace from one resource: one run's share of an export."""

    target: RunTarget
    trace_id: str
    spans: tuple[Span, ...]


def timestamp(unix_nano: int) -> str:
    """The interface's timestamp text of a time in nanoseconds since the epoch."""
    seconds, nanos = divmod(unix_nano, 1_000_000_000)
    moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
    return format_timestamp(moment)


def _text(value: object) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def run_target(attributes: Mapping[str, Any]) -> RunTarget:
    """The agent (``gen_ai.agent.name``, else ``service.name``), version and environment."""
    agent = (
        _text(attributes.get("gen_ai.agent.name"))
        or _text(attributes.get("service.name"))
        or FALLBACK_AGENT
    )
    version = _text(attributes.get("service.version")) or DEFAULT_VERSION
    environment = _text(attributes.get("deployment.environment.name")) or _text(
        attributes.get("deployment.environment")
    )
    return RunTarget(agent[:200], version[:200], environment and environment[:200])


def agent_version_member(target: RunTarget, declare: bool) -> dict[str, Any]:
    """The register members naming the version (and, when ``declare``, the default types)."""
    members: dict[str, Any] = {
        "agent_version": {"external_identifier": target.version, "name": target.version},
    }
    if declare:
        members["agent_schema_version"] = {
            "external_identifier": f"opentelemetry:{target.version}",
            "span_type_schemas": [dict(entry) for entry in DEFAULT_SPAN_TYPES],
        }
    return members


def _is_hex(value: str, length: int) -> bool:
    # Stripping the digits leaves nothing only of a hex string (and of a zero one, nothing
    # else): one pass in C rather than a generator a character.
    return len(value) == length and not value.strip("0123456789abcdef") and bool(
        value.strip("0")
    )


def _check(span: Span) -> str | None:
    if not _is_hex(span.trace_id, 32):
        return "trace_id must be 16 bytes, not all zero"
    if not _is_hex(span.span_id, 16):
        return "span_id must be 8 bytes, not all zero"
    if span.parent_span_id and not _is_hex(span.parent_span_id, 16):
        return "parent_span_id must be empty or 8 bytes, not all zero"
    if span.start_time_unix_nano <= 0:
        return "start_time_unix_nano is missing"
    if span.end_time_unix_nano < span.start_time_unix_nano:
        return "end_time_unix_nano is before start_time_unix_nano"
    return None


def group_spans(spans: Iterable[Span]) -> tuple[list[TraceGroup], list[Rejection]]:
    """Check every span and group the good ones by (agent target, trace), in input order.

    Within a group, spans are ordered so that a parent precedes its children (by start
    time, then depth), and a span repeated in the same export is kept once.
    """
    groups: dict[tuple[RunTarget, str], dict[str, Span]] = {}
    rejected: list[Rejection] = []
    for span in spans:
        problem = _check(span)
        if problem is not None:
            rejected.append(Rejection(span.trace_id, span.span_id, problem))
            continue
        key = (run_target(span.resource.attributes), span.trace_id)
        groups.setdefault(key, {}).setdefault(span.span_id, span)
    result = []
    for (target, trace_id), by_id in groups.items():
        result.append(TraceGroup(target, trace_id, tuple(_parents_first(by_id))))
    return result, rejected


def _parents_first(by_id: Mapping[str, Span]) -> list[Span]:
    def depth(span: Span) -> int:
        seen = 0
        while span.parent_span_id in by_id and seen < len(by_id):
            span = by_id[span.parent_span_id]
            seen += 1
        return seen

    return sorted(by_id.values(), key=lambda span: (span.start_time_unix_nano, depth(span)))


def is_root(span: Span) -> bool:
    """Whether the span is its run's root: no parent, or a parent in another process."""
    return not span.parent_span_id or span.parent_is_remote


def run_status(span: Span) -> str:
    """The status a root span gives its run (and any span itself): its status code."""
    return "failed" if span.status_code == "error" else "complete"


SESSION_ATTRIBUTES: Final = ("session.id", "gen_ai.conversation.id")
"""The attributes naming the conversation (session) a span's run belongs to, in order."""
USER_ATTRIBUTES: Final = ("user.id", "enduser.id")
"""The attributes naming the end user a span's run acts for, in order."""


def run_parties(span: Span) -> tuple[str | None, str | None]:
    """The session and user a span names for its run: ``(session_id, user_id)``.

    Each is the first usable value (a string of 1 to 200 characters) of its attributes, in
    order, among the span's attributes, then its resource's; None when none has one.
    """
    sources = (span.attributes, span.resource.attributes)

    def first(names: tuple[str, ...]) -> str | None:
        return next((found for attributes in sources for name in names
                     if (found := party_value(attributes.get(name))) is not None), None)

    return first(SESSION_ATTRIBUTES), first(USER_ATTRIBUTES)


def derived_span_id(run_id: str, trace_id: str, span_id: str) -> str:
    """The span id for OTel span ``span_id`` of ``trace_id`` recorded in run ``run_id``.

    A well-formed PFID with the run's time and partition and 80 bits of a hash of the three,
    so that a re-sent span and a child naming its parent before the parent arrives compute
    the same id. The text is ``pfid.encode`` of the run's first 10 binary bytes and the
    digest's first 10 (stored ids depend on it), written with table lookups rather than
    ``pfid``'s loop over bits.
    """
    digest = hashlib.sha256(f"{run_id}/{trace_id}/{span_id}".encode()).digest()
    return time_and_partition_text(run_id) + encode_random_part(
        int.from_bytes(digest[:10], "big")
    )


def _lower_text(attributes: Mapping[str, Any], name: str) -> str | None:
    value = _text(attributes.get(name))
    return value.lower() if value is not None else None


def _type_name(value: str) -> str:
    return _NAME_CHARACTERS.sub("_", value.strip().lower()).strip("_")


_CAMEL_HUMP = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _vercel_operation(attributes: Mapping[str, Any]) -> str | None:
    """The Vercel AI SDK's ``ai.operationId`` in snake case without ``ai.``, or None."""
    operation = _text(attributes.get("ai.operationId"))
    if operation is None or not operation.startswith("ai.") or len(operation) > _NAME_MAX:
        return None
    parts = operation[3:].split(".")
    return ".".join(_type_name(_CAMEL_HUMP.sub(r"_\1", part)) for part in parts)



def schema_name(attributes: Mapping[str, Any]) -> str:
    """The span type: ``gen_ai:<operation>``, ``openinference:<kind>``, ... or ``otel:span``.

    The conventions are tried in order: GenAI ``gen_ai.operation.name``, OpenInference
    ``openinference.span.kind``, OpenLLMetry ``traceloop.span.kind``, then the Vercel AI
    SDK's ``ai.operationId`` (``ai.generateText.doGenerate`` -> ``ai:generate_text.do_generate``).
    """
    for attribute, namespace in (
        ("gen_ai.operation.name", "gen_ai"),
        ("openinference.span.kind", "openinference"),
        ("traceloop.span.kind", "traceloop"),
    ):
        value = attributes.get(attribute)
        if isinstance(value, str):
            name = _type_name(value)
            if name:
                return f"{namespace}:{name}"[:_NAME_MAX]
    operation = _vercel_operation(attributes)
    if operation:
        return f"ai:{operation}"[:_NAME_MAX]
    return "otel:span"


def counts_usage(attributes: Mapping[str, Any]) -> bool:
    """Whether the span is a model call, the only kind of span whose token usage counts.

    Model calls are GenAI ``chat``, ``text_completion``, ``generate_content`` and
    ``embeddings`` operations, OpenInference ``LLM`` and ``EMBEDDING`` spans, the Vercel AI
    SDK's ``doGenerate`` / ``doStream`` / ``doEmbed`` spans and OpenLLMetry's spans with
    ``llm.request.type`` ``chat``, ``completion`` or ``embedding``. Agent, chain, workflow,
    step and tool spans, and spans of no convention, never count: an agent's totals repeat its
    model calls' usage, so a run's usage is its model calls' usage, counted once, whatever the
    nesting and whatever order the spans arrive in.
    """
    operation = _lower_text(attributes, "gen_ai.operation.name")
    if operation is not None:
        return operation in _MODEL_OPERATIONS
    kind = _lower_text(attributes, "openinference.span.kind")
    if kind is not None:
        return kind in _MODEL_KINDS
    if _text(attributes.get("traceloop.span.kind")) is not None:
        return False
    vercel = _lower_text(attributes, "ai.operationId")
    if vercel is not None and vercel.startswith("ai."):
        return vercel.endswith(_VERCEL_MODEL_CALLS)
    return _lower_text(attributes, "llm.request.type") in _MODEL_REQUEST_TYPES


def tool_type(attributes: Mapping[str, Any]) -> str | None:
    """A tool span's own type, ``tool:<tool name>``; None for other spans or unnamed tools.

    The name is the first of ``gen_ai.tool.name``, ``tool.name`` (OpenInference),
    ``ai.toolCall.name`` (Vercel AI SDK) and ``traceloop.entity.name``, lower-cased with
    characters other than letters, digits, ``_``, ``.`` and ``-`` replaced by ``_``.
    """
    if schema_name(attributes) not in _TOOL_SCHEMAS:
        return None
    for attribute in _TOOL_NAMES:
        value = _text(attributes.get(attribute))
        name = _type_name(value) if value is not None else ""
        if name:
            return f"tool:{name}"[:_NAME_MAX]
    return None


def agent_name(attributes: Mapping[str, Any]) -> str | None:
    """The agent a span itself names, or None.

    ``gen_ai.agent.name``, OpenInference's ``agent.name`` (how the OpenAI Agents SDK's agents
    are named), ``agent_name``, or an OpenLLMetry agent span's ``traceloop.entity.name``.
    """
    for attribute in _AGENT_NAMES:
        value = _text(attributes.get(attribute))
        if value is not None:
            return value[:200]
    if _lower_text(attributes, "traceloop.span.kind") == "agent":
        entity = _text(attributes.get("traceloop.entity.name"))
        return entity[:200] if entity is not None else None
    return None


_SCALARS = frozenset({str, int, float, bool})
"""The attribute values kept as they are (most of them), known without an ABC check."""


def _json_value(value: Any) -> Any:
    if type(value) in _SCALARS:
        return value
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, (list, tuple)):
        return [_json_value(item) for item in value]
    if isinstance(value, Mapping):
        return {str(key): _json_value(item) for key, item in value.items()}
    return value


def _marked(value: Any, labels: list[str]) -> Any:
    """``value`` with every scalar inside replaced by a sensitive marker (decisions 11)."""
    if isinstance(value, list):
        return [_marked(item, labels) for item in value]
    if isinstance(value, dict):
        return {key: _marked(item, labels) for key, item in value.items()}
    if isinstance(value, bool):
        return {"$sensitive": "boolean", "labels": labels, "value": value}
    if isinstance(value, (int, float)):
        return {"$sensitive": "number", "labels": labels, "value": value}
    if isinstance(value, str):
        return {"$sensitive": "string", "labels": labels, "value": value}
    return value


def _attributes(
    attributes: Mapping[str, Any], settings: MappingSettings
) -> tuple[dict[str, Any], bool]:
    """The attributes as JSON with the sensitive ones marked; whether any was marked."""
    labels = list(settings.sensitive_labels)
    out: dict[str, Any] = {}
    marked = False
    for key, value in attributes.items():
        plain = _json_value(value)
        if settings.is_sensitive(key) and plain is not None:
            plain = _marked(plain, labels)
            marked = True
        out[key] = plain
    return out, marked


def _with_aliases(attributes: Mapping[str, Any]) -> dict[str, Any]:
    complete = dict(attributes)
    vercel_provider = _text(attributes.get("ai.model.provider"))
    if vercel_provider is not None and "gen_ai.provider.name" not in complete:
        # "openai.chat", "anthropic.messages": the provider, then the API used. The SDK
        # writes the same text to gen_ai.system, so this comes before that alias.
        complete["gen_ai.provider.name"] = vercel_provider.split(".", 1)[0]
    for source, target in _ALIASES:
        if source in attributes and target not in complete:
            complete[target] = attributes[source]
    return complete


def _event(event: Event, settings: MappingSettings) -> tuple[dict[str, Any], bool]:
    attributes, marked = _attributes(event.attributes, settings)
    return {
        "name": event.name, "time": timestamp(event.time_unix_nano), "attributes": attributes,
    }, marked


def span_members(
    span: Span,
    *,
    span_id: str,
    parent_id: str | None,
    settings: MappingSettings,
    declared: Container[str] = frozenset(),
) -> dict[str, Any]:
    """The members of ``agent_spans/create`` for a finished OTel span (run not included).

    ``declared`` holds the span types the run's schema version declares: a tool span takes
    its own type (:func:`tool_type`) when it is declared there, else its convention's shared
    type. A span that is not a model call (:func:`counts_usage`) keeps the token counts it
    reports under ``result_payload["otel.uncounted_usage"]``, where cost does not read them.
    """
    source = dict(span.attributes)
    uncounted: dict[str, Any] = {}
    if not counts_usage(span.attributes):
        uncounted = {key: source.pop(key) for key in list(source) if key.startswith(
            _USAGE_PREFIXES)}
    attributes, marked = _attributes(_with_aliases(source), settings)
    payload: dict[str, Any] = {}
    result: dict[str, Any] = {}
    for key, value in attributes.items():
        (result if key.startswith(_RESULT_PREFIXES) else payload)[key] = value
    if uncounted:
        result[UNCOUNTED_USAGE] = {key: _json_value(value) for key, value in uncounted.items()}
    payload["otel.span"] = {
        "name": span.name, "kind": span.kind, "trace_id": span.trace_id,
        "span_id": span.span_id, "parent_span_id": span.parent_span_id or None,
        "scope": {"name": span.scope_name, "version": span.scope_version},
        "agent": agent_name(span.attributes),
    }
    result["otel.status"] = {"code": span.status_code, "message": span.status_message or None}
    if span.events:
        events = [_event(event, settings) for event in span.events]
        result["otel.events"] = [event for event, _ in events]
        marked = marked or any(event_marked for _, event_marked in events)
    own_type = tool_type(span.attributes)
    return {
        "id": span_id,
        "parent_span_id": parent_id,
        "schema_name": own_type if own_type in declared else schema_name(span.attributes),
        "status": run_status(span),
        "started_at": timestamp(span.start_time_unix_nano),
        "finished_at": timestamp(span.end_time_unix_nano),
        "payload": payload,
        "result_payload": result,
        "sensitive_encoding": marked,
    }


_EVALUATION_MEMBERS: Final = {
    "gen_ai.evaluation.score.value": "score",
    "gen_ai.evaluation.score.label": "label",
    "gen_ai.evaluation.explanation": "explanation",
    "gen_ai.response.id": "response_id",
}


def quality_records(span: Span, span_id: str) -> list[tuple[str, dict[str, Any]]]:
    """The ``(name, payload)`` of each ``gen_ai.evaluation.result`` event of the span.

    The name is ``gen_ai.evaluation.name``; the payload holds the score, label and
    explanation under short names, any other attribute as it is, and the evaluated span.
    Events without a name are skipped.
    """
    records = []
    for event in span.events:
        if event.name != EVALUATION_EVENT:
            continue
        name = _text(event.attributes.get("gen_ai.evaluation.name"))
        if name is None:
            continue
        payload: dict[str, Any] = {"agent_span_id": span_id}
        for key, value in event.attributes.items():
            if key != "gen_ai.evaluation.name":
                payload[_EVALUATION_MEMBERS.get(key, key)] = _json_value(value)
        records.append((name[:200], payload))
    return records
