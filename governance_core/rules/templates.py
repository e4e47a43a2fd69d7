"""Summary templates (decisions 12): untrusted Liquid or Jinja text rendered safely.

Span, quality and alert schemas may carry a template that renders a one-line summary of a
payload. Templates come from clients, so they are untrusted:

- They run in Jinja2's immutable sandbox: no attribute starting with ``_`` (``__class__``,
  ``__mro__``), no mutation of lists or dicts, and only a short list of callables (macros,
  ``range``, ``dict``, ``namespace``, ``loop.cycle`` and read-only ``str``, ``dict`` and
  ``list`` methods). A forbidden access makes the render fail, which yields no summary.
- Every render has an operation budget (:data:`OPERATION_BUDGET`). The compiled template is
  instrumented: each loop iteration, macro call, filter, call, arithmetic operation,
  comparison and string concatenation spends from it, in proportion to the size of the data
  it touches; sizes of repeated sequences and joins are charged before they are built, so
  ``'a' * 10**9`` fails before allocating. ``range`` is capped at :data:`MAX_RANGE` items
  and integers at :data:`MAX_INT_BITS` bits. An exhausted budget fails the render.
- Output is streamed and capped at :data:`MAX_OUTPUT_CHARS`: a longer summary is cut to that
  length, its last character replaced by an ellipsis (a cut summary is more useful than none).

Liquid (the language existing schemas were written in) is translated to Jinja by a small
preprocessor working on tag and expression tokens, never inside string literals:
``{% elsif %}``, ``{% assign x = ... %}``, ``{% unless %}``, ``{% case %}/{% when %}``,
``{% capture %}``, ``{% comment %}``, ``{% echo %}``, ``for ... limit: offset: reversed``,
ranges ``(1..n)``, ``contains``, ``<>``, ``nil``, ``empty``/``blank``, ``forloop.*``, the
``.size``/``.first``/``.last`` properties and filter arguments after a colon
(``{{ x | default: "n/a" }}``, ``truncate: 20``, keyword arguments ``allow_false: true``).
The Liquid filters size, first, last, join, split, strip, lstrip, rstrip, truncate,
truncatewords, default, plus, minus, times, divided_by, modulo, upcase, downcase, append,
prepend, replace and remove follow Liquid's meaning where it differs from Jinja's (``join``
defaults to a space, ``default`` also replaces nil, false and empty strings, ``truncate``
counts the ellipsis in the length). Variables set by ``assign`` and ``capture`` live in one
scope as in Liquid, so a total accumulated in a loop is there after it. A missing value
renders as "", as do nulls, and equals ``nil``; booleans render as ``true``/``false`` and
objects and arrays as JSON. Truthiness is Jinja's (``0`` and ``""`` are false; Liquid holds
them true). Jinja syntax works as well. Unsupported Liquid (``increment``, ``tablerow``,
``include``/``render``, the ``date`` filter) makes the template invalid.
"""

from __future__ import annotations

import functools
import json
import math
import re
import types
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from contextvars import ContextVar
from decimal import Decimal
from typing import Any, Final, cast

import attrs
from jinja2 import ChainableUndefined, Template, Undefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.runtime import BlockReference, Context, LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer

__all__ = [
    "MAX_INT_BITS",
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "MAX_TEMPLATE_CHARS",
    "OPERATION_BUDGET",
    "check_template",
    "liquid_to_jinja",
    "render_template",
]

MAX_OUTPUT_CHARS: Final = 4096
"""Longest summary; longer output is cut to this length, ending in an ellipsis."""

MAX_TEMPLATE_CHARS: Final = 16384
"""Longest template accepted; a longer one is invalid."""

OPERATION_BUDGET: Final = 250_000
"""Work units one render may spend (about one unit per node evaluated or item touched)."""

MAX_RANGE: Final = 10_000
"""Most items ``range`` (and a Liquid ``(a..b)`` range) may produce."""

MAX_INT_BITS: Final = 4096
"""Largest integer ``*``, ``**`` and ``times`` may produce."""

_CHARS_PER_UNIT: Final = 64
_ELLIPSIS: Final = "\u2026"


# --------------------------------------------------------------------------- the budget


class _BudgetExceeded(Exception):
    """The render spent its operation budget."""


class _NotRendering(Exception):
    """Raised by metered code outside a render, so Jinja never folds it at compile time."""


class _Budget:
    __slots__ = ("remaining",)

    def __init__(self, units: int) -> None:
        self.remaining = units

    def spend(self, units: int) -> None:
        self.remaining -= units
        if self.remaining < 0:
            raise _BudgetExceeded("the template exceeded its operation budget")


# The budget of the render in progress on this thread or task; None outside renders.
_BUDGET: ContextVar[_Budget | None] = ContextVar("governance_template_budget", default=None)


def _budget() -> _Budget:
    budget = _BUDGET.get()
    if budget is None:
        raise _NotRendering
    return budget


def _spend(units: int) -> None:
    _budget().spend(units)


def _units(value: object) -> int:
    """Charge for touching a value shallowly: its characters or its items."""
    if isinstance(value, str):
        return len(value) // _CHARS_PER_UNIT
    if isinstance(value, (list, tuple, dict, set, frozenset)):
        return len(value)
    return 0


