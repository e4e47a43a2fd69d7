"""The work a payload schema can cause: refused at registration, bounded at run time."""

from __future__ import annotations

import math
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.errors import FieldErrors, ValidationErrors
from governance_core.ids import SeededIds
from governance_core.rules import payload_validation
from governance_core.rules.payload_validation import (
    ANALYSED_DEPTH,
    FAST_VISITS,
    FAST_WORK,
    MAX_SCHEMA_VISITS,
    VALIDATION_STEPS,
    _fast_allowed,
    schema_cost,
    schema_cost_problem,
    validate_payload,
)
from governance_core.rules.schemas import normalize_schemas
from governance_core.service import Governance
from governance_core.storage import MemoryStore


def doubling_chain(links: int) -> dict[str, Any]:
    """Each of ``links`` definitions applies the next one twice: 2**links visits in all."""
    definitions: dict[str, Any] = {
        f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}, {"$ref": f"#/$defs/d{i + 1}"}]}
        for i in range(links)
    }
    definitions[f"d{links}"] = {"type": "object"}
    return {"$defs": definitions, "$ref": "#/$defs/d0"}


def test_a_doubling_chain_costs_two_to_its_length() -> None:
    # A link is one visit plus twice (its {"$ref"} entry and the next link); the last link is
    # one visit, the root one more: 2**(K+2) - 2 in all.
    for links in (1, 5, 9):
        assert schema_cost(doubling_chain(links)) == 2 ** (links + 2) - 2


def test_a_long_chain_is_counted_without_evaluating_it() -> None:
    # 2**23 evaluations never finished; counting them follows each link once.
    assert schema_cost(doubling_chain(23)) > MAX_SCHEMA_VISITS
    assert schema_cost_problem(doubling_chain(23)) is not None
    assert schema_cost_problem(doubling_chain(7)) is None


def test_a_chain_longer_than_the_stack_is_counted_without_recursion() -> None:
    assert math.isinf(schema_cost(doubling_chain(3000)))


def test_a_reference_cycle_on_one_value_has_no_bound() -> None:
    assert math.isinf(schema_cost({"$ref": "#"}))
    looping = {"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/b"}]},
                         "b": {"not": {"$ref": "#/$defs/a"}}}, "$ref": "#/$defs/a"}
    assert math.isinf(schema_cost(looping))
    problem = schema_cost_problem(looping)
    assert problem is not None and "without end" in problem


@pytest.mark.parametrize(
    "schema",
    [
        # A binary tree: left and right never apply to the same member.
        {"$defs": {"node": {"type": "object", "properties": {
            "left": {"$ref": "#/$defs/node"}, "right": {"$ref": "#/$defs/node"},
            "value": {"type": "integer"}}}}, "$ref": "#/$defs/node"},
        # A list tree.
        {"$defs": {"n": {"properties": {"children": {"items": {"$ref": "#/$defs/n"}}}}},
         "$ref": "#/$defs/n"},
        {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(500)}},
        {"anyOf": [{"type": "string"}, {"type": "integer"}, {"$ref": "#/$defs/x"}],
         "$defs": {"x": {"type": "array", "items": {"$ref": "#"}}}},
    ],
)
def test_recursive_and_wide_schemas_that_stay_linear_are_accepted(schema: dict[str, Any]) -> None:
    # The most visits at any one value, at every depth down to ANALYSED_DEPTH.
    assert schema_cost(schema) <= 8
    assert schema_cost_problem(schema) is None


def test_doubling_one_level_down_per_member_is_counted_at_depth() -> None:
    # Each array level applies the next definition twice to every item: 2**depth at depth.
    definitions: dict[str, Any] = {
        f"d{i}": {"items": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2}} for i in range(40)
    }
    definitions["d40"] = {}
    schema = {"$defs": definitions, "$ref": "#/$defs/d0"}
    assert ANALYSED_DEPTH >= 40
    assert schema_cost(schema) > MAX_SCHEMA_VISITS


def test_unevaluated_keywords_count_their_in_place_work_twice() -> None:
    plain = {"allOf": [{"type": "object"}, {"type": "object"}]}
    assert schema_cost(plain) == 3
    assert schema_cost({**plain, "unevaluatedProperties": False}) == 5


def test_non_schemas_cost_one_visit() -> None:
    assert schema_cost(True) == 1
    assert schema_cost("not a schema") == 1
    assert schema_cost({"allOf": "not a list", "$ref": 3}) == 1


