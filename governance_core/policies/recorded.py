"""Recorded spans judged as the actions they record, with the run as it stood at each.

Back-testing (:mod:`~governance_core.policies.backtest`) and the detective judge
(:mod:`~governance_core.policies.detective`) ask the policies about spans already recorded,
with the request a live ``decide`` of the same action builds:

- :func:`recorded_action` maps a span's ``schema_name`` and payload to the action's kind,
  name, arguments and span type (the table is in docs/policies.md, "A recorded span as
  an action");
- :class:`RunSoFar` holds the figures of ``context.run`` as they stood before a span and
  moves them one span at a time, in ``started_at`` order: span and tool-call counts, tokens
  and cost from the span's own token usage, risk from its span type. It starts empty (a
  run's first span) or from the run's stored aggregates (spans about to be judged on top);
- :class:`RecordedJudge` builds each span's request from them, evaluates it once per
  distinct request (identical requests share one evaluation) and folds the verdict.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime, time, timedelta
from decimal import Decimal
from typing import Any, Final, Literal

import attrs

from governance_core import jsontext
from governance_core.clock import format_timestamp, parse_timestamp
from governance_core.context import Context
from governance_core.domain.risk import Rulesets, span_type_data_risks
from governance_core.domain.runs import run_schema_version
from governance_core.domain.sensitive_values import load_values
from governance_core.policies.deciding import (
    ALLOWED,
    Action,
    ActivePolicies,
    Scope,
    Verdict,
    micro_usd,
    policy_context,
    principal_entity,
    resource_attributes,
    resource_entity,
    verdict_of,
)
from governance_core.policies.schema import KIND_ACTIONS, RESOURCE_TYPES, UNKNOWN
from governance_core.repository import Filter, Record, day_cost
from governance_core.rules.cost import UNKNOWN_MODEL, PricingCatalogue, Usage, cost_breakdown
from governance_core.rules.risk import (
    CLASSIFICATIONS,
    DATA_CATEGORIES,
    Ruleset,
    risk_level,
    score_run,
)
from governance_core.rules.sensitive import MARKER_KEY, restore_sensitive
from governance_core.rules.token_groups import span_usage, stored_token_groups

__all__ = [
    "MODEL_SCHEMAS",
    "EarlierRuns",
    "TOOL_ARGUMENTS",
    "TOOL_NAMES",
    "TOOL_SCHEMAS",
    "TOOL_TYPE_PREFIX",
    "JudgedSpan",
    "RecordedJudge",
    "RunBeingJudged",
    "RunSoFar",
    "TypeFacts",
    "UnitCosts",
    "is_tool_type",
    "recorded_action",
]

TOOL_TYPE_PREFIX: Final = "tool:"
"""A span type named ``tool:<name>`` records a call of the tool ``<name>``."""

TOOL_SCHEMAS: Final = frozenset({
    "gen_ai:execute_tool", "openinference:tool", "traceloop:tool", "ai:tool_call",
})
"""The OpenTelemetry mapping's shared tool-call types (docs/opentelemetry.md)."""

TOOL_NAMES: Final = ("gen_ai.tool.name", "tool.name", "ai.toolCall.name", "traceloop.entity.name")
"""Payload members naming the tool of a span of a shared tool-call type, first found wins."""

TOOL_ARGUMENTS: Final = (
    "gen_ai.tool.call.arguments", "ai.toolCall.args", "input.value", "traceloop.entity.input",
)
"""Payload members holding a tool call's arguments (an object, or JSON text of one)."""

MODEL_SCHEMAS: Final = frozenset({
    "gen_ai:chat", "gen_ai:text_completion", "gen_ai:generate_content", "gen_ai:embeddings",
    "openinference:llm", "openinference:embedding",
})
"""The OpenTelemetry mapping's model-call types (besides the AI SDK's ``ai:*.do_*`` ones)."""

