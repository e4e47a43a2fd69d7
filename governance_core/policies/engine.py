"""The Cedar engine (``cedarpy``, the ``policies`` extra): checking policy text, evaluating sets.

Policy text is parsed once per distinct text (:func:`compile_source` keeps the last texts it
read) into its statements; an account's policies are joined into one ``cedarpy.PolicySet``
(:class:`CompiledSet`), each statement under the id ``<policy id>#<n>``, beside one statement
that permits everything. Cedar answers Deny exactly when a ``forbid`` matched and names
every matching one, so one evaluation tells every policy's part.

Rules beyond Cedar's own: a policy decides by ``forbid`` statements only (a ``permit`` could
not change an outcome, so it is refused rather than silently ignored), templates are refused,
and an error while evaluating a statement counts as that statement matching (fail closed: an
action a policy cannot judge is treated as one it forbids).

Without ``cedarpy`` the module still imports; :func:`engine_available` says whether it can
check or evaluate, and :func:`require_engine` raises ``not_implemented`` naming the extra.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from types import ModuleType
from typing import Any

import attrs

from governance_core import jsontext
from governance_core.errors import NotImplementedOperation
from governance_core.policies.schema import CEDAR_SCHEMA

cedarpy: ModuleType | None
try:
    import cedarpy
except ImportError:  # pragma: no cover - exercised by the tests that hide the extra
    cedarpy = None

__all__ = [
    "EXTRA",
    "CompiledSet",
    "CompiledSource",
    "Evaluation",
    "SourceProblem",
    "Statement",
    "Uid",
    "attributes_read",
    "check_source",
    "cedar_value",
    "compile_source",
    "engine_available",
    "require_engine",
]

EXTRA = "policies"
"""The optional extra that installs the engine: ``pip install 'governance[policies]'``."""

_BASE = "__permit_all__"
_ARGS_ERROR = re.compile(r"attribute `args\.[^`]*` in context")
_EVALUATION_ERROR = re.compile(r"while evaluating policy `([^`]*)`: (.*)", re.DOTALL)
_SCHEMA_POLICY = re.compile(r"^for policy `[^`]*`, ")
_SCHEMA_ACTION = re.compile(r' for Action::"[^"]*"')
_MAX_LONG = 2**63 - 1
_END_OF_INPUT = "end of input"


def engine_available() -> bool:
    """Whether the Cedar engine is installed."""
    return cedarpy is not None


def require_engine() -> None:
    """Raise ``not_implemented`` naming the extra when the Cedar engine is missing."""
    if cedarpy is None:
        raise NotImplementedOperation(
            f"policies need the Cedar engine: install the {EXTRA!r} extra"
            f" (pip install 'governance[{EXTRA}]')"
        )


@attrs.frozen
class SourceProblem:
    """What is wrong with policy text: the engine's message and the line it concerns."""

    message: str
    line: int | None

    def text(self) -> str:
        """The problem as one sentence: ``line 3: unexpected token `>```."""
        return self.message if self.line is None else f"line {self.line}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        """The problem as reported by the validate operation."""
        return {"message": self.message, "line": self.line}


@attrs.frozen
class Statement:
    """One statement of a policy: its position, annotations and Cedar JSON form."""

    index: int
    annotations: Mapping[str, str]
    est: Mapping[str, Any]

    @property
    def approval(self) -> str | None:
        """The ``@approval("why")`` annotation: a match holds the action for a person."""
        return self.annotations.get("approval")

    @property
    def warning(self) -> str | None:
        """The ``@warn("why")`` annotation: a match never blocks, it adds a warning."""
        return self.annotations.get("warn")

    @property
    def reason(self) -> str | None:
        """The ``@reason("why")`` annotation: the message of a match."""
        return self.annotations.get("reason")


@attrs.frozen
class CompiledSource:
    """Policy text read by the engine: its statements, in order."""

    statements: tuple[Statement, ...]


def _statement_spans(source: str) -> list[tuple[int, int]]:
    """Each statement's (start, end) offsets: text up to a ``;`` outside strings and comments.

    Trailing text holding more than white space and comments is a statement too (an
    unfinished one), so that its problems are found.
    """
    spans: list[tuple[int, int]] = []
    start, index, length = 0, 0, len(source)
    meaningful = False
    while index < length:
        char = source[index]
        if char == '"':
            meaningful = True
            index += 1
            while index < length and source[index] != '"':
                index += 2 if source[index] == "\\" else 1
        elif source.startswith("//", index):
            newline = source.find("\n", index)
            index = length - 1 if newline < 0 else newline
        elif char == ";":
            spans.append((start, index + 1))
            start, meaningful = index + 1, False
        elif not char.isspace():
            meaningful = True
        index += 1
    if meaningful:
        spans.append((start, length))
    return spans


def _line_of(source: str, offset: int) -> int:
    """The 1-based line of ``offset``, past any white space and comments there."""
    rest = source[offset:]
    stripped = re.sub(r"^(?:\s+|//[^\n]*)*", "", rest)
    return source.count("\n", 0, offset + len(rest) - len(stripped)) + 1


def _parse_error(text: str) -> str | None:
    assert cedarpy is not None
    try:
        cedarpy.PolicySet.from_str(text)
    except ValueError as error:
        return str(error)
    return None


def _locate_parse_error(source: str, spans: Sequence[tuple[int, int]], message: str) -> int:
    """The line of a parse error: the first statement that fails, then the line in it."""
    for start, end in spans:
        own = _parse_error(source[start:end])
        if own is None:
            continue
        if _END_OF_INPUT in own:
            return source.count("\n", 0, len(source[:end].rstrip())) + 1
        lines = source[start:end].split("\n")
        # The shortest prefix of whole lines failing the same way ends on the line at fault.
        for count in range(1, min(len(lines), 200) + 1):
            if _parse_error("\n".join(lines[:count])) == own:
                return _line_at(source, start) + count - 1
        return _line_of(source, start)
    return 1


def _line_at(source: str, offset: int) -> int:
    """The 1-based line on which ``offset`` lies."""
    return source.count("\n", 0, offset) + 1


def _annotations(est: Mapping[str, Any]) -> dict[str, str]:
    found = est.get("annotations") or {}
    return {str(key): "" if value is None else str(value) for key, value in found.items()}


def _without_args_tests(node: Any) -> Any:
    """The Cedar JSON ``node`` with every ``context.args has x`` made ``true``.

    The schema cannot declare an open record, so ``args`` is declared empty and a ``has`` on
    it would be typed as always false, hiding the rest of its condition from validation.
    """
    if isinstance(node, list):
        return [_without_args_tests(item) for item in node]
    if not isinstance(node, dict):
        return node
    has = node.get("has")
    if len(node) == 1 and isinstance(has, dict) and has.get("left") == _ARGS_NODE:
        return {"Value": True}
    return {key: _without_args_tests(value) for key, value in node.items()}


_ARGS_NODE = {".": {"left": {"Var": "context"}, "attr": "args"}}


def check_source(source: str) -> list[SourceProblem]:
    """Every problem the engine finds in ``source`` (none: it may be stored).

    Parsing stops at the first problem; a text that parses is then checked against the
    request schema, and every statement's problems are reported.
    """
    require_engine()
    assert cedarpy is not None
    spans = _statement_spans(source)
    if not spans:
        return [SourceProblem("the policy holds no statement", 1)]
    try:
        document = json.loads(cedarpy.policies_to_json_str(source))
    except ValueError as error:
        message = str(error)
        return [SourceProblem(message, _locate_parse_error(source, spans, message))]
    statements: dict[str, Any] = document.get("staticPolicies") or {}
    lines = [_line_of(source, start) for start, _ in spans]

    def line_of(policy_id: str) -> int | None:
        position = list(statements).index(policy_id) if policy_id in statements else -1
        return lines[position] if 0 <= position < len(lines) == len(statements) else None

    problems: list[SourceProblem] = []
    if document.get("templates"):
        problems.append(SourceProblem(
            "templates (?principal, ?resource) are not supported: name the entities", None
        ))
    for policy_id, est in statements.items():
        if est.get("effect") != "forbid":
            problems.append(SourceProblem(
                "a policy decides by forbid statements: a permit cannot change an outcome"
                " (what is not forbidden is allowed; write forbid ... unless { ... })",
                line_of(policy_id),
            ))
    if problems:
        return problems
    checked = json.dumps({
        "staticPolicies": _without_args_tests(statements), "templates": {}, "templateLinks": [],
    })
    result = cedarpy.validate_policies(cedarpy.policies_from_json_str(checked), _schema())
    seen: set[tuple[str, int | None]] = set()
    for found in result.errors:
        if _ARGS_ERROR.search(found.error):
            continue
        message = _SCHEMA_ACTION.sub("", _SCHEMA_POLICY.sub("", found.error))
        problem = SourceProblem(message, line_of(found.policy_id))
        if (problem.message, problem.line) not in seen:
            seen.add((problem.message, problem.line))
            problems.append(problem)
    # The engine reports in no fixed order: by line, then message.
    return sorted(problems, key=lambda problem: (problem.line or 0, problem.message))


@functools.cache
def _schema() -> Any:
    assert cedarpy is not None
    return cedarpy.Schema.from_str(CEDAR_SCHEMA)


@functools.lru_cache(maxsize=1024)
def compile_source(source: str) -> CompiledSource:
    """The statements of ``source`` (text that passed :func:`check_source`), parsed once."""
    require_engine()
    assert cedarpy is not None
    document = json.loads(cedarpy.policies_to_json_str(source))
    return CompiledSource(tuple(
        Statement(index, _annotations(est), est)
        for index, est in enumerate((document.get("staticPolicies") or {}).values())
    ))


@attrs.frozen
class Evaluation:
    """What one request matched: statement keys ``(policy id, index)``, and errors by key."""

    matched: tuple[tuple[str, int], ...]
    errors: Mapping[tuple[str, int], str]


class CompiledSet:
    """Policies evaluated together, each request against the statements that can hold it.

    An engine policy set of those statements is kept per principal, action and resource.
    ``sources`` maps each policy id to its compiled text.
    """

    def __init__(self, sources: Mapping[str, CompiledSource]) -> None:
        require_engine()
        assert cedarpy is not None
        static: dict[str, Any] = {}
        for policy_id, compiled in sources.items():
            for statement in compiled.statements:
                static[f"{policy_id}#{statement.index}"] = statement.est
        self.size = len(static)
        self._static = static
        self._holding: dict[tuple[Uid, Uid, Uid], tuple[str, ...]] = {}
        self._needs: dict[tuple[Uid, Uid, Uid], frozenset[str]] = {}
        self._subsets: dict[tuple[Uid, Uid, Uid], Any] = {}
        self._entities: dict[str, Any] = {}

    def _holding_names(self, key: tuple[Uid, Uid, Uid]) -> tuple[str, ...]:
        """The names of the statements whose scope (head) can hold ``key``'s entities.

        Exact for requests whose entities have no parents (every request this library
        builds): ``in E`` then means ``== E``. A statement no head holds matches nothing and
        raises no error (its conditions are not evaluated), so it need not be evaluated.
        """
        found = self._holding.get(key)
        if found is None:
            found = tuple(
                name for name, est in self._static.items()
                if _head_holds(est["principal"], key[0]) and _head_holds(est["action"], key[1])
                and _head_holds(est["resource"], key[2])
            )
            if len(self._holding) >= _KEPT_SETS:
                self._holding.clear()
            self._holding[key] = found
        return found

    def may_match(self, principal: Uid, action: Uid, resource: Uid) -> bool:
        """Whether any statement's scope (its head) can hold a request of these entities."""
        return bool(self._holding_names((principal, action, resource)))

    def needs_of(self, principal: Uid, action: Uid, resource: Uid) -> frozenset[str] | None:
        """What the statements that can hold a request of these entities read.

        Every attribute name they read (:func:`attributes_read`), or None when no statement
        can hold the request. A figure none of them reads need not be computed, nor sent.
        """
        key = (principal, action, resource)
        names = self._holding_names(key)
        if not names:
            return None
        found = self._needs.get(key)
        if found is None:
            found = attributes_read([self._static[name] for name in names])
            if len(self._needs) >= _KEPT_SETS:
                self._needs.clear()
            self._needs[key] = found
        return found

    def evaluate(
        self, request: Mapping[str, Any], entities: Sequence[Mapping[str, Any]]
    ) -> Evaluation:
        """Evaluate one request (principal, action, resource, context) with its entities.

        Only the statements whose scope can hold the request's entities are given to the
        engine (a set of them kept per principal, action and resource). The entities' parsed
        form is kept per distinct text (a run asks with the same ones again and again), and
        a ``context`` may be given as JSON text.
        """
        assert cedarpy is not None
        subset = self._subset(_request_key(request))
        if subset is None:
            return Evaluation((), {})
        asked = dict(request)
        if not isinstance(asked.get("context", ""), str):
            asked["context"] = jsontext.dumps(asked["context"])
        return _evaluation(cedarpy.is_authorized(asked, subset, self._parsed(entities)))

    def evaluate_many(
        self, requests: Sequence[Mapping[str, Any]], entities: Sequence[Mapping[str, Any]]
    ) -> list[Evaluation]:
        """Evaluate requests sharing one entity list (each uid once), in order.

        The entities are parsed once for all of them (and kept, as :meth:`evaluate` keeps
        them); the requests of one principal, action and resource are evaluated together,
        against the statements that can hold them alone.
        """
        assert cedarpy is not None
        found = [Evaluation((), {}) for _ in requests]
        if self.size == 0 or not requests:
            return found
        places: dict[tuple[Uid, Uid, Uid], list[int]] = {}
        for place, request in enumerate(requests):
            places.setdefault(_request_key(request), []).append(place)
        parsed = None
        for key, held in places.items():
            subset = self._subset(key)
            if subset is None:
                continue
            if parsed is None:
                parsed = self._parsed(entities)
            results = cedarpy.is_authorized_batch(
                [dict(requests[place]) for place in held], subset, parsed
            )
            for place, result in zip(held, results, strict=True):
                found[place] = _evaluation(result)
        return found

    def _subset(self, key: tuple[Uid, Uid, Uid]) -> Any:
        """The engine's set of the statements that can hold ``key``'s entities (None: none)."""
        names = self._holding_names(key)
        if not names:
            return None
        subset = self._subsets.get(key)
        if subset is None:
            subset = _policy_set({name: self._static[name] for name in names})
            if len(self._subsets) >= _KEPT_SETS:
                self._subsets.clear()
            self._subsets[key] = subset
        return subset

    def _parsed(self, entities: Sequence[Mapping[str, Any]]) -> Any:
        """The engine's parsed form of ``entities``, kept per distinct text."""
        assert cedarpy is not None
        text = jsontext.dumps(list(entities))
        parsed = self._entities.get(text)
        if parsed is None:
            parsed = cedarpy.Entities.from_json_str(text)
            if len(self._entities) >= _KEPT_ENTITIES:
                self._entities.clear()
            self._entities[text] = parsed
        return parsed


