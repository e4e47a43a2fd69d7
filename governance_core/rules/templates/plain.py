"""Liquid templates that only read values, rendered without the Liquid engine.

Most summary templates print a few payload values, some of them only when present: the
default OpenTelemetry summary is ``{% if ["otel.span"].agent %}...{% endif %}`` and an
output. python-liquid spends most of such a render setting up its context and walking its
nodes, about a twentieth of what an OpenTelemetry span costs to store. A template made only
of text, outputs of a variable (``{{ a.b }}``, ``{{ ["a b"][0] }}``, no filter) and
``{% if variable %}...{% endif %}`` blocks is compiled here into a :class:`PlainTemplate`,
which renders it with Liquid's semantics, as python-liquid configured by :mod:`.liquid`
would:

- a variable reads the render's context, then each key or index; a missing one, one read
  from a value that has none, or an index of a string, is undefined;
- an output prints what :func:`.liquid.display` prints (nothing for an undefined value);
- ``if`` holds for every value but undefined, ``nil`` and ``false``;
- every read spends from the render's budget what the Liquid context charges for it.

Anything else (filters, other tags, whitespace control, comments, ``size``/``first``/
``last``, names Liquid gives a meaning of its own, a block that holds only whitespace, which
Liquid leaves out) is left to python-liquid: :func:`compile_plain` answers None. A
Hypothesis property checks that both renders agree on every template of this form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Final, TextIO

import attrs
from liquid import Undefined

from governance_core.rules.templates.limits import spend, units
from governance_core.rules.templates.liquid import display

__all__ = ["PlainTemplate", "compile_plain"]

_TAG: Final = re.compile(r"(\{\{.*?\}\}|\{%.*?%\})", re.DOTALL)
_OUTPUT: Final = re.compile(r"\{\{\s*(.*?)\s*\}\}", re.DOTALL)
_IF: Final = re.compile(r"\{%\s*if\s+(.*?)\s*%\}", re.DOTALL)
_ENDIF: Final = re.compile(r"\{%\s*endif\s*%\}")
_NAME: Final = r"[A-Za-z_][A-Za-z0-9_]*"
_QUOTED: Final = r"\"[^\"\\{}%]*\"|'[^'\\{}%]*'"
_SEGMENT: Final = re.compile(rf"\.({_NAME})|\[({_QUOTED}|\d+)\]")
_ROOT: Final = re.compile(rf"({_NAME})|\[({_QUOTED})\]")

# Names that are not a plain read of the context: Liquid's literals and operators, the
# names a render adds to its own scope, and the keys python-liquid answers for itself.
_NOT_VARIABLES: Final = frozenset({
    "and", "or", "not", "contains", "in", "nil", "null", "true", "false", "empty", "blank",
    "partial", "template", "forloop", "tablerowloop",
})
_COMPUTED_KEYS: Final = frozenset({"size", "first", "last"})

# What a missing value reads as: python-liquid's default (lenient) undefined, which prints
# nothing and is false.
_UNDEFINED: Final = Undefined("")

# A read path: its keys (strings) and indexes (integers), the first a key of the context.
_Path = tuple[str | int, ...]


@attrs.frozen
class _Output:
    path: _Path


@attrs.frozen
class _If:
    path: _Path
    body: tuple[str | _Output | _If, ...]


_Node = str | _Output | _If


@attrs.frozen
class PlainTemplate:
    """A compiled template of text, outputs and ``if`` blocks (:func:`compile_plain`)."""

    nodes: tuple[_Node, ...]

    def render(self, context: Mapping[str, object], output: TextIO) -> None:
        """Render into ``output``; must run inside :func:`~.limits.metered`."""
        _render(self.nodes, context, output)


def compile_plain(source: str) -> PlainTemplate | None:
    """The template as a :class:`PlainTemplate`, or None when it is not of that form.

    ``source`` must be a template python-liquid compiles: this tells only whether it can be
    rendered without it.
    """
    stack: list[list[_Node]] = [[]]
    paths: list[_Path] = []
    for index, piece in enumerate(_TAG.split(source)):
        if index % 2 == 0:
            if "{{" in piece or "{%" in piece or "{#" in piece:
                return None
            if piece:
                stack[-1].append(piece)
            continue
        if output := _OUTPUT.fullmatch(piece):
            path = _path(output.group(1))
            if path is None:
                return None
            stack[-1].append(_Output(path))
        elif opened := _IF.fullmatch(piece):
            path = _path(opened.group(1))
            if path is None:
                return None
            paths.append(path)
            stack.append([])
        elif _ENDIF.fullmatch(piece) and len(stack) > 1:
            body = tuple(stack.pop())
            if _blank(body):
                return None
            stack[-1].append(_If(paths.pop(), body))
        else:
            return None
    return PlainTemplate(tuple(stack[0])) if len(stack) == 1 else None


def _path(markup: str) -> _Path | None:
    """The path a variable's markup reads, or None when it is not a plain variable."""
    root = _ROOT.match(markup)
    if root is None:
        return None
    name = root.group(1)
    if name is not None and name in _NOT_VARIABLES:
        return None
    path: list[str | int] = [name if name is not None else root.group(2)[1:-1]]
    position = root.end()
    while position < len(markup):
        segment = _SEGMENT.match(markup, position)
        if segment is None:
            return None
        key, bracketed = segment.groups()
        if key is not None:
            path.append(key)
        elif bracketed[0] in "\"'":
            path.append(bracketed[1:-1])
        else:
            path.append(int(bracketed))
        position = segment.end()
    if any(key in _COMPUTED_KEYS for key in path[1:]):
        return None
    return tuple(path)


def _blank(nodes: Sequence[_Node]) -> bool:
    """Whether Liquid would leave the block out: no output, only whitespace."""
    return all(
        (isinstance(node, str) and node.isspace()) or (isinstance(node, _If) and _blank(node.body))
        for node in nodes
    )


def _read(context: Mapping[str, object], path: _Path) -> object:
    """The value ``path`` reads, charged as the Liquid context charges a read."""
    value: object = context
    for key in path:
        if type(key) is int and isinstance(value, str):
            # Liquid does not index a string.
            value = _UNDEFINED
            break
        try:
            value = value[key]  # type: ignore[index]
        except (KeyError, TypeError, IndexError):
            value = _UNDEFINED
            break
    spend(1 + units(value))
    return value


def _render(nodes: Sequence[_Node], context: Mapping[str, object], output: TextIO) -> None:
    for node in nodes:
        if type(node) is str:
            output.write(node)
        elif type(node) is _Output:
            output.write(display(_read(context, node.path)))
        else:
            assert isinstance(node, _If)
            value = _read(context, node.path)
            if value is not _UNDEFINED and value is not None and value is not False:
                _render(node.body, context, output)
