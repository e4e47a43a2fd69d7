from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governance_core.rules.templates import (
    JINJA_MARKER,
    MAX_OUTPUT_CHARS,
    MAX_TEMPLATE_CHARS,
    check_template,
    render_template,
    syntax_of,
)

CONTEXT: dict[str, Any] = {
    "name": "Ada",
    "score": 1,
    "ratio": 0.75,
    "items": [1, 2, 3],
    "people": [{"name": "Bo", "age": 40}, {"name": "Cy", "age": 7}],
    "customer": {"ssn": None, "tags": ["vip", "new"], "items": ["x"]},
    "flag": False,
    "text": "the quick brown fox jumps",
    "empty_text": "",
}


def render(template: str, context: dict[str, Any] | None = None) -> str | None:
    return render_template(template, CONTEXT if context is None else context)


def jinja(template: str) -> str:
    """Mark a template as Jinja2."""
    return JINJA_MARKER + template


@pytest.mark.parametrize(
    ("template", "syntax"),
    [
        ("{{ name }}", "liquid"),
        ("{# jinja #}{{ name }}", "jinja"),
        ("{#- jinja -#}\n{{ name }}", "jinja"),
        ("{#jinja#}{{ name }}", "jinja"),
        (" {# jinja #}{{ name }}", "liquid"),
        ("{{ name }}{# jinja #}", "liquid"),
        ("{# jinja2 #}{{ name }}", "liquid"),
    ],
)
def test_a_template_is_liquid_unless_it_starts_with_the_jinja_comment(
    template: str, syntax: str
) -> None:
    assert syntax_of(template) == syntax


def test_the_marker_renders_as_nothing() -> None:
    assert render(jinja("{{ name }}")) == "Ada"
    assert render("{#- jinja -#}\n  {{ name }}") == "Ada"


