"""Checking payloads against the JSON Schemas a schema version declares (pure, cached).

Payloads are never refused for not matching: the result of a check is recorded on the span
(decisions 13). A result is ``{"status", "message", "errors"?, "skipped"?}``:

- ``valid``: the payload matches; ``invalid``: it does not, ``errors`` lists up to
  :data:`MAX_ERRORS` of ``{"path", "message"}`` (``path`` a JSON Pointer into the payload);
- ``unchecked``: no check was possible (no schema, an invalid schema, a ``$ref`` that does not
  resolve inside the schema); ``message`` says why;
- ``skipped`` lists the patterns (and ``unevaluatedProperties``) that were not applied because
  their cost on this payload was too high (see :mod:`governance_core.rules.safe_regex`); a
  skipped pattern counts as matching.

The work a schema can cause is bounded twice. :func:`schema_cost` counts, with references
followed and memoised, the most subschema visits one payload value can receive; a schema
over :data:`MAX_SCHEMA_VISITS` is refused when registered (chains of ``allOf`` over
``$ref`` grow that count exponentially with a schema's length). At run time every keyword
``jsonschema`` evaluates spends from :data:`VALIDATION_STEPS` (a reference
:data:`REFERENCE_STEPS`); a check that spends it all stops and is ``unchecked``. The count
is of work, not of time, so results do not depend on the machine's load. ``jsonschema-rs``
runs only where its work is bounded by the payload's size (:data:`FAST_VISITS`,
:data:`FAST_WORK`).

Validators are Draft 2020-12, built once per schema content and cached: building one costs
about 10 ms, using a cached one tens of microseconds. Most payloads match, so a schema whose
keywords the two agree on is first tried with ``jsonschema-rs`` (a Rust validator, well under
a microsecond): a match there is the result. Any other outcome, and every schema using a
keyword whose meaning differs between them (regular expressions, ``format``, ``multipleOf``
on floats, references), is checked by ``jsonschema``, which alone words
the errors.

Schemas are untrusted: a reference (``$ref``, ``$dynamicRef``, relative to any ``$id``) is
resolved only inside the schema itself and the bundled meta-schemas, through a ``referencing``
registry that retrieves nothing, so no schema can make the server open a connection or a file.
:func:`outside_references` lists the references that resolve nowhere, for the schema's
``*_validation`` object.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import json
import math
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import attrs
import jsonschema_rs
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource, Unresolvable
from referencing.jsonschema import DRAFT202012, SchemaRegistry

from governance_core.rules.safe_regex import RegexBudget, guarded

__all__ = [
    "ANALYSIS_ENTRIES",
    "ANALYSED_DEPTH",
    "FAST_VISITS",
    "FAST_WORK",
    "MAX_ERRORS",
    "MAX_SCHEMA_VISITS",
    "OFFLINE_REGISTRY",
    "REFERENCE_STEPS",
    "VALIDATION_STEPS",
    "PayloadCheck",
    "SpanType",
    "outside_references",
    "payload_check",
    "schema_cost",
    "schema_cost_problem",
    "validate_payload",
]

MAX_ERRORS = 20
MAX_MESSAGE = 300
UNEVALUATED = "unevaluatedProperties"

MAX_SCHEMA_VISITS = 1000
"""Most subschema visits a schema may cause at one payload value (:func:`schema_cost`)."""

ANALYSED_DEPTH = 64
"""Payload depth :func:`schema_cost` looks down to (the HTTP interface's nesting limit)."""

ANALYSIS_ENTRIES = 200_000
"""Most (subschema, depth) pairs :func:`schema_cost` evaluates; a larger schema is refused."""

VALIDATION_STEPS = 20_000
"""Keyword evaluations one payload check may spend in ``jsonschema`` before it stops."""

REFERENCE_STEPS = 16
"""What following a ``$ref`` spends: resolving one costs about as much as 16 keywords."""

FAST_VISITS = 8
"""``jsonschema-rs`` runs whatever the payload's size on schemas of at most this cost."""

FAST_WORK = 10_000_000
"""Above :data:`FAST_VISITS`, most visits (cost times payload values) ``jsonschema-rs`` makes."""


def _retrieve_nothing(uri: str) -> Resource[Any]:
    raise NoSuchResource(ref=uri)  # type: ignore[call-arg]


OFFLINE_REGISTRY: SchemaRegistry = Registry(retrieve=_retrieve_nothing)  # type: ignore[call-arg]
"""A registry that never retrieves: references resolve inside the schema or not at all."""

_budget: ContextVar[RegexBudget | None] = ContextVar("regex_budget", default=None)
_steps: ContextVar[_Steps | None] = ContextVar("validation_steps", default=None)


class _Steps:
    """The keyword evaluations one check may still spend."""

    __slots__ = ("remaining",)

    def __init__(self, total: int) -> None:
        self.remaining = total


class _OutOfSteps(Exception):
    """A check spent its :data:`VALIDATION_STEPS`."""


PayloadCheck = Callable[[object], dict[str, Any]]
"""A prepared check of payloads against one schema: ``check(payload) -> result``."""


def validate_payload(schema: object, payload: object) -> dict[str, Any]:
    """Check ``payload`` against the JSON Schema ``schema``; the result, never an error."""
    return payload_check(schema)(payload)


def payload_check(schema: object) -> PayloadCheck:
    """Prepare the check of payloads against ``schema`` (see :func:`validate_payload`).

    Preparing reads the schema once; a caller that checks many payloads against one schema
    that never changes (a span type of a stored schema version) keeps the check.
    """
    if schema is None:
        return functools.partial(_fixed, "no schema is declared for this payload")
    try:
        text = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    except (TypeError, ValueError):
        return functools.partial(_fixed, "the schema is not JSON")
    checker = _checker(text)
    if isinstance(checker, str):
        return functools.partial(_fixed, checker)
    return functools.partial(_check, checker)


@attrs.frozen
class SpanType:
    """A span type of a schema version (its declaration ``entry``), its payload checks made.

    Schema versions never change once stored, so one is prepared per process and type (see
    :func:`governance_core.domain.runs.prepared_span_type`): the schemas are read once, not on
    every span.
    """

    entry: dict[str, Any]
    check_params: PayloadCheck
    check_result: PayloadCheck

    @classmethod
    def prepare(cls, entry: dict[str, Any]) -> SpanType:
        """Prepare the span type declared by ``entry``."""
        return cls(
            entry, payload_check(entry.get("params_schema")),
            payload_check(entry.get("result_schema")),
        )


def _fixed(message: str, payload: object) -> dict[str, Any]:
    return _unchecked(message)


def _check(checker: _Checker, payload: object) -> dict[str, Any]:
    if (
        checker.fast is not None
        and _fast_allowed(checker.visits, payload)
        and _matches_fast(checker.fast, payload)
    ):
        return {"status": "valid", "message": None}
    budget = RegexBudget()
    token = _budget.set(budget)
    steps_token = _steps.set(_Steps(VALIDATION_STEPS))
    try:
        validator = checker.for_payload(payload)
        errors = list(itertools.islice(validator.iter_errors(payload), MAX_ERRORS))  # type: ignore[arg-type]
    except _OutOfSteps:
        return _unchecked(
            f"the check stopped after {VALIDATION_STEPS} steps: the schema costs too much on "
            "this payload"
        )
    except Unresolvable as error:
        return _unchecked(
            f"the schema's reference {_short(str(error.ref))!r} does not resolve inside the "
            "schema; references are never fetched"
        )
    # The schema is untrusted: whatever the validator cannot get through (an unresolvable
    # $ref, a recursion without end) is reported on the result, never raised to the writer.
    except Exception as error:
        return _unchecked(f"the payload could not be checked: {_short(str(error))}")
    finally:
        _steps.reset(steps_token)
        _budget.reset(token)
    skipped = sorted(budget.skipped)
    if validator is not checker.full:
        skipped.append(UNEVALUATED)
    result: dict[str, Any] = {"status": "invalid" if errors else "valid", "message": None}
    if errors:
        result["message"] = _short(errors[0].message)
        result["errors"] = [
            {"path": _pointer(error.absolute_path), "message": _short(error.message)}
            for error in errors
        ]
    if skipped:
        result["skipped"] = skipped
    return result


def _unchecked(message: str) -> dict[str, Any]:
    return {"status": "unchecked", "message": message}


def _short(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 3] + "..."


def _pointer(path: Any) -> str:
    return "".join("/" + str(part).replace("~", "~0").replace("/", "~1") for part in path)


def _current_budget() -> RegexBudget:
    budget = _budget.get()
    return budget if budget is not None else RegexBudget()


# -- keywords that search with regular expressions, through the budget ---------------------
def _pattern(
    validator: Any, pattern: str, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "string"):
        return
    if _current_budget().search(pattern, instance) is False:
        shown = instance if len(instance) <= 60 else instance[:57] + "..."
        yield ValidationError(f"{shown!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: Mapping[str, Any], instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    budget = _current_budget()
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if budget.search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    budget = _current_budget()
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    # A key whose pattern check was skipped counts as matched, so it is never reported.
    extras = [
        key for key in instance
        if key not in properties
        and not any(budget.search(pattern, key) is not False for pattern in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        yield ValidationError(f"additional properties are not allowed ({listed} unexpected)")


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    # jsonschema compares unorderable items pairwise (quadratic); a canonical text of each
    # item finds duplicates in one pass.
    if not unique or not validator.is_type(instance, "array"):
        return
    seen: set[str] = set()
    for item in instance:
        key = json.dumps(_canonical_number(item), sort_keys=True, separators=(",", ":"))
        if key in seen:
            yield ValidationError("array items are not unique")
            return
        seen.add(key)


def _canonical_number(value: Any) -> Any:
    """``value`` with integral floats as ints: JSON Schema counts 1 and 1.0 as equal."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: _canonical_number(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_canonical_number(item) for item in value]
    return value


def _counted(keyword: str, check: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a keyword's check so each evaluation spends from the check's steps first."""
    cost = REFERENCE_STEPS if keyword in ("$ref", "$dynamicRef") else 1

    def counted(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        steps = _steps.get()
        if steps is not None:
            steps.remaining -= cost
            if steps.remaining < 0:
                raise _OutOfSteps
        return check(validator, value, instance, schema)

    counted.__name__ = getattr(check, "__name__", keyword)
    return counted


_KEYWORDS: dict[str, Callable[..., Any]] = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "uniqueItems": _unique_items,
}

_GuardedValidator = validators.create(
    meta_schema=Draft202012Validator.META_SCHEMA,
    validators={keyword: _counted(keyword, check) for keyword, check in _KEYWORDS.items()},
    type_checker=Draft202012Validator.TYPE_CHECKER,
    format_checker=Draft202012Validator.FORMAT_CHECKER,
)


@attrs.frozen
class _Checker:
    """Validators for one schema.

    ``lenient`` leaves out ``unevaluatedProperties``, for payloads whose keys are too long for
    the schema's ``patternProperties`` (jsonschema evaluates those inside
    ``unevaluatedProperties`` with plain ``re``). ``visits`` is the schema's
    :func:`schema_cost`.
    """

    full: Validator
    visits: float
    lenient: Validator | None = None
    key_limit: int = 0
    fast: Any = None

    def for_payload(self, payload: object) -> Validator:
        """Return the validator that is safe to run on ``payload``."""
        if self.lenient is None or _longest_key(payload) <= self.key_limit:
            return self.full
        return self.lenient


@functools.lru_cache(maxsize=512)
def _checker(text: str) -> _Checker | str:
    """Build the validators for the schema whose canonical JSON is ``text``, or say why not."""
    schema = json.loads(text)
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as error:
        return f"the schema is not a valid JSON Schema: {_short(error.message)}"
    full = _GuardedValidator(schema, registry=OFFLINE_REGISTRY)
    visits = schema_cost(schema)
    patterns = set(_keys_of(schema, "patternProperties"))
    if not patterns or not _has_key(schema, UNEVALUATED):
        return _Checker(full, visits, fast=_fast_validator(schema))
    key_limit = min(guarded(pattern).max_length for pattern in patterns)
    lenient = _GuardedValidator(_without(schema, UNEVALUATED), registry=OFFLINE_REGISTRY)
    return _Checker(full, visits, lenient, key_limit)


def _fast_allowed(visits: float, payload: object) -> bool:
    """Whether ``jsonschema-rs``'s work on ``payload`` is bounded (it cannot be stopped)."""
    if visits <= FAST_VISITS:
        return True
    # A payload of n values is at least 2n - 1 characters of JSON.
    values = (len(json.dumps(payload, separators=(",", ":"), default=str)) + 1) // 2
    return visits * values <= FAST_WORK


# Keywords whose meaning jsonschema-rs and jsonschema do not share exactly: regular
# expressions (ECMA-262 against Python's re), formats, float division, and references (a
# reference cycle is endless to one, a match to the other).
_NOT_SHARED = frozenset({
    "pattern", "patternProperties", "propertyNames", "format", "multipleOf", "$id", "$anchor",
    "$ref",
    "$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor", "$schema",
    "unevaluatedProperties", "unevaluatedItems", "contentEncoding", "contentMediaType",
    "contentSchema", "$vocabulary",
})


def _shared_meaning(schema: Any) -> bool:
    """Whether every keyword of ``schema`` means the same to jsonschema-rs and jsonschema."""
    if isinstance(schema, dict):
        return not any(
            key in _NOT_SHARED or not _shared_meaning(value) for key, value in schema.items()
        )
    if isinstance(schema, list):
        return all(_shared_meaning(item) for item in schema)
    return True


def _refuse_retrieval(uri: str) -> Any:
    raise ValueError(f"{uri} is never retrieved")


def _fast_validator(schema: Any) -> Any:
    """A jsonschema-rs validator for a schema of shared keywords only; None otherwise."""
    if not _shared_meaning(schema):
        return None
    try:
        return jsonschema_rs.Draft202012Validator(schema, retriever=_refuse_retrieval)
    except Exception:
        return None


def _matches_fast(fast: Any, payload: object) -> bool:
    """Whether jsonschema-rs finds ``payload`` matching (False when it cannot tell)."""
    try:
        return bool(fast.is_valid(payload))
    except Exception:
        return False


# -- the most work a schema can cause ---------------------------------------------------------
# Keywords that apply subschemas to the value itself, and those that apply them to its
# members or items.
_IN_PLACE_ONE = ("not", "if", "then", "else")
_IN_PLACE_LISTS = ("allOf", "anyOf", "oneOf")
_IN_PLACE_MAPS = ("dependentSchemas",)
_REFERENCES = ("$ref", "$dynamicRef")
# At most one of these applies to a given member or item (by name, by index, or by type).
_EXCLUSIVE_MAPS = ("properties",)
_EXCLUSIVE_LISTS = ("prefixItems",)
_EXCLUSIVE_ONE = ("items",)
# Each of these may apply to the same member or item as the others.
_EVERY_MAPS = ("patternProperties",)
_EVERY_ONE = (
    "additionalProperties", "unevaluatedProperties", "unevaluatedItems", "contains",
    "propertyNames",
)
_UNEVALUATED = ("unevaluatedProperties", "unevaluatedItems")


def schema_cost(schema: object) -> float:
    """The most subschema visits one payload value can receive from ``schema`` (inf: no end).

    References are followed (inside the schema only) and each (subschema, depth) pair is
    counted once, so a chain of K ``allOf`` pairs over ``$ref`` costs about 2**K to evaluate
    and K steps to count. Keywords that apply to a value's members or items move one level
    down; of those, the ones that cannot apply to the same member (``properties`` by name,
    ``prefixItems``/``items`` by index) count their largest, the others add up. A subschema
    with ``unevaluated*`` counts its in-place keywords twice (``jsonschema`` evaluates them
    again to find what they evaluated). A reference cycle that stays on one value costs
    inf, as does a schema too large to count (:data:`ANALYSIS_ENTRIES`). Payloads are
    assumed at most :data:`ANALYSED_DEPTH` deep. The count needs no recursion, so no schema
    can exhaust the interpreter's stack.
    """
    if not isinstance(schema, dict):
        return 1.0
    try:
        resource = DRAFT202012.create_resource(schema)
        resolver = SPECIFICATIONS.combine(OFFLINE_REGISTRY).resolver_with_root(resource)
    except Exception:
        return 1.0
    counter = _CostCounter()
    worst = 0.0
    for depth in range(ANALYSED_DEPTH + 1):
        visits = counter.visits(schema, resolver, depth)
        worst = max(worst, visits)
        if visits == 0 or worst > MAX_SCHEMA_VISITS:
            break
    return worst


def schema_cost_problem(schema: object) -> str | None:
    """Why ``schema`` is refused for the work it can cause, or None (see :func:`schema_cost`)."""
    cost = schema_cost(schema)
    if cost <= MAX_SCHEMA_VISITS:
        return None
    times = "without end" if math.isinf(cost) else f"{int(cost)} times or more"
    return (
        f"the schema can check one payload value {times} (through allOf, anyOf, oneOf, not, "
        f"if, unevaluated* or references); at most {MAX_SCHEMA_VISITS} checks are allowed"
    )


@attrs.frozen
class _Applies:
    """What one subschema applies: to the value itself, and to its members or items."""

    in_place: list[tuple[Any, Any]]
    exclusive: list[tuple[Any, Any]]
    every: list[tuple[Any, Any]]
    twice: bool


_Task = tuple[Any, Any, int]


class _CostCounter:
    """Visit counts of one schema's subschemas, by subschema and payload depth, memoised."""

    def __init__(self) -> None:
        self._counts: dict[tuple[int, int], float] = {}
        self._applies: dict[int, _Applies] = {}

    def visits(self, node: Any, resolver: Any, depth: int) -> float:
        """Visits ``node`` causes at one payload value ``depth`` levels below the one it gets."""
        stack: list[_Task] = [(node, resolver, depth)]
        expanded: set[tuple[int, int]] = set()
        while stack:
            current, base, level = stack[-1]
            key = (id(current), level)
            if not isinstance(current, dict) or key in self._counts:
                stack.pop()
                continue
            applies = self._applied(current, base)
            needed = _needed(applies, level)
            missing = [task for task in needed if _pending(task, self._counts)]
            if not missing:
                self._counts[key] = _combine(applies, level, self._counts)
                expanded.discard(key)
                stack.pop()
                continue
            if key in expanded or any((id(t[0]), t[2]) in expanded for t in missing):
                # A dependency is still open below this very subschema: a cycle on one value.
                self._counts[key] = math.inf
                expanded.discard(key)
                stack.pop()
                continue
            if len(self._counts) + len(expanded) >= ANALYSIS_ENTRIES:
                return math.inf
            expanded.add(key)
            stack.extend(missing)
        return _value(node, depth, self._counts)

    def _applied(self, node: dict[str, Any], resolver: Any) -> _Applies:
        known = self._applies.get(id(node))
        if known is not None:
            return known
        # A subschema with a malformed $id keeps its parent's base; the meta-schema check
        # reports the $id.
        with contextlib.suppress(Exception):
            resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
        in_place = [(child, resolver) for child in _in_place(node)]
        for keyword in _REFERENCES:
            reference = node.get(keyword)
            if isinstance(reference, str):
                try:
                    found = resolver.lookup(reference)
                except Exception:
                    continue
                in_place.append((found.contents, found.resolver))
        applies = _Applies(
            in_place=in_place,
            exclusive=[
                (child, resolver)
                for child in _children(node, _EXCLUSIVE_MAPS, _EXCLUSIVE_LISTS, _EXCLUSIVE_ONE)
            ],
            every=[(child, resolver) for child in _children(node, _EVERY_MAPS, (), _EVERY_ONE)],
            twice=any(keyword in node for keyword in _UNEVALUATED),
        )
        self._applies[id(node)] = applies
        return applies


def _needed(applies: _Applies, depth: int) -> list[_Task]:
    tasks = [(child, resolver, depth) for child, resolver in applies.in_place]
    if depth > 0:
        tasks.extend(
            (child, resolver, depth - 1) for child, resolver in applies.exclusive + applies.every
        )
    return tasks


def _pending(task: _Task, counts: dict[tuple[int, int], float]) -> bool:
    return isinstance(task[0], dict) and (id(task[0]), task[2]) not in counts


def _value(node: Any, depth: int, counts: dict[tuple[int, int], float]) -> float:
    if isinstance(node, dict):
        return counts[(id(node), depth)]
    return 1.0 if depth == 0 else 0.0


def _combine(applies: _Applies, depth: int, counts: dict[tuple[int, int], float]) -> float:
    in_place = sum(_value(child, depth, counts) for child, _ in applies.in_place)
    count = (1.0 if depth == 0 else 0.0) + (2 if applies.twice else 1) * in_place
    if depth > 0:
        count += max(
            (_value(child, depth - 1, counts) for child, _ in applies.exclusive), default=0.0
        )
        count += sum(_value(child, depth - 1, counts) for child, _ in applies.every)
    return count


def _in_place(node: dict[str, Any]) -> Iterator[Any]:
    return _children(node, _IN_PLACE_MAPS, _IN_PLACE_LISTS, _IN_PLACE_ONE)


def _children(
    node: dict[str, Any], maps: tuple[str, ...], lists: tuple[str, ...], ones: tuple[str, ...]
) -> Iterator[Any]:
    for keyword in maps:
        value = node.get(keyword)
        if isinstance(value, dict):
            yield from value.values()
    for keyword in lists:
        value = node.get(keyword)
        if isinstance(value, list):
            yield from value
    for keyword in ones:
        if keyword in node:
            yield node[keyword]


def outside_references(schema: object) -> list[str]:
    """The ``$ref`` and ``$dynamicRef`` values of ``schema`` that do not resolve inside it.

    Each reference is resolved against its base URI (the nearest enclosing ``$id``) within the
    schema and the bundled meta-schemas; nothing is retrieved.
    """
    if not isinstance(schema, dict | bool):
        return []
    try:
        resource = DRAFT202012.create_resource(schema)
        registry = SPECIFICATIONS.combine(OFFLINE_REGISTRY)
        resolver = registry.resolver_with_root(resource)
    # An $id that is not a string, for one, is the meta-schema check's to report.
    except Exception:
        return []
    found: set[str] = set()
    _collect_outside(resource, resolver, found)
    return sorted(found)


def _collect_outside(resource: Resource[Any], resolver: Any, found: set[str]) -> None:
    try:
        resolver = resolver.in_subresource(resource)
    except Exception:
        return
    contents = resource.contents
    if isinstance(contents, dict):
        for keyword in ("$ref", "$dynamicRef"):
            reference = contents.get(keyword)
            if not isinstance(reference, str):
                continue
            try:
                resolver.lookup(reference)
            except Exception:
                found.add(reference)
    for subresource in resource.subresources():
        _collect_outside(subresource, resolver, found)


def _keys_of(schema: Any, keyword: str) -> Iterator[str]:
    """Yield the keys of every ``keyword`` object anywhere in ``schema``."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            if key == keyword and isinstance(value, dict):
                yield from value
            yield from _keys_of(value, keyword)
    elif isinstance(schema, list):
        for item in schema:
            yield from _keys_of(item, keyword)


def _has_key(schema: Any, keyword: str) -> bool:
    if isinstance(schema, dict):
        return keyword in schema or any(_has_key(value, keyword) for value in schema.values())
    if isinstance(schema, list):
        return any(_has_key(item, keyword) for item in schema)
    return False


def _without(schema: Any, keyword: str) -> Any:
    if isinstance(schema, dict):
        return {key: _without(value, keyword) for key, value in schema.items() if key != keyword}
    if isinstance(schema, list):
        return [_without(item, keyword) for item in schema]
    return schema


def _longest_key(payload: Any) -> int:
    if isinstance(payload, dict):
        return max(
            (max(len(key), _longest_key(value)) for key, value in payload.items()), default=0
        )
    if isinstance(payload, list):
        return max((_longest_key(item) for item in payload), default=0)
    return 0