# -- at registration -------------------------------------------------------------------------


def error_tree(raw: dict[str, Any]) -> dict[str, Any]:
    errors = FieldErrors()
    normalize_schemas(raw, errors, ("agent_schema_version",))
    with pytest.raises(ValidationErrors) as excinfo:
        errors.raise_if_any()
    tree: dict[str, Any] = excinfo.value.to_payload()["errors"]["agent_schema_version"]["errors"]
    return tree


def test_a_costly_schema_is_refused_naming_its_member() -> None:
    bomb = doubling_chain(23)
    tree = error_tree({
        "span_type_schemas": [
            {"name": "fine", "params_schema": {"type": "object"}},
            {"name": "bomb", "params_schema": {"type": "object"}, "result_schema": bomb},
        ],
        "alert_schemas": {"loud": {"schema": bomb}},
        "quality_schemas": [{"name": "q", "schema": bomb}],
        "span_schemas": {"legacy": bomb},
    })
    refused = {
        "span_type_schemas": {"1": "result_schema"},
        "alert_schemas": {"loud": "schema"},
        "quality_schemas": {"0": "schema"},
    }
    for group, entries in refused.items():
        for key, member in entries.items():
            error = tree[group]["errors"][key]["errors"][member]
            assert error["code"] == "invalid_value"
            assert f"at most {MAX_SCHEMA_VISITS}" in error["message"]
    assert tree["span_schemas"]["errors"]["legacy"]["code"] == "invalid_value"
    assert "0" not in tree["span_type_schemas"]["errors"]


# -- at run time -----------------------------------------------------------------------------


def test_a_costly_stored_schema_stops_its_check_and_reports_it() -> None:
    # Schemas stored before the registration bound are still checked within the steps:
    # 2**16 reference visits unbounded, a few thousand with the steps.
    result = validate_payload(doubling_chain(16), {"a": 1})
    assert result["status"] == "unchecked"
    assert f"after {VALIDATION_STEPS} steps" in result["message"]


def test_steps_are_counted_per_keyword_and_ordinary_checks_stay_within_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    schema = {"$defs": {"item": {"type": "object", "properties": {"n": {"type": "integer"}}}},
              "type": "array", "items": {"$ref": "#/$defs/item"}}
    assert validate_payload(schema, [{"n": i} for i in range(100)])["status"] == "valid"
    assert validate_payload(schema, [{"n": "x"}])["status"] == "invalid"
    monkeypatch.setattr(payload_validation, "VALIDATION_STEPS", 50)
    stopped = validate_payload(schema, [{"n": i} for i in range(100)])
    assert stopped["status"] == "unchecked"


def test_the_rust_validator_runs_only_where_its_work_is_bounded_by_the_payload() -> None:
    big = list(range(100_000))
    assert _fast_allowed(FAST_VISITS, big)
    assert _fast_allowed(FAST_VISITS + 1, [1, 2, 3])
    assert not _fast_allowed(FAST_WORK / 10_000, big)
    # Many alternatives on every item of a large array: checked by the counted validator.
    schema = {"type": "array", "items": {"anyOf": [{"const": i} for i in range(50)]}}
    assert validate_payload(schema, [0] * 1000)["status"] == "valid"
    assert validate_payload(schema, [0] * 400_000)["status"] == "unchecked"


def test_registering_a_costly_schema_is_refused_in_the_interface_error_shape() -> None:
    gov = Governance(MemoryStore(), clock=FixedClock(), ids=SeededIds(3))
    boot = gov.bootstrap()
    agent = gov.call("agents/create", {"name": "Reviewer"}, token=boot.token)["details"]
    body = {
        "agent_id": agent["id"],
        "agent_version": {"external_identifier": "1.0.0"},
        "agent_schema_version": {"span_type_schemas": [
            {"name": "llm", "params_schema": doubling_chain(23)},
        ]},
    }
    with pytest.raises(ValidationErrors) as raised:
        gov.call("agent_instances/register", body, token=boot.token)
    payload = raised.value.to_payload()
    assert payload["code"] == "validation_errors"
    member = payload["errors"]["agent_schema_version"]["errors"]["span_type_schemas"]["errors"]
    assert member["0"]["errors"]["params_schema"]["code"] == "invalid_value"
    assert gov.call("agent_instances/list", {}, token=boot.token)["summaries"] == []
