"""Jinja2 templates: Jinja2's immutable sandbox with an operation budget.

- No attribute starting with ``_`` (``__class__``, ``__mro__``), no mutation of lists or
  dicts, and only a short list of callables (macros, ``range``, ``dict``, ``namespace``,
  ``loop.cycle`` and read-only ``str``, ``dict`` and ``list`` methods). A forbidden access
  fails the render.
- The compiled template is instrumented: each loop iteration, macro call, filter, call,
  arithmetic operation, comparison and string concatenation spends from the render's budget
  (:mod:`.limits`) in proportion to the size of the data it touches; sizes of repeated
  sequences, joins and replacements are charged before they are built, so ``'a' * 10**9``
  fails before allocating. ``range`` is capped at :data:`~.limits.MAX_RANGE` items and
  integers at :data:`~.limits.MAX_INT_BITS` bits.
- Payload keys win over methods (``data.keys`` is the payload's ``keys``); a missing value
  renders as "" and chains (``missing.a.b``); nulls render as "", booleans as
  ``true``/``false``, objects and arrays as JSON.
- Templates cannot extend, include or import others. Only Jinja's filters that cannot be made
  to allocate or loop far beyond their input are available.
"""

from __future__ import annotations

import functools
import json
import types
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping
from decimal import Decimal
from typing import Any, Final, cast

from jinja2 import ChainableUndefined, Template, Undefined, nodes
from jinja2.exceptions import SecurityError
from jinja2.filters import FILTERS as JINJA_FILTERS
from jinja2.runtime import BlockReference, Context, LoopContext, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace
from jinja2.visitor import NodeTransformer

from governance_core.rules.templates.limits import (
    CHARS_PER_UNIT,
    MAX_INT_BITS,
    MAX_RANGE,
    SummaryBuffer,
    charge_deep,
    check_int_product,
    spend,
    units,
)

__all__ = ["compile_jinja", "render_jinja"]


# --------------------------------------------------------------------------- values


class _Undefined(ChainableUndefined):
    """A missing value: renders "", chains (``missing.a.b``), equals none, orders as false."""

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


def _display(value: object) -> str:
    """Render a value: nulls and missing as "", booleans lowercase, objects and arrays JSON."""
    if value is None or isinstance(value, Undefined):
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (Mapping, list, tuple)):
        charge_deep(value)
        return json.dumps(value, ensure_ascii=False, default=_json_default)
    return str(value)