EarlierRuns = Literal["before_run", "until_now"]
"""Which other runs of the day a span's ``cost_today_micro_usd`` counts (:class:`RecordedJudge`)."""

_AI_SDK_MODEL_CALLS: Final = (".do_generate", ".do_stream", ".do_embed")
_MODEL_NAMES: Final = ("gen_ai.request.model", "model", "model_name")
_ZERO: Final = Decimal(0)
_MEMO_SIZE: Final = 4096


def is_tool_type(schema_name: str) -> bool:
    """Whether spans of ``schema_name`` record tool calls (``tool:<name>`` or a shared type)."""
    return schema_name.startswith(TOOL_TYPE_PREFIX) or schema_name in TOOL_SCHEMAS


def _is_model_type(schema_name: str) -> bool:
    return schema_name in MODEL_SCHEMAS or (
        schema_name.startswith("ai:") and schema_name.endswith(_AI_SDK_MODEL_CALLS)
    )


def _plain(value: Any) -> Any:
    """``value`` with every sensitive marker that holds its value replaced by the value."""
    if isinstance(value, Mapping):
        if MARKER_KEY in value:
            return value["value"] if "value" in value else dict(value)
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def _object(value: Any) -> dict[str, Any] | None:
    """An object member, or JSON text of one, as an object; None for anything else.

    Text nesting deeper than a request may is not read (it is no call's arguments).
    """
    if isinstance(value, str):
        if not value.lstrip().startswith("{"):
            return None
        encoded = value.encode()
        if jsontext.nesting_exceeds(encoded, jsontext.MAX_JSON_DEPTH):
            return None
        try:
            value = jsontext.loads(encoded)
        except ValueError:
            return None
    return dict(value) if isinstance(value, Mapping) else None


def _names_kept_apart(payload: Mapping[str, Any]) -> bool:
    """Whether a member that may name a recorded action holds a sensitive value's marker."""
    return any(isinstance(payload.get(name), Mapping) for name in (*TOOL_NAMES, *_MODEL_NAMES))


