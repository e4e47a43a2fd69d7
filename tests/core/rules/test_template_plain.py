"""Templates that only read values render as python-liquid renders them, without it."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from liquid import BoundTemplate

from governance_core.rules.templates import MAX_OUTPUT_CHARS
from governance_core.rules.templates.limits import (
    BudgetExceeded,
    OutputFull,
    SummaryBuffer,
    metered,
)
from governance_core.rules.templates.liquid import compile_liquid, render_liquid
from governance_core.rules.templates.plain import PlainTemplate, compile_plain

KEYS = ("a", "b", "otel.span", "name", "size", "partial", "x y", "nil", "0")


def _by_liquid(source: str, context: dict[str, Any]) -> tuple[str, str | None]:
    compiled = compile_liquid(source)
    assert isinstance(compiled, BoundTemplate), compiled
    return _rendered(lambda output: render_liquid(compiled, context, output))


def _by_plain(template: PlainTemplate, context: dict[str, Any]) -> tuple[str, str | None]:
    return _rendered(lambda output: template.render(context, output))


def _rendered(render: Any) -> tuple[str, str | None]:
    """What a render wrote, and how it failed (None: it did not)."""
    output = SummaryBuffer()
    failed = None
    with metered():
        try:
            render(output)
        except OutputFull:
            failed = "full"
        except BudgetExceeded:
            failed = "budget"
    return output.getvalue(), failed


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=False, width=32)
    | st.text(max_size=8) | st.sampled_from(["", " ", "x" * 300]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
        st.sampled_from(KEYS), inner, max_size=4
    ),
    max_leaves=12,
)
contexts = st.dictionaries(st.sampled_from(KEYS), json_values, max_size=6)


@st.composite
def paths(draw: st.DrawFn) -> str:
    root = draw(st.sampled_from(KEYS))
    markup = root if root.isidentifier() else draw(st.sampled_from(['["%s"]', "['%s']"])) % root
    for _ in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["dot", "quoted", "index"]))
        if kind == "index":
            markup += f"[{draw(st.integers(0, 3))}]"
        else:
            key = draw(st.sampled_from(KEYS))
            markup += f".{key}" if kind == "dot" and key.isidentifier() else f'["{key}"]'
    return markup


texts = st.text(alphabet=st.sampled_from(list("ab }%{#\n\t-")), max_size=6)


@st.composite
def templates(draw: st.DrawFn, depth: int = 0) -> str:
    pieces = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["text", "output", "if"] if depth < 2 else ["text", "output"]))
        if kind == "text":
            pieces.append(draw(texts))
        elif kind == "output":
            space = draw(st.sampled_from(["", " ", "  ", "\n"]))
            pieces.append("{{" + space + draw(paths()) + space + "}}")
        else:
            body = draw(templates(depth + 1))
            pieces.append("{% if " + draw(paths()) + " %}" + body + "{% endif %}")
    return "".join(pieces)


@settings(max_examples=600, deadline=None)
@given(source=templates(), context=contexts)
@example(source="{{ a[0] }}{% if a[1] %}y{% endif %}", context={"a": "xyz"})
@example(source="{{ a.b }}{{ b[0].a }}", context={"a": [1], "b": [{"a": None}]})
def test_a_plain_template_renders_as_liquid_does(source: str, context: dict[str, Any]) -> None:
    if isinstance(compile_liquid(source), str):
        # Not a template Liquid compiles (a stray "{%" in text, say): never plain either,
        # since only what python-liquid compiled is offered.
        return
    plain = compile_plain(source)
    if plain is None:
        return
    assert _by_plain(plain, context) == _by_liquid(source, context)


@pytest.mark.parametrize("source", [
    '{% if ["otel.span"].agent %}{{ ["otel.span"].agent }}: {% endif %}{{ ["otel.span"].name }}',
    "{{ a }}", "{{a.b[0]}}", "{{ ['x y'].b }}", "text only", "",
    "{% if a %}{% if b %}{{ b }}{% endif %}x{% endif %}",
])
def test_templates_that_only_read_are_plain(source: str) -> None:
    assert compile_plain(source) is not None


@pytest.mark.parametrize("source", [
    "{{ a | upcase }}", "{{- a }}", "{{ a -}}", "{% if a %}x{% else %}y{% endif %}",
    "{% if a == 1 %}x{% endif %}", "{% for x in a %}{{ x }}{% endfor %}",
    "{{ a.size }}", "{{ a.first }}", "{{ partial }}", "{{ nil }}", "{{ true }}",
    "{% if a %}  {% endif %}", "{% if a %}x", "x{% endif %}", "{# note #}{{ a }}",
    "{{ 'text' }}", "{{ 1 }}", "{{ a[-1] }}", "{% assign b = a %}",
])
def test_anything_else_is_left_to_liquid(source: str) -> None:
    assert compile_plain(source) is None


def test_the_budget_and_the_cap_hold_as_in_liquid() -> None:
    long_text = "y" * (MAX_OUTPUT_CHARS + 10)
    source = "{{ a }}{{ a }}"
    plain = compile_plain(source)
    assert plain is not None
    assert _by_plain(plain, {"a": long_text}) == _by_liquid(source, {"a": long_text})
    assert _by_plain(plain, {"a": long_text})[1] == "full"
    huge = {"a": [[0] * 1000] * 300}
    assert _by_plain(plain, huge) == _by_liquid(source, huge)
    assert _by_plain(plain, huge)[1] == "budget"