Uid = tuple[str, str]
"""An entity's (type, id)."""


def attributes_read(node: Any) -> frozenset[str]:
    """Every attribute name a Cedar JSON expression (or list of them) reads (``.``, ``has``)."""
    found: set[str] = set()
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(item)
        elif isinstance(item, dict):
            for key, value in item.items():
                if key in (".", "has") and isinstance(value, dict) and "attr" in value:
                    found.add(str(value["attr"]))
                pending.append(value)
    return frozenset(found)

_KEPT_SETS = 1024
"""How many per-request statement sets a compiled set keeps (then it starts again)."""
_KEPT_ENTITIES = 256
"""How many parsed entity lists a compiled set keeps (then it starts again)."""


def _policy_set(static: Mapping[str, Any]) -> Any:
    """The engine's set of the statements ``static`` (by name) beside one permitting all."""
    assert cedarpy is not None
    return cedarpy.PolicySet.from_json_str(jsontext.dumps({
        "staticPolicies": {_BASE: _permit_all(), **static}, "templates": {},
        "templateLinks": [],
    }))


def _uid(entity: Mapping[str, Any]) -> Uid:
    return str(entity.get("type")), str(entity.get("id"))


def _request_key(request: Mapping[str, Any]) -> tuple[Uid, Uid, Uid]:
    """A request's principal, action and resource: what its statement set is kept by."""
    return _uid(request["principal"]), _uid(request["action"]), _uid(request["resource"])