def _text(payload: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    for name in names:
        value = payload.get(name)
        if isinstance(value, str) and value.strip():
            return value.strip()
    return None


def recorded_action(
    span: Record,
    usage: Usage | None,
    *,
    values: Mapping[str, Any] | None = None,
    with_args: bool = True,
) -> Action:
    """The action the activity ``span`` records (its token ``usage`` read already).

    - ``tool_call`` when its type is ``tool:<name>`` (named ``<name>``) or a shared
      OpenTelemetry tool-call type (named by the first of :data:`TOOL_NAMES`, else by the
      type); arguments: the first of :data:`TOOL_ARGUMENTS` holding an object, else the
      payload;
    - ``model_call`` when it reports token usage or its type is a model-call type: named by
      the model its usage names, else the payload's, else ``unknown``; arguments: the payload;
    - else ``span``, named by its type, with the payload as arguments.

    The span type is always the span's own. ``values`` are the payload's sensitive values
    (kept apart, by JSON Pointer): put back, each marker stands for its value; a marker
    whose value is not given stays a marker. Without ``with_args`` the arguments are empty
    (no policy reads them).
    """
    schema_name: str = span["schema_name"]
    payload: Mapping[str, Any] = span.get("payload") or {}
    if not with_args:
        payload = {name: payload[name] for name in (*TOOL_NAMES, *_MODEL_NAMES) if name in payload}
    if values:
        restored = restore_sensitive(payload, values)
        payload = restored if isinstance(restored, Mapping) else payload
    payload = _plain(payload)
    if is_tool_type(schema_name):
        name = (
            schema_name[len(TOOL_TYPE_PREFIX):] if schema_name.startswith(TOOL_TYPE_PREFIX)
            else _text(payload, TOOL_NAMES) or schema_name
        )
        args = next(
            (found for member in TOOL_ARGUMENTS
             if (found := _object(payload.get(member))) is not None),
            dict(payload),
        ) if with_args else {}
        return Action("tool_call", name or schema_name, args, schema_name)
    if usage is not None or _is_model_type(schema_name):
        model = (usage.model if usage is not None else None) or _text(payload, _MODEL_NAMES)
        return Action(
            "model_call", model or UNKNOWN_MODEL, dict(payload) if with_args else {}, schema_name
        )
    return Action("span", schema_name, dict(payload) if with_args else {}, schema_name)


@attrs.frozen
class TypeFacts:
    """What one span of a type adds to a run's risk: its score, categories and classification."""

    score: Decimal
    categories: frozenset[str]
    rank: int
    assessable: bool

    @classmethod
    def of(cls, data_risk: Mapping[str, Any] | None, ruleset: Ruleset) -> TypeFacts:
        """The facts of a type declaring ``data_risk`` (None: nothing), scored by ``ruleset``."""
        scored = score_run({"_": 1}, {"_": data_risk}, ruleset)
        return cls(
            scored["total_score"], frozenset(scored["all_data_categories"]),
            CLASSIFICATIONS.index(scored["peak_classification"] or UNKNOWN),
            scored["any_assessable"],
        )


class RunSoFar:
    """A run's figures as they stood before the next span; :meth:`add` moves them past it.

    The risk figures sum each span's :class:`TypeFacts` (as the stored risk score sums its
    per-type counts), tokens and cost each span's own usage priced alone (cost is linear in
    tokens, so the sum equals the priced total).
    """

    def __init__(self, ruleset: Ruleset, prices: UnitCosts) -> None:
        self.ruleset = ruleset
        self.prices = prices
        self.span_count = 0
        self.tool_calls = 0
        self.input_tokens = 0
        self.output_tokens = 0
        self.cost = _ZERO
        self.score = _ZERO
        self.categories: set[str] = set()
        self.rank = 0
        self.assessable = False

    def add_type(self, facts: TypeFacts, count: int = 1) -> None:
        """Count ``count`` spans of a type with these facts."""
        self.score += facts.score * count
        self.categories |= facts.categories
        self.rank = max(self.rank, facts.rank)
        self.assessable = self.assessable or facts.assessable

    def add_usage(self, usage: Usage | None, *, priced: bool) -> None:
        """Count a span's token usage; its cost too when ``priced`` (a policy reads it)."""
        if usage is None:
            return
        self.input_tokens += usage.input + usage.cache_read
        self.output_tokens += usage.output
        if priced:
            self.cost += self.prices.cost(usage)

    def add(self, facts: TypeFacts, usage: Usage | None, *, tool_call: bool, priced: bool) -> None:
        """Move past one activity span."""
        self.span_count += 1
        self.tool_calls += 1 if tool_call else 0
        self.add_type(facts)
        self.add_usage(usage, priced=priced)

    def figures(self, elapsed_ms: int, needs: Collection[str] | None = None) -> dict[str, Any]:
        """``context.run`` as it stands; only the figures in ``needs`` when it is given."""
        every = _RUN_FIGURES if needs is None else [f for f in _RUN_FIGURES if f[0] in needs]
        return {name: figure(self, elapsed_ms) for name, figure in every}


def _peak(so_far: RunSoFar, _: int) -> str:
    return CLASSIFICATIONS[so_far.rank] if so_far.span_count else UNKNOWN


def _level(so_far: RunSoFar, _: int) -> str:
    return risk_level(so_far.score, so_far.ruleset) if so_far.assessable else UNKNOWN


_RUN_FIGURES: Final[list[tuple[str, Callable[[RunSoFar, int], Any]]]] = [
    ("cost_micro_usd", lambda so_far, _: micro_usd(so_far.cost)),
    ("input_tokens", lambda so_far, _: so_far.input_tokens),
    ("output_tokens", lambda so_far, _: so_far.output_tokens),
    ("risk_score", lambda so_far, _: int(so_far.score)),
    ("risk_level", _level),
    ("peak_classification", _peak),
    ("data_categories",
     lambda so_far, _: [c for c in DATA_CATEGORIES if c in so_far.categories]),
    ("span_count", lambda so_far, _: so_far.span_count),
    ("tool_calls", lambda so_far, _: so_far.tool_calls),
    ("elapsed_ms", lambda _, elapsed_ms: elapsed_ms),
]
"""Each figure of ``context.run`` (:data:`~governance_core.policies.schema.RUN_ATTRIBUTES`)
and how it is read from the run so far and the milliseconds since its start."""


class UnitCosts:
    """Each model's US dollars per input, output and cached token, priced once per model.

    A usage's cost is the sum of its known parts (as
    :func:`~governance_core.rules.cost.cost_breakdown` prices a group: linear in tokens, a
    part with tokens and no price left out, an unknown model costing nothing known).
    """

    def __init__(self, pricing: PricingCatalogue) -> None:
        self.pricing = pricing
        self._units: dict[tuple[str, str | None], tuple[Decimal | None, ...]] = {}

    def cost(self, usage: Usage) -> Decimal:
        """What ``usage`` cost (0 where nothing of it is priced)."""
        group = usage.token_group()
        key = (group.model_name, group.provider)
        units = self._units.get(key)
        if units is None:
            one = cost_breakdown([attrs.evolve(group, input=1, output=1, cache_read=1)],
                                 self.pricing)
            units = self._units[key] = (
                one["input_cost"], one["output_cost"], one["cache_read_cost"],
            )
        return sum(
            (unit * tokens for unit, tokens in zip(
                units, (group.input, group.output, group.cache_read), strict=True
            ) if unit is not None and tokens),
            _ZERO,
        )


@attrs.define
class RunBeingJudged:
    """A run being judged: its records, the policies of its scope, its figures so far.

    Made by :meth:`RecordedJudge.start`; :meth:`RecordedJudge.judge` moves it on.
    """

    instance: Record
    agent: Record
    scope: Scope
    data_risks: dict[str, Any]
    schema_version_id: str | None
    ruleset: Ruleset
    so_far: RunSoFar
    started: datetime | None
    principal: dict[str, Any]
    principal_key: str
    scope_key: tuple[str, ...]
    earlier_cost: dict[str, int] = attrs.field(factory=dict)


@attrs.frozen
class JudgedSpan:
    """A recorded span, the action it records and what the policies said of it."""

    span: Record
    action: Action
    verdict: Verdict


class RecordedJudge:
    """Judges the recorded spans of runs against ``active`` policies (see the module).

    ``earlier_runs`` says which of the agent's other runs of the span's UTC day
    ``context.agent.cost_today_micro_usd`` counts at their stored cost: ``"before_run"``
    those started before the judged run (back-testing, where later runs had not begun),
    ``"until_now"`` every one started that day, at the day's cost the store keeps (the
    detective judge, as a live decide).
    """

    def __init__(
        self, ctx: Context, active: ActivePolicies, *, earlier_runs: EarlierRuns
    ) -> None:
        self.ctx = ctx
        self.active = active
        self.earlier_runs = earlier_runs
        self.rulesets = Rulesets(ctx)
        pricing = ctx.config.pricing
        prices = ctx.caches.unit_costs.get(id(pricing), lambda: (pricing, UnitCosts(pricing)))
        # The kept entry holds its catalogue: no other catalogue can have its id meanwhile.
        assert prices is not None and prices[0] is pricing
        self.prices = prices[1]
        self.reads_args = active.reads("args")
        self.priced = active.reads("cost_micro_usd", "cost_today_micro_usd")
        self._resources: dict[tuple[str | None, str, str, str], dict[str, Any]] = {}
        self._agents: dict[str, Record] = {}
        self._memo: dict[tuple[Any, ...], Verdict] = {}

    def _agent(self, agent_id: str) -> Record:
        agent = self._agents.get(agent_id)
        if agent is None:
            agent = self._agents[agent_id] = self.ctx.tables.agents.get(agent_id) or {}
        return agent

    def start(self, instance: Record, *, stored: bool) -> RunBeingJudged | None:
        """Begin judging the run ``instance``; None when no policy has it in scope.

        ``stored``: its figures start from its stored aggregates (else from nothing: its
        first span is next).
        """
        scope = self.active.in_scope(instance)
        scoped = scope.records
        if not scoped:
            return None
        agent = self._agent(instance["agent_id"])
        schema_version = run_schema_version(self.ctx, instance)
        ruleset = self.rulesets.for_agent(instance["agent_id"], agent or None)
        principal = principal_entity(instance, agent)
        run = RunBeingJudged(
            instance, agent, scope, span_type_data_risks(schema_version),
            (schema_version or {}).get("id"), ruleset,
            RunSoFar(ruleset, self.prices),
            _started(instance), principal, jsontext.dumps(principal),
            tuple(sorted(scoped)),
        )
        if stored:
            so_far = run.so_far
            so_far.span_count = int((instance.get("span_counts") or {}).get("total") or 0)
            for name, count in (instance.get("span_schema_counts") or {}).items():
                if count > 0:
                    so_far.add_type(self._type_facts(run, name), count)
                    so_far.tool_calls += count if is_tool_type(name) else 0
            groups = stored_token_groups(instance)
            so_far.input_tokens = sum(group.input + group.cache_read for group in groups)
            so_far.output_tokens = sum(group.output for group in groups)
            if groups and self.priced:
                total = cost_breakdown(groups, self.ctx.config.pricing)["total_cost"]
                so_far.cost = total if total is not None else _ZERO
        return run

    def _type_facts(self, run: RunBeingJudged, name: str) -> TypeFacts:
        ruleset = run.ruleset
        kept = self.ctx.caches.type_facts.get(
            (run.schema_version_id, id(ruleset)), lambda: (ruleset, {})
        )
        # The kept entry holds its ruleset: no other ruleset can have its id meanwhile.
        assert kept is not None and kept[0] is ruleset
        facts = kept[1].get(name)
        if facts is None:
            facts = kept[1][name] = TypeFacts.of(run.data_risks.get(name), ruleset)
        return facts

    def _resource(self, run: RunBeingJudged, action: Action, span_type: str) -> dict[str, Any]:
        """The resource entity of ``action`` recorded by a span of ``span_type``."""
        key = (run.schema_version_id, action.kind, action.name, span_type)
        entity = self._resources.get(key)
        if entity is None:
            if len(self._resources) >= _MEMO_SIZE:
                self._resources.clear()
            entity = self._resources[key] = resource_entity(
                action, resource_attributes(run.data_risks.get(span_type))
            )
        return entity

    def _cost_today(self, run: RunBeingJudged, at: datetime) -> int:
        """The agent's cost on ``at``'s UTC day: its other runs (stored) and this one so far."""
        midnight = datetime.combine(at.date(), time(), tzinfo=at.tzinfo)
        today = run.started is not None and midnight <= run.started < midnight + timedelta(days=1)
        day = format_timestamp(midnight)
        earlier = run.earlier_cost.get(day)
        if earlier is None:
            earlier = run.earlier_cost[day] = (
                self._day_cost_of_others(run, day[:10]) if self.earlier_runs == "until_now"
                else self._cost_before(run, day, at, today)
            )
        return earlier + (micro_usd(run.so_far.cost) if today else 0)

    def _day_cost_of_others(self, run: RunBeingJudged, day: str) -> int:
        """The stored cost of the agent's other runs started on ``day``: one read by key.

        The day's cost the store keeps counts this run as it is stored now, taken off.
        """
        tables = self.ctx.tables
        total = day_cost(tables, run.instance["agent_id"], day)
        stored = tables.agent_instances.get(run.instance["id"])
        assert stored is not None, "a run is never deleted in the transaction judging it"
        own, started = stored.get("total_cost"), stored.get("started_at")
        if own is not None and started is not None and started[:10] == day:
            total -= float(own)
        return micro_usd(total)

    def _cost_before(self, run: RunBeingJudged, day: str, at: datetime, today: bool) -> int:
        """The stored cost of the agent's other runs started on ``day`` before this one."""
        bound = format_timestamp(run.started if run.started and today else at)
        # The run's own agent is its account's: no tenant filter, so that the index of the
        # agent's runs by start answers alone, reading no run.
        rows = self.ctx.tables.agent_instances.aggregate(sums=["total_cost"], filters=[
            Filter("agent_id", "eq", run.instance["agent_id"]),
            Filter("started_at", "ge", day), Filter("started_at", "lt", bound),
            Filter("id", "ne", run.instance["id"]),
        ])
        return micro_usd(rows[0].sums[0]) if rows else 0

    def judge(self, run: RunBeingJudged, spans: Sequence[Record]) -> list[JudgedSpan]:
        """Judge ``run``'s activity ``spans`` (in ``started_at`` order); move ``run`` past them.

        Each span is judged as the run stood before it. The spans' requests are built first;
        the engine then evaluates, in as few calls as the entities allow, those a statement's
        scope can hold and that no earlier span asked already.
        """
        asked = [self._ask(run, span) for span in spans]
        verdicts: list[Verdict | None] = [None] * len(asked)
        batch = _Batch()
        for index, question in enumerate(asked):
            if question.key is None:
                verdicts[index] = ALLOWED
                continue
            known = self._memo.get(question.key)
            if known is not None:
                verdicts[index] = known
            elif not batch.join(question.key, index):
                if not batch.fits(question.entities):
                    self._evaluate(run, batch, verdicts)
                    batch = _Batch()
                batch.add(question, index)
        self._evaluate(run, batch, verdicts)
        judged = []
        for question, verdict in zip(asked, verdicts, strict=True):
            assert verdict is not None
            action = question.action
            if verdict.outcome == "pending_approval" and not question.whole:
                # An approval is found by the digest of the action's arguments, as decided,
                # whether or not a policy reads them.
                action = self._whole_action(question.span, span_usage(question.span))
            judged.append(JudgedSpan(question.span, action, verdict))
        return judged

    def _whole_action(self, span: Record, usage: Usage | None) -> Action:
        """The span's action with its whole arguments, sensitive values put back."""
        values = None
        if span.get("sensitive_encoding"):
            values = load_values(self.ctx, span["id"]).get("payload")
        return recorded_action(span, usage, values=values)

    def _ask(self, run: RunBeingJudged, span: Record) -> _Question:
        """What the span asks (no key: no statement's scope holds it); moves ``run`` past it."""
        usage = span_usage(span)
        # A sensitive span's values are kept apart, encrypted: they are read first only where
        # one may name the action, else once a statement that can hold it reads arguments.
        kept_apart = self.reads_args and bool(span.get("sensitive_encoding"))
        named_apart = kept_apart and _names_kept_apart(span.get("payload") or {})
        action = (
            self._whole_action(span, usage) if named_apart
            else recorded_action(span, usage, with_args=self.reads_args)
        )
        whole = named_apart or (self.reads_args and not kept_apart)
        compiled = self.active.compiled
        assert compiled is not None
        kind = action.kind
        # What the statements that can hold the request read (None: no statement can), as a
        # live decide asks: a figure none of them reads is neither computed nor sent.
        needs = compiled.needs_of(
            ("Agent", run.instance["agent_id"]), ("Action", KIND_ACTIONS[kind]),
            (RESOURCE_TYPES[kind], action.name),
        )
        if not whole and needs is not None and "args" in needs:
            action, whole = self._whole_action(span, usage), True
        question = _Question(span, action, whole=whole)
        if needs is not None:
            reads_today = "cost_today_micro_usd" in needs
            at = (
                parse_timestamp(span["started_at"])
                if reads_today or "elapsed_ms" in needs else None
            )
            elapsed = 0 if at is None or run.started is None else max(
                0, int((at - run.started).total_seconds() * 1000)
            )
            cost_today = self._cost_today(run, at) if at is not None and reads_today else 0
            context = jsontext.dumps(policy_context(
                action, run.so_far.figures(elapsed, needs), cost_today, needs,
            ))
            resource = self._resource(run, action, span["schema_name"])
            question.entities = (run.principal, resource)
            question.request = {
                "principal": run.principal["uid"],
                "action": {"type": "Action", "id": KIND_ACTIONS[kind]},
                "resource": resource["uid"], "context": context,
            }
            question.key = (
                run.scope_key, run.principal_key, kind, action.name, run.schema_version_id,
                span["schema_name"], context,
            )
        run.so_far.add(
            self._type_facts(run, span["schema_name"]), usage,
            tool_call=kind == "tool_call", priced=self.priced,
        )
        return question

    def _evaluate(self, run: RunBeingJudged, batch: _Batch, verdicts: list[Verdict | None]) -> None:
        """Evaluate ``batch`` and give each span waiting on it its verdict."""
        compiled = self.active.compiled
        assert compiled is not None
        if not batch.requests:
            return
        evaluations = compiled.evaluate_many(batch.requests, list(batch.entities.values()))
        if len(self._memo) + len(batch.requests) > _MEMO_SIZE:
            self._memo.clear()
        for key, evaluation in zip(batch.keys, evaluations, strict=True):
            verdict = self._memo[key] = verdict_of(self.active, run.scope, evaluation)
            for index in batch.waiting[key]:
                verdicts[index] = verdict


@attrs.define
class _Question:
    """What one span asks the engine: its request and entities, and the key of the request."""

    span: Record
    action: Action
    whole: bool = True
    """Whether the action holds its whole arguments (the payload, sensitive values put back)."""
    request: dict[str, Any] | None = None
    entities: tuple[dict[str, Any], ...] = ()
    key: tuple[Any, ...] | None = None


@attrs.define
class _Batch:
    """Requests the engine evaluates in one call: their entities (each uid once) and keys."""

    requests: list[dict[str, Any]] = attrs.field(factory=list)
    keys: list[tuple[Any, ...]] = attrs.field(factory=list)
    entities: dict[tuple[str, str], dict[str, Any]] = attrs.field(factory=dict)
    waiting: dict[tuple[Any, ...], list[int]] = attrs.field(factory=dict)

    def join(self, key: tuple[Any, ...], index: int) -> bool:
        """Wait on a request of the batch asked already; whether there was one."""
        found = self.waiting.get(key)
        if found is not None:
            found.append(index)
        return found is not None

    def fits(self, entities: Sequence[dict[str, Any]]) -> bool:
        """Whether ``entities`` agree with the batch's (an entity's uid names one entity)."""
        for entity in entities:
            uid = entity["uid"]
            held = self.entities.get((uid["type"], uid["id"]))
            if held is not None and held is not entity and held != entity:
                return False
        return True

    def add(self, question: _Question, index: int) -> None:
        """Add the question's request (its key new to the batch) for the span ``index``."""
        assert question.request is not None and question.key is not None
        for entity in question.entities:
            self.entities.setdefault((entity["uid"]["type"], entity["uid"]["id"]), entity)
        self.requests.append(question.request)
        self.keys.append(question.key)
        self.waiting[question.key] = [index]


def _started(instance: Record) -> datetime | None:
    started = instance.get("started_at") or instance.get("inserted_at")
    return parse_timestamp(started) if started else None
