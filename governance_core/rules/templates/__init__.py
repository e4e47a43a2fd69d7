"""Summary templates (decisions 12): untrusted Liquid or Jinja2 text rendered safely.

Span, quality and alert schemas may carry a template that renders a one-line summary of a
payload. Templates come from clients, so they are untrusted.

A template is Liquid unless its text starts with the Jinja2 comment ``{# jinja #}`` (spaces
inside the comment and ``-`` whitespace control allowed): the syntax travels with the text,
so a stored template means the same everywhere it is read. Jinja2 renders that comment as
nothing.

- Liquid renders with python-liquid, with Liquid's semantics (:mod:`.liquid`).
- Jinja2 renders in Jinja2's immutable sandbox (:mod:`.jinja`).
- Either way a render has an operation budget (:data:`OPERATION_BUDGET`) and its output is
  capped at :data:`MAX_OUTPUT_CHARS`: a longer summary is cut to that length, its last
  character replaced by an ellipsis (a cut summary is more useful than none). A template
  longer than :data:`MAX_TEMPLATE_CHARS` is invalid.
- A template that fails to compile or to render gives no summary, never an error.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any, Final, Literal

from jinja2 import Template
from liquid import BoundTemplate

from governance_core.rules.templates.jinja import compile_jinja, render_jinja
from governance_core.rules.templates.limits import (
    MAX_INT_BITS,
    MAX_OUTPUT_CHARS,
    MAX_RANGE,
    MAX_TEMPLATE_CHARS,
    OPERATION_BUDGET,
    OutputFull,
    SummaryBuffer,
    metered,
)
from governance_core.rules.templates.liquid import compile_liquid, render_liquid
from governance_core.rules.templates.plain import PlainTemplate, compile_plain

__all__ = [
    "JINJA_MARKER",
    "MAX_INT_BITS",
    "MAX_OUTPUT_CHARS",
    "MAX_RANGE",
    "MAX_TEMPLATE_CHARS",
    "OPERATION_BUDGET",
    "Syntax",
    "check_template",
    "render_template",
    "syntax_of",
]

Syntax = Literal["liquid", "jinja"]
"""The two template languages."""

JINJA_MARKER: Final = "{# jinja #}"
"""The comment a Jinja2 template starts with."""

_JINJA_START: Final = re.compile(r"\{#-?\s*jinja\s*-?#\}")


def syntax_of(template: str) -> Syntax:
    """Return the language of a template: Jinja2 when it starts with :data:`JINJA_MARKER`."""
    return "jinja" if _JINJA_START.match(template) else "liquid"


@functools.lru_cache(maxsize=512)
def _compile(source: str) -> Template | BoundTemplate | PlainTemplate | str:
    """Compile a template, or return why it cannot be compiled.

    A Liquid template that only reads values is rendered without python-liquid
    (:mod:`.plain`), once python-liquid has compiled it.
    """
    if len(source) > MAX_TEMPLATE_CHARS:
        return f"the template is longer than {MAX_TEMPLATE_CHARS} characters"
    if syntax_of(source) == "jinja":
        return compile_jinja(source)
    compiled = compile_liquid(source)
    if isinstance(compiled, str):
        return compiled
    return compile_plain(source) or compiled


def render_template(template: str | None, context: Mapping[str, Any]) -> str | None:
    """Render an untrusted template with a payload as context; None when there is no summary.

    Returns None when ``template`` is None, fails to compile, or fails while rendering
    (an error, a forbidden access, an exhausted budget or limit). Never raises. Output
    longer than :data:`MAX_OUTPUT_CHARS` is cut to that length and ends in an ellipsis.
    Compiled templates are cached by their source text.
    """
    if template is None:
        return None
    try:
        compiled = _compile(template)
        if isinstance(compiled, str):
            return None
        output = SummaryBuffer()
        with metered():
            try:
                if isinstance(compiled, PlainTemplate):
                    compiled.render(context, output)
                elif isinstance(compiled, Template):
                    render_jinja(compiled, context, output)
                else:
                    render_liquid(compiled, context, output)
            except OutputFull:
                pass
        return output.summary()
    except Exception:
        return None


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