def _head_holds(head: Mapping[str, Any], uid: Uid) -> bool:
    """Whether a statement's principal, action or resource constraint holds ``uid``.

    Anything this does not know holds (the engine decides).
    """
    op = head.get("op")
    if op == "All":
        return True
    if op in ("==", "in") and isinstance(head.get("entity"), Mapping):
        return _uid(head["entity"]) == uid
    if op == "in" and isinstance(head.get("entities"), list):
        return uid in {_uid(entity) for entity in head["entities"]}
    if op == "is":
        inner = head.get("in")
        if head.get("entity_type") != uid[0]:
            return False
        return not isinstance(inner, Mapping) or not isinstance(inner.get("entity"), Mapping) or (
            _uid(inner["entity"]) == uid
        )
    return True


def _evaluation(result: Any) -> Evaluation:
    """What one engine answer says: the matching statements and the failing ones."""
    assert cedarpy is not None
    if result.decision == cedarpy.Decision.NoDecision:
        raise ValueError("; ".join(result.diagnostics.errors) or "no decision")
    matched = (
        tuple(_key(name) for name in result.diagnostics.reasons if name != _BASE)
        if result.decision == cedarpy.Decision.Deny else ()
    )
    errors: dict[tuple[str, int], str] = {}
    for text in result.diagnostics.errors:
        found = _EVALUATION_ERROR.search(text)
        if found is not None and found.group(1) != _BASE:
            errors[_key(found.group(1))] = found.group(2)
    return Evaluation(matched, errors)


