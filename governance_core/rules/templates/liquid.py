"""Liquid templates, rendered by python-liquid with Liquid's own semantics.

python-liquid evaluates no Python: a template reads the payload's keys and indexes and calls
Liquid filters, nothing else. On top of its own limits (:data:`MAX_RANGE` iterations of
nested loops, a local namespace and capture buffers of :data:`NAMESPACE_LIMIT` bytes), every
loop iteration, every item a loop's ``offset`` or ``reversed`` passes over, and every
filter spends from the render's operation budget (:mod:`.limits`) in proportion to the data
it touches, and the filters that could build a value far larger than their input (``join``,
``replace``, ``times``) are charged or refused before they run.

Left out of the standard tags and filters: ``include`` and ``render`` (a template cannot
load another) and ``date`` (it reads the wall clock). Objects and arrays render as JSON, the
one place this differs from Liquid, which joins an array's items and has no form for objects.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Mapping, Sized
from typing import Any, ClassVar, Final, TextIO

from liquid import BoundTemplate, Environment, RenderContext, Undefined
from liquid.builtin.output import Output, OutputNode
from liquid.builtin.tags.echo_tag import EchoNode, EchoTag
from liquid.exceptions import LiquidError
from liquid.filter import num_arg
from liquid.stringify import to_liquid_string
from liquid.token import Token
from liquid.undefined import UNDEFINED

from governance_core.rules.templates.limits import (
    CHARS_PER_UNIT,
    MAX_RANGE,
    SummaryBuffer,
    charge_deep,
    check_int_product,
    spend,
    units,
)

__all__ = ["NAMESPACE_LIMIT", "compile_liquid", "display", "render_liquid"]

NAMESPACE_LIMIT: Final = 4 * 1024 * 1024
"""Bytes the variables a template assigns, and each capture, may hold."""

# A loop iteration costs about as much to run as a few variable reads.
_UNITS_PER_ITERATION: Final = 4

# Items of a sequence skipped or copied (C loops) for the price of one work unit.
_ITEMS_PER_UNIT: Final = 16


def display(value: object) -> str:
    """Liquid's rendering of a value, except objects and arrays, which render as JSON."""
    if type(value) is str:
        # The usual case, and Liquid's rendering of a string is the string.
        return value
    if not isinstance(value, Undefined) and isinstance(value, (Mapping, list, tuple)):
        charge_deep(value)
        return json.dumps(value, ensure_ascii=False, default=str)
    return to_liquid_string(value, autoescape=False)


class _OutputNode(OutputNode):
    def render_to_output(self, context: RenderContext, buffer: TextIO) -> int:
        return buffer.write(display(self.expression.evaluate(context)))


class _EchoNode(EchoNode):
    def render_to_output(self, context: RenderContext, buffer: TextIO) -> int:
        return buffer.write(display(self.expression.evaluate(context)))


class _Output(Output):
    node_class = _OutputNode


class _Echo(EchoTag):
    node_class = _EchoNode


class _Context(RenderContext):
    def get(
        self, path: list[object], *, token: Token | None, default: object = UNDEFINED
    ) -> object:
        """Read a variable, charging its size: every comparison, output or loop reads this way."""
        value = super().get(path, token=token, default=default)
        spend(1 + units(value))
        return value

    def stopindex(self, key: str, index: int | None = None) -> int:
        """Record where a loop stops, charging the items its ``offset``/``reversed`` pass over.

        python-liquid walks a loop's sequence up to this index (and copies it when
        ``reversed``) before it applies its loop limit, so a loop over ``(1..100000000)``
        with a large ``offset`` would run for seconds without this charge.
        """
        if index is not None:
            spend(index // _ITEMS_PER_UNIT)
        return super().stopindex(key, index)

    def raise_for_loop_limit(self, length: int = 1) -> None:
        """Apply python-liquid's limit on nested loops, then charge the loop's iterations."""
        super().raise_for_loop_limit(length)
        spend(length * _UNITS_PER_ITERATION)


class _Template(BoundTemplate):
    context_class = _Context


# --------------------------------------------------------------------------- filters


def _join_cost(value: object, separator: object = " ", **_: object) -> None:
    if isinstance(value, Sized):
        spend(len(str(separator)) * max(len(value) - 1, 0) // CHARS_PER_UNIT)


def _replace_cost(value: object, old: object = "", new: object = "", **_: object) -> None:
    text, before, after = str(value), str(old), str(new)
    occurrences = text.count(before) if before else len(text) + 1
    spend(occurrences * max(len(after) - len(before), 0) // CHARS_PER_UNIT)


def _times_cost(value: object, other: object = 0, **_: object) -> None:
    check_int_product(num_arg(value, default=0), num_arg(other, default=0))


# Checks run before a filter whose result can be far larger than its arguments.
_COSTS: Final[dict[str, Callable[..., None]]] = {
    "join": _join_cost,
    "replace": _replace_cost,
    "times": _times_cost,
}

# Filters whose work is proportional to their input's top level only: charged shallowly.
_SHALLOW_FILTERS: Final = frozenset(
    {
        "compact", "concat", "default", "find", "find_index", "first", "has", "last", "map",
        "reject", "reverse", "size", "sum", "where",
    }
)


def _metered(name: str, func: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap a filter so a call charges its input before running and its result after."""
    cost = _COSTS.get(name)
    deep = name not in _SHALLOW_FILTERS

    @functools.wraps(func)
    def metered(value: object, *args: Any, **kwargs: Any) -> Any:
        if type(value) is str:
            # The usual input, charged in one step: what the branches below charge a string.
            spend((2 if deep else 1) + len(value) // CHARS_PER_UNIT)
        elif deep:
            spend(1)
            charge_deep(value)
        else:
            spend(1 + units(value))
        if cost is not None:
            cost(value, *args)
        result = func(value, *args, **kwargs)
        spend(units(result))
        return result

    return metered


# --------------------------------------------------------------------------- environment


class _Environment(Environment):
    loop_iteration_limit: ClassVar[int | None] = MAX_RANGE
    local_namespace_limit: ClassVar[int | None] = NAMESPACE_LIMIT
    output_stream_limit: ClassVar[int | None] = NAMESPACE_LIMIT
    template_class = _Template

    def setup_tags_and_filters(self, *, extra: bool = False) -> None:
        """Register the standard tags and filters, less those left out, all metered."""
        super().setup_tags_and_filters(extra=extra)
        for tag in ("include", "render"):
            del self.tags[tag]
        del self.filters["date"]
        self.add_tag(_Output)
        self.add_tag(_Echo)
        self.filters = {name: _metered(name, func) for name, func in self.filters.items()}


@functools.cache
def _environment() -> _Environment:
    return _Environment()


def compile_liquid(source: str) -> BoundTemplate | str:
    """Parse a Liquid template, or return why it cannot be parsed (an unknown filter too)."""
    environment = _environment()
    try:
        template = environment.from_string(source)
        for name, spans in template.analyze().filters.items():
            if name not in environment.filters:
                return f"line {spans[0].line_col(source)[0]}: unknown filter {name!r}"
        return template
    except LiquidError as error:
        where = error.context()
        message = str(error.message or type(error).__name__)
        return f"line {where[0]}: {message}" if where else message
    except RecursionError:
        return "the template is nested too deeply"


def render_liquid(
    template: BoundTemplate, context: Mapping[str, Any], output: SummaryBuffer
) -> None:
    """Render a parsed template into ``output``; raises when the render fails.

    Must run inside :func:`~.limits.metered`.
    """
    render_context = template.context_class(template, globals=template.make_globals(context))
    template.render_with_context(render_context, output)