# --------------------------------------------------------------------------- Liquid


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ name }}", "Ada"),
        ("{% if score == 1 %}one{% elsif score == 2 %}two{% else %}other{% endif %}", "one"),
        ("{% if score == 2 %}one{% elsif score == 1 %}two{% endif %}", "two"),
        ("{% assign total = score | plus: 2 %}{{ total }}", "3"),
        ("{{ score | minus: 3 }}", "-2"),
        ("{{ score | plus: '4' }}", "5"),
        ('{{ missing | default: "n/a" }}', "n/a"),
        ('{{ flag | default: "no" }} {{ empty_text | default: "none" }}', "no none"),
        ('{{ flag | default: "no", allow_false: true }}', "false"),
        ("{{ score | default: 9 }}", "1"),
        ("{{ text | truncate: 9 }}", "the qu..."),
        ('{{ text | truncate: 9, "" }}', "the quick"),
        ("{{ text | truncate: 100 }}", "the quick brown fox jumps"),
        ("{{ text | truncatewords: 2 }}", "the quick..."),
        ("{{ items | join: ', ' }}", "1, 2, 3"),
        ("{{ items | join }}", "1 2 3"),
        ("{{ text | split: ' ' | last | upcase }}", "JUMPS"),
        ("{{ 'a,b' | split: ',' | first }}", "a"),
        ("{{ items | size }} {{ items.size }} {{ text.size }}", "3 3 25"),
        ("{{ items.first }}-{{ items.last }} {{ items | first }}-{{ items | last }}", "1-3 1-3"),
        ("{{ '  pad ' | strip | prepend: '[' | append: ']' }}", "[pad]"),
        ("{{ 'MiXeD' | downcase }} {{ 'MiXeD' | upcase }}", "mixed MIXED"),
        ("{{ score | times: 6 | divided_by: 4 }} {{ 7 | modulo: 4 }}", "1 3"),
        ("{{ ratio | times: 100 }}", "75.0"),
        ('{{ name | replace: "A", "a" | remove: "d" }}', "aa"),
        ("{% for i in items limit: 2 %}{{ forloop.index }}:{{ i }} {% endfor %}", "1:1 2:2 "),
        ("{% for i in items offset: 1 %}{{ i }}{% endfor %}", "23"),
        ("{% for i in items reversed %}{{ i }}{% endfor %}", "321"),
        ("{% for i in (1..4) %}{{ i }}{% if forloop.last %}.{% endif %}{% endfor %}", "1234."),
        ("{% for i in (2..score) %}x{% endfor %}none", "none"),
        ("{% for p in people %}{{ p.name }}{% unless forloop.last %}, {% endunless %}{% endfor %}",
         "Bo, Cy"),
        ('{% if customer.tags contains "vip" %}VIP{% endif %}', "VIP"),
        ('{% if text contains "fox" and score == 1 %}fox{% endif %}', "fox"),
        ('{% if missing contains "x" %}yes{% else %}no{% endif %}', "no"),
        ("{% unless flag %}unflagged{% endunless %}", "unflagged"),
        ("{% if score <> 2 %}ne{% endif %}", "ne"),
        ("{% case score %} ignored {% when 0 %}zero{% when 1, 2 %}low{% else %}high{% endcase %}",
         "low"),
        ("{% case name %}{% when 'Bo' or 'Cy' %}friend{% else %}stranger{% endcase %}",
         "stranger"),
        ("{% capture greeting %}Hi {{ name }}{% endcapture %}{{ greeting | upcase }}", "HI ADA"),
        ("{% comment %}{{ nothing }}{% endcomment %}kept", "kept"),
        ("{% raw %}{{ not rendered }}{% endraw %}", "{{ not rendered }}"),
        ("{% echo name | upcase %}", "ADA"),
        ("{% if missing == nil %}nil{% endif %}{% if customer.ssn == nil %}!{% endif %}", "nil!"),
        ("{% if empty_text == empty %}e{% endif %}{% if items != empty %}i{% endif %}", "ei"),
        ("{%- if true -%}  trimmed  {%- endif -%}", "trimmed"),
        ("{% for i in items %}{% cycle 'a', 'b' %}{% endfor %}", "aba"),
        ("{% for i in items offset: 1 limit: 1 %}{{ i }}{{ forloop.rindex }}{% endfor %}", "21"),
        ("{% case score %}{% when 5 %}five{% endcase %}done", "done"),
        ("{% for i in missing %}x{% else %}nothing{% endfor %}", "nothing"),
    ],
)
def test_liquid(template: str, expected: str) -> None:
    assert render(template) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% if n %}if{% else %}else{% endif %}", "if"),
        ("{% if empty_text %}if{% else %}else{% endif %}", "if"),
        ("{% if customer.ssn %}if{% else %}else{% endif %}", "else"),
        ("{% if flag %}if{% else %}else{% endif %}", "else"),
        ("{% unless n %}unless{% else %}else{% endunless %}", "else"),
        ("{% if n and empty_text %}both{% endif %}", "both"),
        ("{{ n | default: 'x' }}", "0"),
    ],
)
def test_liquid_truthiness_only_nil_and_false_are_false(template: str, expected: str) -> None:
    assert render(template, {**CONTEXT, "n": 0}) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% if n %}if{% else %}else{% endif %}", "else"),
        ("{% if empty_text %}if{% else %}else{% endif %}", "else"),
    ],
)
def test_jinja_truthiness_is_jinjas(template: str, expected: str) -> None:
    assert render(jinja(template), {**CONTEXT, "n": 0}) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ missing }}|{{ missing.deeper.still }}|{{ customer.ssn }}", "||"),
        ("{{ flag }} {{ true }}", "false true"),
        ("{{ customer.tags }}", '["vip", "new"]'),
        ("{{ people[0] }}", '{"name": "Bo", "age": 40}'),
        ("{{ customer.items | join }}", "x"),
        ("{% if missing > 3 %}gt{% else %}not{% endif %}", "not"),
    ],
)
def test_missing_values_nulls_and_json(template: str, expected: str) -> None:
    assert render(template) == expected


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{{ name | lower }}{{ name.upper() }}", "adaADA"),
        ("{% set n = items | length %}{{ n * 2 }}", "6"),
        ("{{ people | map(attribute='name') | join(', ') }}", "Bo, Cy"),
        ("{{ people | selectattr('age', 'gt', 18) | map(attribute='name') | list }}", '["Bo"]'),
        ("{{ people | sum(attribute='age') }}", "47"),
        ("{% for k, v in people[0].items() %}{{ k }}={{ v }};{% endfor %}", "name=Bo;age=40;"),
        ("{% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %}", "aba"),
        ("{% macro b(x) %}[{{ x }}]{% endmacro %}{{ b(name) }}", "[Ada]"),
        ("{{ 'yes' if score else 'no' }}", "yes"),
        ("{{ {'a': 1}['a'] }} {{ items[1:] }}", "1 [2, 3]"),
        ("{% set ns = namespace(t=0) %}{% for i in items %}{% set ns.t = ns.t + i %}"
         "{% endfor %}{{ ns.t }}", "6"),
        ("{{ people | tojson }}", '[{"age": 40, "name": "Bo"}, {"age": 7, "name": "Cy"}]'),
    ],
)
def test_jinja_still_works(template: str, expected: str) -> None:
    assert render(jinja(template)) == expected