def _key(name: str) -> tuple[str, int]:
    policy_id, _, index = name.rpartition("#")
    return policy_id, int(index)


@functools.cache
def _permit_all() -> Mapping[str, Any]:
    assert cedarpy is not None
    document = json.loads(cedarpy.policies_to_json_str("permit(principal, action, resource);"))
    est: Mapping[str, Any] = document["staticPolicies"]["policy0"]
    return est


def cedar_value(value: Any) -> Any:
    """A JSON value as Cedar reads it: nulls dropped, fractions as Cedar decimals.

    Cedar has no null and no floating point: a null member or item is left out, a whole
    float is an integer, a number with at most four decimals is a ``decimal`` (compared with
    ``.greaterThan(decimal("100.0"))``), and any other number, or an integer beyond 64 bits,
    is its text.
    """
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return value if -_MAX_LONG - 1 <= value <= _MAX_LONG else str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, Mapping):
        return {str(k): cedar_value(v) for k, v in value.items() if v is not None}
    if isinstance(value, Iterable):
        return [cedar_value(item) for item in value if item is not None]
    return str(value)


def _number(value: float) -> Any:
    if value.is_integer() and abs(value) <= _MAX_LONG:
        return int(value)
    try:
        exact = Decimal(repr(value))
    except InvalidOperation:
        return repr(value)
    exponent = exact.as_tuple().exponent
    if isinstance(exponent, int) and exponent >= -4 and abs(exact) < 922337203685477:
        text = format(exact, "f")
        return {"__extn": {"fn": "decimal", "arg": text if "." in text else f"{text}.0"}}
    return repr(value)