def _finalize(value: object) -> object:
    if isinstance(value, str):
        spend(len(value) // CHARS_PER_UNIT)
        return value
    return _display(value)


def _check_binop(operator: str, left: object, right: object) -> None:
    """Refuse or pre-charge an operation before it allocates its result."""
    if operator == "*":
        check_int_product(left, right)
        sequence, times = (left, right) if isinstance(right, int) else (right, left)
        if isinstance(sequence, (str, list, tuple)) and isinstance(times, int):
            spend(units(sequence) * max(times, 0) + max(times, 0) // CHARS_PER_UNIT)
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
            spend(units(left) + units(right))
    elif operator == "%" and isinstance(left, str):
        raise SecurityError("string formatting with % is not available in templates")


def _safe_range(*args: int) -> range:
    numbers = range(*args)
    if len(numbers) > MAX_RANGE:
        raise SecurityError(f"range is limited to {MAX_RANGE} items")
    return numbers


# --------------------------------------------------------------------------- filters


def _join(value: object, separator: object = "", attribute: object = None) -> str:
    """Jinja's ``join``, with the size of the result charged before it is built."""
    if isinstance(value, str) or not isinstance(value, Iterable):
        return _display(value)
    if attribute is not None:
        value = [_environment().getitem(item, attribute) for item in value]
    glue = _display(separator)
    parts = [_display(item) for item in value]
    spend((sum(map(len, parts)) + len(glue) * max(len(parts) - 1, 0)) // CHARS_PER_UNIT)
    return glue.join(parts)


def _replace(value: object, old: object, new: object = "", count: object = None) -> str:
    """Jinja's ``replace``, with the growth of the text charged before it is built."""
    text, before, after = _display(value), _display(old), _display(new)
    limit = -1 if count is None else max(int(cast(int, count)), 0)
    occurrences = text.count(before) if before else len(text) + 1
    if limit >= 0:
        occurrences = min(occurrences, limit)
    spend((len(text) + occurrences * max(len(after) - len(before), 0)) // CHARS_PER_UNIT)
    return text.replace(before, after, limit)


def _sum(values: object, attribute: object = None, start: object = 0) -> object:
    """Jinja's ``sum`` of numbers (summing lists or strings would grow without a charge)."""
    total = start
    if not isinstance(values, Iterable) or isinstance(values, (str, Mapping)):
        return total
    for item in values:
        if attribute is not None:
            item = _environment().getitem(item, attribute)
        if isinstance(item, bool) or not isinstance(item, (int, float, Decimal)):
            raise TypeError("sum adds numbers only")
        total = total + item  # type: ignore[operator]
    return total


def _iterate(values: object, weight: int) -> Iterator[object]:
    """Iterate a loop's sequence, charging ``weight`` per item; none and missing are empty."""
    spend(0)
    if values is None or isinstance(values, Undefined):
        return iter(())
    return _charged(iter(values), weight)  # type: ignore[call-overload]


def _charged(items: Iterator[object], weight: int) -> Iterator[object]:
    for item in items:
        spend(weight)
        yield item


def _spend_filter(value: object, cost: int) -> object:
    spend(cost)
    return value


def _charge_filter(value: object) -> object:
    charge_deep(value)
    return value


def _charge_shallow_filter(value: object) -> object:
    spend(units(value))
    return value


_OWN_FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "join": _join,
    "replace": _replace,
    "sum": _sum,
}

# Jinja's own filters that cannot be made to allocate or loop far beyond their input.
# Left out: batch and slice (sizes from arguments), center, indent, wordwrap, format and
# pprint (output size from arguments), random (not deterministic), urlize (regex-heavy).
_JINJA_FILTERS: Final = (
    "abs", "attr", "capitalize", "count", "d", "default", "dictsort", "e", "escape",
    "filesizeformat", "first", "float", "forceescape", "groupby", "int", "items", "last",
    "length", "list", "lower", "map", "max", "min", "reject", "rejectattr", "reverse",
    "round", "safe", "select", "selectattr", "sort", "string", "striptags", "title",
    "tojson", "trim", "truncate", "unique", "upper", "urlencode", "wordcount", "xmlattr",
)

# Filters whose work is proportional to their argument's top level only: charged shallowly.
_SHALLOW_FILTERS: Final = frozenset(
    {
        "abs", "attr", "count", "d", "default", "first", "float", "int", "items", "last",
        "length", "list", "map", "reject", "rejectattr", "reverse", "round", "select",
        "selectattr", "sum",
    }
)
def _metered(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter so a call charges its input before running and its result after."""
    value_index = 1 if hasattr(func, "jinja_pass_arg") else 0
    deep = name not in _SHALLOW_FILTERS

    @functools.wraps(func)
    def metered(*args: Any, **kwargs: Any) -> Any:
        spend(1)
        if len(args) > value_index:
            if deep:
                charge_deep(args[value_index])
            else:
                spend(units(args[value_index]))
        result = func(*args, **kwargs)
        spend(units(result))
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
_CALLABLE_GLOBALS: Final[tuple[object, ...]] = (_safe_range, dict, Namespace)
_BINOPS: Final = frozenset({"+", "-", "*", "/", "//", "%", "**"})
_COMPARING_TESTS: Final = frozenset(
    {
        "in", "eq", "equalto", "==", "ne", "!=", "lt", "lessthan", "<", "le",
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
        spend(1)
        _check_binop(operator, left, right)
        result = self.binop_table[operator](left, right)
        spend(units(result))
        return result

    def call(
        __self,
        __context: Context,
        __obj: Any,
        *args: Any,
        **kwargs: Any,
    ) -> Any:
        """Call one of the few allowed callables, charging the call and its result."""
        spend(1)
        if not _allowed_callable(__obj):
            raise SecurityError(f"{type(__obj).__name__} objects cannot be called in templates")
        owner = getattr(__obj, "__self__", None)
        if isinstance(owner, (str, list, tuple, Mapping)):
            spend(units(owner))
        result = super().call(__context, __obj, *args, **kwargs)
        spend(units(result))
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        """Read a member: object keys first (payloads are data), then attributes."""
        if isinstance(obj, Mapping):
            try:
                return obj[attribute]
            except (KeyError, TypeError):
                pass
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
    filters.update(_OWN_FILTERS)
    environment.filters = {name: _metered(name, func) for name, func in filters.items()}
    environment.filters["_spend"] = _spend_filter
    environment.filters["_charge"] = _charge_filter
    environment.filters["_charge_shallow"] = _charge_shallow_filter
    environment.filters["_iterate"] = _iterate
    environment.globals = {
        "range": _safe_range,
        "dict": dict,
        "namespace": Namespace,
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
                weight += len(node.data) // CHARS_PER_UNIT
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




# --------------------------------------------------------------------------- compile and render


def compile_jinja(source: str) -> Template | str:
    """Compile a Jinja2 template for the sandbox, or return why it cannot be compiled."""
    environment = _environment()
    try:
        tree = environment.parse(source)
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


def render_jinja(template: Template, context: Mapping[str, Any], output: SummaryBuffer) -> None:
    """Render a compiled template into ``output``; raises when the render fails.

    Must run inside :func:`~.limits.metered`.
    """
    stream = cast(Generator[str, None, None], template.generate(dict(context)))
    try:
        for chunk in stream:
            output.write(chunk)
    finally:
        stream.close()