def test_payload_keys_win_over_dict_methods() -> None:
    assert render("{{ customer.items | first }}") == "x"
    data = {"data": {"keys": 1, "values": []}}
    assert render("{{ data.keys }}-{{ data.values | size }}", data) == "1-0"


def test_strings_are_left_alone() -> None:
    assert render('{{ "a | b: c" | default: "x | y" }}') == "a | b: c"
    assert render('{{ missing | default: "x | y" }}{{ "%}" }}') == "x | y%}"
    assert render(jinja('{{ "}}" }}{{ "%}" }}')) == "}}%}"
    assert render("{% if x == nil %}nil{% endif %}") == "nil"


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        ("{% assign total = 0 %}{% for i in items %}{% assign total = total | plus: i %}"
         "{% endfor %}{{ total }}", "6"),
        ("{% assign score = score | plus: 1 %}{{ score }}", "2"),
        ("{% for p in people %}{% capture last_name %}{{ p.name }}!{% endcapture %}{% endfor %}"
         "{{ last_name }}", "Cy!"),
        ("{% assign i = 5 %}{% for i in items %}{{ i }}{% endfor %}{{ i }}", "1235"),
        ("{% assign seen = '' %}{% for p in people %}{% if p.age > 18 %}"
         "{% assign seen = seen | append: p.name %}{% endif %}{% endfor %}{{ seen }}", "Bo"),
        ("{{ size }}{% assign size = items | size %}{{ size }}", "3"),
    ],
)
def test_liquid_variables_outlive_loops(template: str, expected: str) -> None:
    assert render(template) == expected


# --------------------------------------------------------------------------- failures


@pytest.mark.parametrize(
    "template",
    [
        "{% if %}",
        "{{ name | no_such_filter }}",
        "{% for x in items %}",
        "{{ name ",
        "{% include 'other.html' %}",
        "{% extends 'base.html' %}",
        "{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}",
        "x" * (MAX_TEMPLATE_CHARS + 1),
    ],
)
def test_invalid_templates_give_no_summary(template: str) -> None:
    assert render(template) is None
    check = check_template(template)
    assert check["status"] == "invalid"
    assert check["message"]


def test_check_template_valid() -> None:
    assert check_template("{{ name | default: 'x' }}") == {"status": "valid", "message": None}
    assert check_template(None) == {"status": "valid", "message": None}
    assert render_template(None, CONTEXT) is None


def test_render_errors_give_no_summary() -> None:
    assert render("{{ 1 / 0 }}") is None
    assert render("{{ missing + 1 }}") is None
    assert render("{{ score | divided_by: 0 }}") is None
    assert render("{{ name }}", None) == "Ada"
    assert render_template("{{ name }}", {}) == ""