def _charge_deep(value: object) -> None:
    """Charge for every item and character of a nested value, stopping when over budget."""
    budget = _budget()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            budget.spend(1 + len(item) // _CHARS_PER_UNIT)
        elif isinstance(item, Mapping):
            budget.spend(1 + len(item))
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            budget.spend(1 + len(item))
            stack.extend(item)


# --------------------------------------------------------------------------- values


class _Undefined(ChainableUndefined):
    """A missing value: renders "", chains (``missing.a.b``), equals nil, orders as false."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return other is None or isinstance(other, Undefined)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(None)

    def _false(self, other: object) -> bool:
        return False

    __lt__ = __le__ = __gt__ = __ge__ = _false  # type: ignore[assignment]


def _json_default(value: object) -> object:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, Undefined):
        return None
    return str(value)


def _to_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, default=_json_default, sort_keys=False)


def _display(value: object) -> str:
    """Render a value the Liquid way: nil and missing as "", booleans lowercase, JSON."""
    if value is None or isinstance(value, Undefined):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (Mapping, list, tuple)):
        if _BUDGET.get() is not None:
            _charge_deep(value)
        return _to_json(value)
    return str(value)


def _finalize(value: object) -> object:
    if isinstance(value, str):
        if _BUDGET.get() is not None:
            _spend(len(value) // _CHARS_PER_UNIT)
        return value
    return _display(value)


def _number(value: object) -> int | float | Decimal:
    """Coerce to a number the Liquid way: numeric strings parse, anything else is 0."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float, Decimal)):
        return value
    if isinstance(value, str):
        text = value.strip()
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return 0
    return 0


def _integer(value: object) -> int:
    number = _number(value)
    if isinstance(number, float) and not math.isfinite(number):
        return 0
    return int(number)


def _check_int_product(left: object, right: object) -> None:
    if (
        isinstance(left, int)
        and isinstance(right, int)
        and left.bit_length() + right.bit_length() > MAX_INT_BITS
    ):
        raise SecurityError("the product is too large")


def _check_binop(operator: str, left: object, right: object) -> None:
    """Refuse or pre-charge an operation before it allocates its result."""
    if operator == "*":
        _check_int_product(left, right)
        sequence, times = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(sequence, (str, list, tuple)) and isinstance(times, int):
            _spend(_units(sequence) * max(times, 0) + max(times, 0) // _CHARS_PER_UNIT)
    elif operator == "**":
        if (
            isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and abs(left) > 1
            and left.bit_length() * right > MAX_INT_BITS
        ):
            raise SecurityError("the power is too large")
    elif operator == "+":
        if isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _spend(_units(left) + _units(right))
    elif operator == "%" and isinstance(left, str):
        raise SecurityError("string formatting with % is not available in templates")


def _safe_range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise SecurityError(f"range is limited to {MAX_RANGE} items")
    return numbers


def _liquid_range(start: object, stop: object) -> range:
    return _safe_range(_integer(start), _integer(stop) + 1)


@attrs.frozen(eq=False)
class _Emptiness:
    """Liquid's ``empty`` and ``blank``: equal to empty strings, arrays and objects."""

    blank: bool

    def __eq__(self, other: object) -> bool:
        if isinstance(other, _Emptiness):
            return other.blank == self.blank
        if other is None or isinstance(other, Undefined) or other is False:
            return self.blank
        if isinstance(other, str):
            return other.strip() == "" if self.blank else other == ""
        if isinstance(other, (list, tuple, Mapping)):
            return len(other) == 0
        return False

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return hash(self.blank)

    def __str__(self) -> str:
        return ""


# --------------------------------------------------------------------------- filters


def _size(value: object) -> int:
    if isinstance(value, (str, list, tuple, Mapping)):
        return len(value)
    return 0


def _first(value: object) -> object:
    if isinstance(value, (str, list, tuple)):
        return value[0] if value else None
    return None


def _last(value: object) -> object:
    if isinstance(value, (str, list, tuple)):
        return value[-1] if value else None
    return None


def _join(value: object, separator: object = " ") -> str:
    if isinstance(value, str) or not isinstance(value, Iterable):
        return _display(value)
    glue = _display(separator)
    parts = [_display(item) for item in value]
    _spend((sum(map(len, parts)) + len(glue) * max(len(parts) - 1, 0)) // _CHARS_PER_UNIT)
    return glue.join(parts)


def _split(value: object, separator: object = " ") -> list[str]:
    text, glue = _display(value), _display(separator)
    if glue == " ":
        return text.split()
    if glue == "":
        return list(text)
    return text.split(glue)


def _strip(value: object) -> str:
    return _display(value).strip()


def _lstrip(value: object) -> str:
    return _display(value).lstrip()


def _rstrip(value: object) -> str:
    return _display(value).rstrip()


def _truncate(value: object, length: object = 50, ellipsis: object = "...") -> str:
    text, end, limit = _display(value), _display(ellipsis), _integer(length)
    if len(text) <= limit:
        return text
    return text[: max(limit - len(end), 0)] + end


def _truncatewords(value: object, words: object = 15, ellipsis: object = "...") -> str:
    text, end, limit = _display(value), _display(ellipsis), max(_integer(words), 1)
    parts = text.split()
    if len(parts) <= limit:
        return text
    return " ".join(parts[:limit]) + end


def _default(
    value: object, fallback: object = "", boolean: object = False, allow_false: object = False
) -> object:
    if value is False:
        return value if allow_false else fallback
    if value is None or isinstance(value, Undefined):
        return fallback
    if isinstance(value, (str, list, tuple, Mapping)) and len(value) == 0:
        return fallback
    return value


def _plus(value: object, other: object) -> object:
    return _number(value) + _number(other)  # type: ignore[operator]


def _minus(value: object, other: object) -> object:
    return _number(value) - _number(other)  # type: ignore[operator]


def _times(value: object, other: object) -> object:
    left, right = _number(value), _number(other)
    _check_int_product(left, right)
    return left * right  # type: ignore[operator]


def _divided_by(value: object, other: object) -> object:
    left, right = _number(value), _number(other)
    if isinstance(left, int) and isinstance(right, int):
        return left // right
    return left / right  # type: ignore[operator]


def _modulo(value: object, other: object) -> object:
    return _number(value) % _number(other)  # type: ignore[operator]


def _upcase(value: object) -> str:
    return _display(value).upper()


def _downcase(value: object) -> str:
    return _display(value).lower()


def _append(value: object, suffix: object) -> str:
    return _display(value) + _display(suffix)


def _prepend(value: object, prefix: object) -> str:
    return _display(prefix) + _display(value)


def _replace(value: object, old: object, new: object = "", count: object = None) -> str:
    text, before, after = _display(value), _display(old), _display(new)
    occurrences = text.count(before) if before else len(text) + 1
    if count is not None:
        occurrences = min(occurrences, max(_integer(count), 0))
    growth = occurrences * max(len(after) - len(before), 0)
    _spend((len(text) + growth) // _CHARS_PER_UNIT)
    return text.replace(before, after, -1 if count is None else max(_integer(count), 0))


def _remove(value: object, part: object) -> str:
    text, removed = _display(value), _display(part)
    return text.replace(removed, "") if removed else text


def _sum(values: object, attribute: object = None, start: object = 0) -> object:
    total = _number(start)
    if not isinstance(values, Iterable) or isinstance(values, (str, Mapping)):
        return total
    for item in values:
        if attribute is not None:
            item = _environment().getitem(item, attribute)
        if isinstance(item, bool) or not isinstance(item, (int, float, Decimal)):
            raise TypeError("sum adds numbers only")
        total = total + item  # type: ignore[operator]
    return total


def _liquid_slice(
    values: object, offset: object = 0, limit: object = None, reverse: object = False
) -> list[object]:
    if values is None or isinstance(values, Undefined):
        return []
    items = list(values) if isinstance(values, Iterable) else [values]
    start = max(_integer(offset), 0)
    chosen = items[start:] if limit is None else items[start : start + max(_integer(limit), 0)]
    if reverse:
        chosen.reverse()
    return chosen


def _iterate(values: object, weight: int) -> Iterator[object]:
    """Iterate a loop's sequence, charging ``weight`` per item; nil and missing are empty."""
    budget = _budget()
    if values is None or isinstance(values, Undefined):
        return iter(())
    return _charged(iter(values), weight, budget)  # type: ignore[call-overload]


def _charged(items: Iterator[object], weight: int, budget: _Budget) -> Iterator[object]:
    for item in items:
        budget.spend(weight)
        yield item


def _spend_filter(value: object, units: int) -> object:
    _spend(units)
    return value


def _charge_filter(value: object) -> object:
    _charge_deep(value)
    return value


def _charge_shallow_filter(value: object) -> object:
    _spend(_units(value))
    return value


def _contains(container: object, item: object) -> bool:
    if isinstance(container, str):
        return _display(item) in container
    if isinstance(container, (list, tuple, Mapping)):
        try:
            return item in container
        except TypeError:
            return False
    return False


_LIQUID_FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "append": _append,
    "d": _default,
    "default": _default,
    "divided_by": _divided_by,
    "downcase": _downcase,
    "first": _first,
    "join": _join,
    "last": _last,
    "lstrip": _lstrip,
    "minus": _minus,
    "modulo": _modulo,
    "plus": _plus,
    "prepend": _prepend,
    "remove": _remove,
    "replace": _replace,
    "rstrip": _rstrip,
    "size": _size,
    "split": _split,
    "string": _display,
    "strip": _strip,
    "sum": _sum,
    "times": _times,
    "truncate": _truncate,
    "truncatewords": _truncatewords,
    "upcase": _upcase,
}

# Jinja's own filters that cannot be made to allocate or loop far beyond their input.
# Left out: batch and slice (sizes from arguments), center, indent, wordwrap, format and
# pprint (output size from arguments), random (not deterministic), urlize (regex-heavy).
_JINJA_FILTERS: Final = (
    "abs", "attr", "capitalize", "count", "dictsort", "e", "escape", "filesizeformat",
    "float", "forceescape", "groupby", "int", "items", "length", "list", "lower", "map",
    "max", "min", "reject", "rejectattr", "reverse", "round", "safe", "select",
    "selectattr", "sort", "striptags", "title", "tojson", "trim", "unique",
    "upper", "urlencode", "wordcount", "xmlattr",
)

# Filters whose work is proportional to their argument's top level only: charged shallowly.
_SHALLOW_FILTERS: Final = frozenset(
    {
        "abs", "attr", "count", "d", "default", "divided_by", "first", "float", "int",
        "items", "last", "length", "list", "map", "minus", "modulo", "plus", "reject",
        "rejectattr", "reverse", "round", "select", "selectattr", "size", "sum", "times",
    }
)


def _metered(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter so a call charges its input before running and its result after."""
    value_index = 1 if hasattr(func, "jinja_pass_arg") else 0
    deep = name not in _SHALLOW_FILTERS

    @functools.wraps(func)
    def metered(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        budget.spend(1)
        if len(args) > value_index:
            if deep:
                _charge_deep(args[value_index])
            else:
                budget.spend(_units(args[value_index]))
        result = func(*args, **kwargs)
        budget.spend(_units(result))
        return result

    return metered


# --------------------------------------------------------------------------- environment

_STR_METHODS: Final = frozenset(
    {
        "capitalize", "casefold", "count", "endswith", "find", "isalnum", "isalpha",
        "isdecimal", "isdigit", "islower", "isnumeric", "isspace", "istitle", "isupper",
        "lower", "lstrip", "partition", "rfind", "rpartition", "rsplit", "rstrip", "split",
        "splitlines", "startswith", "strip", "swapcase", "title", "upper",
    }
)
_MAPPING_METHODS: Final = frozenset({"get", "items", "keys", "values"})
_SEQUENCE_METHODS: Final = frozenset({"count", "index"})
_LOOP_METHODS: Final = frozenset({"changed", "cycle"})
_CALLABLE_GLOBALS: Final[tuple[object, ...]] = (_safe_range, _liquid_range, dict, Namespace)
_BINOPS: Final = frozenset({"+", "-", "*", "/", "//", "%", "**"})
_COMPARING_TESTS: Final = frozenset(
    {
        "contains", "in", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le",
        "<=", "gt", "greaterthan", ">", "ge", ">=",
    }
)


def _allowed_callable(obj: object) -> bool:
    if isinstance(obj, (Macro, BlockReference, LoopContext)):
        return True
    if any(obj is allowed for allowed in _CALLABLE_GLOBALS):
        return True
    if isinstance(obj, (types.BuiltinMethodType, types.MethodType)):
        owner, name = obj.__self__, obj.__name__
        if isinstance(owner, str):
            return name in _STR_METHODS
        if isinstance(owner, Mapping):
            return name in _MAPPING_METHODS
        if isinstance(owner, (list, tuple)):
            return name in _SEQUENCE_METHODS
        if isinstance(owner, LoopContext):
            return name in _LOOP_METHODS
    return False


class _Environment(ImmutableSandboxedEnvironment):
    """The sandbox with a budget: every call, operator and filter is metered."""

    intercepted_binops = _BINOPS

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        """Run an arithmetic operator after checking what it would allocate."""
        _spend(1)
        _check_binop(operator, left, right)
        result = self.binop_table[operator](left, right)
        _spend(_units(result))
        return result

    def call(
        __self,
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Call one of the few allowed callables, charging the call and its result."""
        _spend(1)
        if not _allowed_callable(__obj):
            raise SecurityError(f"{type(__obj).__name__} objects cannot be called in templates")
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (str, list, tuple, Mapping)):
            _spend(_units(owner))
        result = super().call(__context, __obj, *args, **kwargs)
        _spend(_units(result))
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        """Read a member: object keys first (payloads are data), then Liquid properties."""
        if isinstance(obj, Mapping):
            try:
                return obj[attribute]
            except (KeyError, TypeError):
                pass
        if attribute == "size" and isinstance(obj, (str, list, tuple, Mapping)):
            return len(obj)
        if attribute == "first" and isinstance(obj, (str, list, tuple)):
            return _first(obj)
        if attribute == "last" and isinstance(obj, (str, list, tuple)):
            return _last(obj)
        return super().getattr(obj, attribute)

    def unsafe_undefined(self, obj: Any, attribute: str) -> Undefined:
        """Fail the render on an unsafe attribute instead of rendering it as empty."""
        raise SecurityError(f"access to attribute {attribute!r} is not allowed")


@functools.cache
def _environment() -> _Environment:
    environment = _Environment(
        undefined=_Undefined,
        finalize=_finalize,
        autoescape=False,
        extensions=["jinja2.ext.loopcontrols"],
        cache_size=0,
    )
    filters: dict[str, Callable[..., Any]] = {
        name: JINJA_FILTERS[name] for name in _JINJA_FILTERS
    }
    filters.update(_LIQUID_FILTERS)
    filters["liquid_slice"] = _liquid_slice
    environment.filters = {name: _metered(name, func) for name, func in filters.items()}
    environment.filters["_spend"] = _spend_filter
    environment.filters["_charge"] = _charge_filter
    environment.filters["_charge_shallow"] = _charge_shallow_filter
    environment.filters["_iterate"] = _iterate
    environment.tests["contains"] = _contains
    environment.globals = {
        "range": _safe_range,
        "liquid_range": _liquid_range,
        "dict": dict,
        "namespace": Namespace,
        "empty": _Emptiness(blank=False),
        "blank": _Emptiness(blank=True),
    }
    environment.policies["json.dumps_function"] = functools.partial(
        json.dumps, default=_json_default
    )
    return environment


# --------------------------------------------------------------------------- instrumenting


def _filter(node: nodes.Node, name: str, *args: nodes.Expr) -> nodes.Filter:
    return nodes.Filter(node, name, list(args), [], None, None, lineno=node.lineno)


def _weight(body: list[nodes.Node]) -> int:
    """Charge for running a body once: its node count and the text it writes."""
    weight = 1
    for statement in body:
        weight += 1
        for node in statement.find_all(nodes.Node):
            weight += 1
            if isinstance(node, nodes.TemplateData):
                weight += len(node.data) // _CHARS_PER_UNIT
    return weight


def _spend_statement(weight: int, lineno: int) -> nodes.ExprStmt:
    charge = _filter(nodes.Const(None, lineno=lineno), "_spend", nodes.Const(weight))
    return nodes.ExprStmt(charge, lineno=lineno)


class _Instrument(NodeTransformer):
    """Insert budget charges into a parsed template."""

    def _charge_body(self, node: nodes.Macro | nodes.CallBlock | nodes.Block | nodes.For) -> None:
        node.body.insert(0, _spend_statement(_weight(node.body), node.lineno))

    def visit_For(self, node: nodes.For) -> nodes.Node:
        self.generic_visit(node)
        weight = _weight(node.body)
        node.iter = _filter(node.iter, "_iterate", nodes.Const(1))
        node.body.insert(0, _spend_statement(weight, node.lineno))
        return node

    def visit_Macro(self, node: nodes.Macro) -> nodes.Node:
        self.generic_visit(node)
        self._charge_body(node)
        return node

    def visit_CallBlock(self, node: nodes.CallBlock) -> nodes.Node:
        self.generic_visit(node)
        self._charge_body(node)
        return node

    def visit_Block(self, node: nodes.Block) -> nodes.Node:
        self.generic_visit(node)
        self._charge_body(node)
        return node

    def visit_Compare(self, node: nodes.Compare) -> nodes.Node:
        self.generic_visit(node)
        node.expr = _filter(node.expr, "_charge")
        return node

    def visit_Operand(self, node: nodes.Operand) -> nodes.Node:
        self.generic_visit(node)
        node.expr = _filter(node.expr, "_charge")
        return node

    def visit_Test(self, node: nodes.Test) -> nodes.Node:
        self.generic_visit(node)
        if node.name in _COMPARING_TESTS:
            node.node = _filter(node.node, "_charge")
            node.args = [_filter(arg, "_charge") for arg in node.args]
        return node

    def visit_Concat(self, node: nodes.Concat) -> nodes.Node:
        self.generic_visit(node)
        node.nodes = [_filter(part, "_charge") for part in node.nodes]
        return _filter(node, "_charge_shallow")

    def visit_Getitem(self, node: nodes.Getitem) -> nodes.Node:
        self.generic_visit(node)
        if isinstance(node.arg, nodes.Slice):
            return _filter(node, "_charge_shallow")
        return node


# --------------------------------------------------------------------------- Liquid to Jinja

_STRING_PATTERN: Final = r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\""
_STRING: Final = re.compile(_STRING_PATTERN, re.S)
_TOKEN: Final = re.compile(
    r"(?P<ws>\s+)"
    r"|(?P<str>" + _STRING_PATTERN + r")"
    r"|(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op>\.\.|==|!=|<>|<=|>=|//|\*\*|[-+*/%~|:,.()\[\]{}<>=!?])"
    r"|(?P<other>.)",
    re.S,
)
_OPENERS: Final = {"(": ")", "[": "]", "{": "}"}
_CLOSERS: Final = frozenset(_OPENERS.values())
_START: Final = re.compile(r"\{\{|\{%|\{#")
_LOOP_RENAMES: Final = {"rindex": "revindex", "rindex0": "revindex0"}
_STATE: Final = "_liquid"


@attrs.frozen(eq=False)
class _Token:
    kind: str
    text: str


@attrs.frozen(eq=False)
class _Group:
    open: str
    items: list[_Item]
    close: str


_Item = _Token | _Group


def _tokenize(text: str) -> list[_Token]:
    return [
        _Token(match.lastgroup or "other", match.group()) for match in _TOKEN.finditer(text)
    ]


def _group(tokens: list[_Token]) -> list[_Item] | None:
    """Nest tokens by brackets; None when the brackets do not balance."""
    stack: list[tuple[str, list[_Item]]] = [("", [])]
    for token in tokens:
        if token.kind == "op" and token.text in _OPENERS:
            stack.append((token.text, []))
        elif token.kind == "op" and token.text in _CLOSERS:
            opener, items = stack.pop()
            if not opener or _OPENERS[opener] != token.text:
                return None
            stack[-1][1].append(_Group(opener, items, token.text))
        else:
            stack[-1][1].append(token)
    if len(stack) != 1:
        return None
    return stack[0][1]


def _is(item: _Item, kind: str, *texts: str) -> bool:
    return isinstance(item, _Token) and item.kind == kind and (not texts or item.text in texts)


def _split_items(items: list[_Item], kind: str, *texts: str) -> list[list[_Item]]:
    parts: list[list[_Item]] = [[]]
    for item in items:
        if _is(item, kind, *texts):
            parts.append([])
        else:
            parts[-1].append(item)
    return parts


def _significant(items: list[_Item]) -> list[_Item]:
    return [item for item in items if not _is(item, "ws")]


_RESERVED_NAMES: Final = frozenset(
    {
        "and", "blank", "caller", "dict", "else", "empty", "false", "forloop", "if", "in", "is",
        "kwargs", "liquid_range", "loop", "namespace", "nil", "none", "not", "null", "or",
        "range", "self", "true", "varargs", _STATE,
    }
)


@attrs.frozen
class _Expressions:
    """Translates Liquid expressions to Jinja.

    ``names`` are the variables Liquid ``assign``/``capture`` set: Liquid variables live in
    one scope, Jinja's loops have their own, so those variables are kept as attributes of a
    namespace (``_liquid.total``) and an accumulator assigned in a loop survives it.
    """

    names: frozenset[str] = frozenset()

    def expression(self, text: str) -> str:
        """Translate one expression; unbalanced brackets leave it as is for Jinja to report."""
        items = _group(_tokenize(text))
        if items is None:
            return text
        return self.sequence(items).strip()

    def variable(self, name: str) -> str:
        """Return how a variable set by Liquid is written."""
        return f"{_STATE}.{name}" if name in self.names else name

    def sequence(self, items: list[_Item]) -> str:
        """Translate clauses joined by ``and``/``or``."""
        out: list[str] = []
        clause: list[_Item] = []
        for item in items:
            if isinstance(item, _Token) and _is(item, "name", "and", "or"):
                out.append(self.clause(clause))
                out.append(item.text)
                clause = []
            else:
                clause.append(item)
        out.append(self.clause(clause))
        return "".join(out)

    def clause(self, items: list[_Item]) -> str:
        """Translate one clause, turning ``a contains b`` into a test."""
        for index, item in enumerate(items):
            if _is(item, "name", "contains"):
                left = self.filtered(items[:index]).strip()
                right = self.filtered(items[index + 1 :]).strip()
                return f" ({left}) is contains({right}) "
        return self.filtered(items)

    def filtered(self, items: list[_Item]) -> str:
        """Translate ``base | name: args | ...`` into Jinja filter calls."""
        parts = _split_items(items, "op", "|")
        out = [self.plain(parts[0])]
        for part in parts[1:]:
            significant = _significant(part)
            head = significant[0] if significant else None
            if not isinstance(head, _Token) or head.kind != "name":
                out.append(self.plain(part))
                continue
            at = part.index(head)
            if len(significant) >= 2 and _is(significant[1], "op", ":"):
                colon = part.index(significant[1])
                out.append(f" {head.text}({self.arguments(part[colon + 1 :])})")
            else:
                # The filter's own name is never a variable.
                out.append(_text(part[: at + 1]) + self.plain(part[at + 1 :]))
        return "|".join(out)

    def arguments(self, items: list[_Item]) -> str:
        """Translate Liquid filter arguments, ``name: value`` ones to keywords."""
        arguments: list[str] = []
        for argument in _split_items(items, "op", ","):
            significant = _significant(argument)
            head = significant[0] if significant else None
            if (
                isinstance(head, _Token)
                and head.kind == "name"
                and len(significant) >= 2
                and _is(significant[1], "op", ":")
            ):
                colon = argument.index(significant[1])
                arguments.append(f"{head.text}={self.sequence(argument[colon + 1 :]).strip()}")
            else:
                arguments.append(self.sequence(argument).strip())
        return ", ".join(arguments)

    def plain(self, items: list[_Item]) -> str:
        """Translate names and operators outside filters."""
        out: list[str] = []
        significant = _significant(items)
        positions = {id(item): index for index, item in enumerate(significant)}
        for item in items:
            if isinstance(item, _Group):
                out.append(self.group(item))
                continue
            position = positions[id(item)] if item.kind == "name" else -1
            before = significant[position - 1] if position > 0 else None
            after = significant[position + 1] if 0 <= position < len(significant) - 1 else None
            if item.kind == "name" and before is not None and _is(before, "op", "."):
                in_loop = position >= 2 and _is(significant[position - 2], "name", "forloop")
                out.append(_LOOP_RENAMES.get(item.text, item.text) if in_loop else item.text)
            elif item.kind == "name" and item.text in ("nil", "null"):
                out.append("none")
            elif item.kind == "name" and item.text == "forloop":
                out.append("loop")
            elif item.kind == "name" and not (after is not None and _is(after, "op", "=")):
                out.append(self.variable(item.text))
            elif item.kind == "op" and item.text == "<>":
                out.append("!=")
            else:
                out.append(item.text)
        return "".join(out)

    def group(self, group: _Group) -> str:
        """Translate a bracketed group; ``(a..b)`` is a Liquid range."""
        if group.open == "(":
            halves = _split_items(group.items, "op", "..")
            if len(halves) == 2:
                start, stop = (self.sequence(half).strip() for half in halves)
                return f"liquid_range({start}, {stop})"
        return group.open + self.sequence(group.items) + group.close

    def when(self, subject: str, rest: str) -> str:
        """Translate a ``when`` tag's values into a condition on the case subject."""
        items = _group(_tokenize(rest))
        if items is None:
            return f"({subject}) == ({rest.strip()})"
        values: list[list[_Item]] = [[]]
        for item in items:
            if _is(item, "op", ",") or _is(item, "name", "or"):
                values.append([])
            else:
                values[-1].append(item)
        return " or ".join(
            f"({subject}) == ({self.sequence(value).strip()})"
            for value in values
            if _significant(value)
        )

    def for_tag(self, rest: str) -> str:
        """Translate a for tag, turning ``limit:``, ``offset:`` and ``reversed`` into a slice."""
        items = _group(_tokenize(rest))
        split = _loop_split(items)
        if items is None or split is None:
            return "for " + self.expression(rest)
        target = _text(items[:split]).strip()
        collection: list[_Item] = []
        options: dict[str, list[_Item]] = {}
        tail: list[_Item] = []
        current = collection
        index = split + 1
        while index < len(items):
            item = items[index]
            following = _significant(items[index + 1 :])
            if (
                isinstance(item, _Token)
                and _is(item, "name", "limit", "offset")
                and following
                and _is(following[0], "op", ":")
            ):
                current = options[item.text] = []
                index = items.index(following[0], index) + 1
                continue
            if _is(item, "name", "reversed"):
                current = options["reversed"] = []
            elif _is(item, "name", "if", "recursive"):
                tail = items[index:]
                break
            else:
                current.append(item)
            index += 1
        source = self.sequence(collection).strip()
        if options:
            offset = self.sequence(options.get("offset", [])).strip()
            limit = self.sequence(options.get("limit", [])).strip()
            source = (
                f"({source})|liquid_slice({offset if offset not in ('', 'continue') else '0'}, "
                f"{limit or 'none'}, {'true' if 'reversed' in options else 'false'})"
            )
        tail_text = self.sequence(tail).strip()
        return f"for {target} in {source}" + (f" {tail_text}" if tail_text else "")


def _text(items: list[_Item]) -> str:
    return "".join(
        item.text if isinstance(item, _Token) else item.open + _text(item.items) + item.close
        for item in items
    )


def _loop_split(items: list[_Item] | None) -> int | None:
    return next((i for i, item in enumerate(items or []) if _is(item, "name", "in")), None)


def _loop_targets(rest: str) -> list[str]:
    items = _group(_tokenize(rest))
    split = _loop_split(items)
    if items is None or split is None:
        return []
    return [item.text for item in items[:split] if isinstance(item, _Token) and item.kind == "name"]


def _find_close(source: str, start: int, closer: str) -> int:
    index = start
    while index < len(source):
        char = source[index]
        if char in "'\"":
            match = _STRING.match(source, index)
            if match:
                index = match.end()
                continue
        if source.startswith(closer, index):
            return index
        index += 1
    return -1


@attrs.define
class _Block:
    kind: str
    subject: str = ""
    branches: int = 0


@attrs.define
class _Translator:
    source: str
    expressions: _Expressions = attrs.field(factory=_Expressions)
    out: list[str] = attrs.field(factory=list)
    blocks: list[_Block] = attrs.field(factory=list)
    assigned: set[str] = attrs.field(factory=set)
    loop_targets: set[str] = attrs.field(factory=set)

    def _in_case_preamble(self) -> bool:
        return bool(self.blocks) and self.blocks[-1].kind == "case" and not self.blocks[-1].branches

    def _skip_to(self, position: int, name: str) -> int:
        """Return the end of the next ``{% end<name> %}``."""
        pattern = re.compile(r"\{%-?\s*end" + name + r"\s*-?%\}")
        match = pattern.search(self.source, position)
        return len(self.source) if match is None else match.end()

    def run(self) -> str:
        position = 0
        while position < len(self.source):
            match = _START.search(self.source, position)
            if match is None:
                self._text(self.source[position:])
                break
            self._text(self.source[position : match.start()])
            opener = match.group()
            if opener == "{#":
                end = self.source.find("#}", match.end())
                end = len(self.source) if end < 0 else end + 2
                self.out.append(self.source[match.start() : end])
                position = end
                continue
            closer = "}}" if opener == "{{" else "%}"
            end = _find_close(self.source, match.end(), closer)
            if end < 0:
                self.out.append(self.source[match.start() :])
                break
            inner = self.source[match.end() : end]
            position = end + 2
            if opener == "{{":
                if not self._in_case_preamble():
                    left, body, right = _modifiers(inner)
                    expression = self.expressions.expression(body)
                    self.out.append("{{" + left + " " + expression + " " + right + "}}")
                continue
            position = self._tag(match.start(), inner, position)
        return "".join(self.out)

    def _text(self, text: str) -> None:
        if text and not self._in_case_preamble():
            self.out.append(text)

    def _tag(self, start: int, inner: str, position: int) -> int:
        left, body, right = _modifiers(inner)
        name_match = re.match(r"\s*(#|[A-Za-z_]\w*)", body)
        name = name_match.group(1) if name_match else ""
        rest = body[name_match.end() :] if name_match else body
        expressions = self.expressions

        def emit(text: str) -> None:
            self.out.append("{%" + left + " " + text + " " + right + "%}")

        if name == "raw":
            end = self._skip_to(position, "raw")
            self.out.append(self.source[start:end])
            return end
        if name == "comment":
            return self._skip_to(position, "comment")
        if name == "#":
            return position
        if name == "echo":
            self.out.append("{{" + left + " " + expressions.expression(rest) + " " + right + "}}")
        elif name == "cycle":
            self.out.append("{{ loop.cycle(" + expressions.expression(rest) + ") }}")
        elif name in ("if", "unless"):
            self.blocks.append(_Block("if"))
            condition = expressions.expression(rest)
            emit(f"if {condition}" if name == "if" else f"if not ({condition})")
        elif name in ("elsif", "elif"):
            emit("elif " + expressions.expression(rest))
        elif name in ("endif", "endunless"):
            self._pop("if")
            emit("endif")
        elif name == "for":
            self.blocks.append(_Block("for"))
            self.loop_targets.update(_loop_targets(rest))
            emit(expressions.for_tag(rest))
        elif name == "endfor":
            self._pop("for")
            emit("endfor")
        elif name == "case":
            self.blocks.append(_Block("case", subject=expressions.expression(rest)))
        elif name == "when" and self.blocks and self.blocks[-1].kind == "case":
            block = self.blocks[-1]
            keyword = "elif" if block.branches else "if"
            block.branches += 1
            emit(f"{keyword} {expressions.when(block.subject, rest)}")
        elif name == "else" and self.blocks and self.blocks[-1].kind == "case":
            block = self.blocks[-1]
            if not block.branches:
                emit("if false")
            block.branches += 1
            emit("else")
        elif name == "endcase":
            closed = self._pop("case")
            if closed is not None and closed.branches:
                emit("endif")
        elif name == "assign":
            target, _, value = rest.partition("=")
            target = target.strip()
            self.assigned.add(target)
            emit(f"set {expressions.variable(target)} = {expressions.expression(value)}")
        elif name == "capture":
            target = rest.strip()
            self.assigned.add(target)
            self.blocks.append(_Block("capture", subject=target))
            emit(f"set {target}")
        elif name == "endcapture":
            emit("endset")
            closed = self._pop("capture")
            if closed is not None and closed.subject in expressions.names:
                self.out.append(f"{{% set {_STATE}.{closed.subject} = {closed.subject} %}}")
        else:
            emit((name + " " + expressions.expression(rest)).strip())
        return position

    def _pop(self, kind: str) -> _Block | None:
        if self.blocks and self.blocks[-1].kind == kind:
            return self.blocks.pop()
        return None


def _modifiers(inner: str) -> tuple[str, str, str]:
    left = inner[0] if inner[:1] in ("-", "+") else ""
    right = inner[-1] if len(inner) > len(left) and inner[-1:] in ("-", "+") else ""
    return left, inner[len(left) : len(inner) - len(right)], right


_IDENTIFIER: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


def liquid_to_jinja(source: str) -> str:
    """Translate Liquid tags and expressions in a template to Jinja; Jinja passes through.

    Variables set with Liquid's ``assign`` or ``capture`` (and not used as loop variables)
    are kept in a namespace created at the top of the template and seeded from the context,
    so that, as in Liquid, a value assigned inside a loop is still there after it.
    """
    first = _Translator(source)
    translated = first.run()
    names = frozenset(
        name
        for name in first.assigned - first.loop_targets - _RESERVED_NAMES
        if _IDENTIFIER.match(name)
    )
    if not names:
        return translated
    seeds = ", ".join(f"{name}={name}" for name in sorted(names))
    body = _Translator(source, expressions=_Expressions(names)).run()
    return f"{{% set {_STATE} = namespace({seeds}) %}}" + body


# --------------------------------------------------------------------------- public API


@functools.lru_cache(maxsize=512)
def _compile(source: str) -> Template | str:
    """Compile a template, or return why it cannot be compiled."""
    if len(source) > MAX_TEMPLATE_CHARS:
        return f"the template is longer than {MAX_TEMPLATE_CHARS} characters"
    environment = _environment()
    try:
        tree = environment.parse(liquid_to_jinja(source))
        if any(tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport))):
            return "templates cannot extend, include or import other templates"
        _Instrument().visit(tree)
        tree.set_environment(environment)
        return environment.from_string(tree)
    except RecursionError:
        return "the template is nested too deeply"
    except Exception as error:
        message = getattr(error, "message", None) or str(error) or type(error).__name__
        lineno = getattr(error, "lineno", None)
        return f"line {lineno}: {message}" if lineno else str(message)


def _render(template: Template, context: Mapping[str, Any]) -> str:
    chunks: list[str] = []
    length = 0
    stream = cast(Generator[str, None, None], template.generate(dict(context)))
    try:
        for chunk in stream:
            chunks.append(chunk)
            length += len(chunk)
            if length > MAX_OUTPUT_CHARS:
                break
    finally:
        stream.close()
    text = "".join(chunks)
    if len(text) > MAX_OUTPUT_CHARS:
        text = text[: MAX_OUTPUT_CHARS - 1] + _ELLIPSIS
    return text


def render_template(template: str | None, context: Mapping[str, Any]) -> str | None:
    """Render an untrusted template with a payload as context; None when there is no summary.

    Returns None when ``template`` is None, fails to compile, or fails while rendering
    (an error, a forbidden access, an exhausted budget). Never raises. Output longer than
    :data:`MAX_OUTPUT_CHARS` is cut to that length and ends in an ellipsis. Compiled
    templates are cached by their source text.
    """
    if template is None:
        return None
    try:
        compiled = _compile(template)
    except Exception:
        return None
    if isinstance(compiled, str):
        return None
    token = _BUDGET.set(_Budget(OPERATION_BUDGET))
    try:
        return _render(compiled, context)
    except Exception:
        return None
    finally:
        _BUDGET.reset(token)


def check_template(template: str | None) -> dict[str, str | None]:
    """Check that a template compiles, for a schema's ``*_validation`` object.

    Returns ``{"status": "valid", "message": None}`` (also for no template) or
    ``{"status": "invalid", "message": <why>}``. Rendering can still fail later on a given
    payload; that yields no summary, never an error.
    """
    if template is None:
        return {"status": "valid", "message": None}
    try:
        compiled = _compile(template)
    except Exception as error:
        return {"status": "invalid", "message": str(error) or type(error).__name__}
    if isinstance(compiled, str):
        return {"status": "invalid", "message": compiled}
    return {"status": "valid", "message": None}
