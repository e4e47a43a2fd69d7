"""Policy text: what the engine refuses, with its message and line, and what it accepts."""

from __future__ import annotations

import pytest

from governance_core.errors import ValidationErrors
from governance_core.policies.engine import cedar_value, check_source
from tests.policies.support import RunWorld


def texts(source: str) -> list[str]:
    return [problem.text() for problem in check_source(source)]


def test_a_parse_error_names_its_line() -> None:
    source = (
        "// a budget\n"
        "forbid (principal, action, resource);\n"
        "forbid (principal, action, resource)\n"
        "  when { context.run. > 1 };\n"
    )
    assert texts(source) == ["line 4: unexpected token `>`"]


def test_an_unfinished_statement_is_found_at_its_end() -> None:
    assert texts("forbid (principal, action, resource);\n\nforbid (principal,\n") == [
        "line 3: unexpected end of input"
    ]


def test_an_attribute_outside_the_schema_is_refused_at_its_statement() -> None:
    source = (
        "forbid (principal, action, resource);\n"
        "forbid (principal, action, resource) when { context.run.costs > 1 };\n"
        "forbid (principal, action, resource) when { resource.owner == \"x\" };\n"
    )
    assert texts(source) == [
        "line 2: attribute `run.costs` in context not found",
        "line 3: attribute `owner` on entity type `Model` not found",
        "line 3: attribute `owner` on entity type `SpanType` not found",
        "line 3: attribute `owner` on entity type `Tool` not found",
    ]


def test_a_type_mismatch_is_refused() -> None:
    assert texts(
        'forbid (principal, action, resource) when { context.run.cost_micro_usd == "a" };'
    )


def test_args_members_are_open_but_the_rest_of_their_condition_is_checked() -> None:
    assert texts(
        "forbid (principal, action, resource) when { context.args.amount > 100 };"
    ) == []
    assert texts(
        "forbid (principal, action, resource)"
        " when { context.args has amount && context.run.nothing > 1 };"
    ) == ["line 1: attribute `run.nothing` in context not found"]


def test_permits_and_templates_are_refused() -> None:
    assert texts("permit (principal, action, resource);")[0].startswith(
        "line 1: a policy decides by forbid statements"
    )
    assert texts("forbid (principal == ?principal, action, resource);")[0].startswith(
        "templates"
    )


def test_text_without_a_statement_is_refused() -> None:
    assert texts("// only a comment\n") == ["line 1: the policy holds no statement"]


def test_a_semicolon_in_a_string_does_not_end_a_statement() -> None:
    source = (
        '@reason("a; b") forbid (principal, action, resource == Tool::"x;y");\n'
        "forbid (principal, action, resource) when { context.run.x > 1 };\n"
    )
    assert texts(source) == ["line 2: attribute `run.x` in context not found"]


def test_create_answers_422_naming_source(world: RunWorld) -> None:
    with pytest.raises(ValidationErrors) as raised:
        world.policy("forbid (principal, action, resource)\n  when { context.run. > 1 };")
    error = raised.value.to_payload()["errors"]["source"]
    assert error == {
        "status": "error", "code": "invalid_value", "message": "line 2: unexpected token `>`",
    }


def test_validate_reports_without_storing(world: RunWorld) -> None:
    answer = world.session.call("policies/validate", {"source": "forbid (principal,"})
    assert answer == {
        "status": "success", "valid": False,
        "problems": [{"message": "unexpected end of input", "line": 1}],
    }
    good = world.session.call("policies/validate", {
        "source": "forbid (principal, action, resource);",
    })
    assert good == {"status": "success", "valid": True, "problems": []}
    assert world.session.call("policies/list", {})["summaries"] == []


@pytest.mark.parametrize(("value", "expected"), [
    ({"a": None, "b": [1, None, True]}, {"b": [1, True]}),
    (150.0, 150),
    (150.5, {"__extn": {"fn": "decimal", "arg": "150.5"}}),
    (0.123456, "0.123456"),
    (2**70, str(2**70)),
    ("text", "text"),
])
def test_json_values_are_given_to_cedar_as_it_reads_them(value: object, expected: object) -> None:
    assert cedar_value(value) == expected