# --------------------------------------------------------------------------- attacks

BIG: dict[str, Any] = {
    "xs": list(range(1000)),
    "pairs": [[i, i] for i in range(2000)],
    "text": "x" * 2_000_000,
}


@pytest.fixture
def fast() -> Iterator[None]:
    started = time.perf_counter()
    yield
    assert time.perf_counter() - started < 2.0


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{{ x.__class__ }}",
        "{{ ''.__class__.__mro__ }}",
        "{{ ''.__class__.__mro__[1].__subclasses__() }}",
        "{{ ().__class__.__base__.__subclasses__() }}",
        "{{ ''['__class__'] }}",
        "{{ '' | attr('__class__') }}",
        "{{ self.__init__.__globals__ }}",
        "{{ range.__globals__ }}",
        "{{ xs.__len__() }}",
        "{{ lipsum(n=10**6) }}",
        "{{ cycler.__init__.__globals__ }}",
        "{{ '{0.__class__}'.format(1) }}",
        "{{ '{:>999999999}'.format(1) }}",
        "{{ '%0999999999d' % 1 }}",
        "{% set d = {} %}{{ d.update({'a': 1}) }}",
        "{{ xs.append(1) }}",
        "{{ xs.pop() }}",
    ],
)
def test_sandbox_escapes_fail_safely(template: str) -> None:
    assert render_template(jinja(template), BIG) is None
    # Liquid reads keys and indexes only: the same text renders nothing or is invalid.
    assert render_template(template, BIG) in (None, "")


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{% for i in range(10**9) %}{% endfor %}",
        "{% for a in range(10000) %}{% for b in range(10000) %}{% endfor %}{% endfor %}",
        "{% for a in xs %}{% for b in xs %}{% for c in xs %}{% endfor %}{% endfor %}{% endfor %}",
        "{% for a in xs %}{% for b in xs if false %}{% endfor %}{% endfor %}",
        "{% for a in pairs %}{% for b in pairs %}{{ '' }}{% endfor %}{% endfor %}",
        "{% macro f(n) %}{% if n > 0 %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}"
        "{{ f(40) }}",
        "{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}",
        "{% for x in pairs recursive %}{{ loop(pairs) }}{% endfor %}",
        "{% for a in range(10000) %}{% if -1 in pairs %}{% endif %}{% endfor %}",
        "{% for a in range(10000) %}{{ pairs | sort | first }}{% endfor %}",
    ],
)
def test_runaway_loops_end_quickly(template: str) -> None:
    assert render_template(jinja(template), BIG) is None


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{% for i in (1..1000000000) %}{% endfor %}",
        "{% for a in (1..10000) %}{% for b in (1..10000) %}{% endfor %}{% endfor %}",
        "{% for a in xs %}{% for b in xs %}{% for c in xs %}{% endfor %}{% endfor %}{% endfor %}",
        "{% for a in pairs %}{% for b in pairs %}{{ '' }}{% endfor %}{% endfor %}",
        "{% for a in (1..10000) %}{% endfor %}" * 400,
        "{% for a in (1..10000) %}{% tablerow b in xs %}{% endtablerow %}{% endfor %}",
        "{% for a in (1..10000) %}{{ pairs | sort | first }}{% endfor %}",
        "{% for a in (1..10000) %}{{ pairs | size }}{% endfor %}",
        "{{ (1..1000000000) | join }}",
    ],
)
def test_runaway_liquid_loops_end_quickly(template: str) -> None:
    assert render_template(template, BIG) is None


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{{ 'a' * 10**9 }}",
        "{{ ([1] * 10**8) | length }}",
        "{{ 10 ** 100000 }}",
        "{% set ns = namespace(x=3) %}{% for i in range(64) %}{% set ns.x = ns.x * ns.x %}"
        "{% endfor %}{{ ns.x }}",
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
        "{% endfor %}{{ ns.s | length }}",
        "{% set ns = namespace(s='ab') %}{% for i in range(64) %}"
        "{% set ns.s = [ns.s, ns.s] | join('') %}{% endfor %}{{ ns.s | length }}",
        "{{ ([text] * 1000) | join(',') }}",
        "{{ [text] * 1000 }}",
        "{{ ([text] * 1000) | lower }}",
        "{{ text | replace('', text) }}",
        "{% set s %}{% for a in range(10000) %}{{ text }}{% endfor %}{% endset %}{{ s | length }}",
        "{% for i in range(10000) %}{% set y = 'ab' * 100000 %}{% endfor %}",
    ],
)
def test_huge_values_end_quickly(template: str) -> None:
    assert render_template(jinja(template), BIG) is None


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{% assign s = 'ab' %}{% for i in (1..64) %}{% assign s = s | append: s %}{% endfor %}"
        "{{ s | size }}",
        "{% assign x = 3 %}{% for i in (1..64) %}{% assign x = x | times: x %}{% endfor %}"
        "{{ x }}",
        "{{ text | replace: '', text }}",
        "{{ xs | join: text }}",
        "{% capture s %}{% for a in (1..10000) %}{{ text }}{% endfor %}{% endcapture %}"
        "{{ s | size }}",
        "{% for i in (1..10000) %}{% assign y = text | append: text %}{% endfor %}",
        "{% for i in (1..10000) %}{% assign y = text | split: '' %}{% endfor %}",
    ],
)
def test_huge_liquid_values_end_quickly(template: str) -> None:
    assert render_template(template, BIG) is None


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{% for a in range(10000) %}{% for b in range(10000) %}ab{% endfor %}{% endfor %}",
        "{% for i in range(10000) %}{{ 'a' * 1000 }}{% endfor %}",
        "{{ text }}",
        "{% for p in pairs %}{{ p }}{% endfor %}",
    ],
)
def test_huge_output_is_capped(template: str) -> None:
    output = render_template(jinja(template), BIG)
    assert output is not None
    assert len(output) == MAX_OUTPUT_CHARS
    assert output.endswith("\u2026")


@pytest.mark.usefixtures("fast")
@pytest.mark.parametrize(
    "template",
    [
        "{% for a in (1..100) %}{% for b in (1..100) %}ab{% endfor %}{% endfor %}",
        "{% for i in (1..10000) %}{{ text }}{% endfor %}",
        "{{ text }}",
        "{% for p in pairs %}{{ p }}{% endfor %}",
        "{% capture s %}{{ text | truncate: 100000 }}{% endcapture %}{{ s }}",
    ],
)
def test_huge_liquid_output_is_capped(template: str) -> None:
    output = render_template(template, BIG)
    assert output is not None
    assert len(output) == MAX_OUTPUT_CHARS
    assert output.endswith("\u2026")


def test_output_at_the_cap_is_not_cut() -> None:
    exact = "a" * MAX_OUTPUT_CHARS
    assert render_template("{{ t }}", {"t": exact}) == exact


# --------------------------------------------------------------------------- properties

TEMPLATE_TEXT = st.lists(
    st.sampled_from(
        [*"{}%#|:-.,()[]'\" =<>~*+", "if ", "for ", " in ", "x", "name", "items", "endif",
         "endfor", "elsif", "assign ", "case ", "when ", "contains", "nil", "..", "1",
         "range(", "size", "default:", "{{", "}}", "{%", "%}"]
    ),
    max_size=30,
).map("".join)


@settings(max_examples=300, deadline=None)
@given(template=TEMPLATE_TEXT)
def test_render_never_raises_and_respects_the_cap(template: str) -> None:
    output = render_template(template, CONTEXT)
    assert output is None or len(output) <= MAX_OUTPUT_CHARS
    check = check_template(template)
    assert check["status"] in ("valid", "invalid")
    if output is not None:
        assert check["status"] == "valid"
