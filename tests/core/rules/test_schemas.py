"""Normalising declared schemas: accepted forms, defaults, checks, errors and content hashes."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governance_core.errors import FieldErrors, ValidationErrors
from governance_core.rules.schemas import DeclaredSchemas, check_json_schema, normalize_schemas


def normalized(raw: dict[str, Any]) -> DeclaredSchemas:
    errors = FieldErrors()
    declared = normalize_schemas(raw, errors, ("agent_schema_version",))
    errors.raise_if_any()
    return declared


def error_tree(raw: dict[str, Any]) -> dict[str, Any]:
    errors = FieldErrors()
    normalize_schemas(raw, errors, ("agent_schema_version",))
    with pytest.raises(ValidationErrors) as excinfo:
        errors.raise_if_any()
    tree: dict[str, Any] = excinfo.value.to_payload()["errors"]["agent_schema_version"]["errors"]
    return tree


def test_list_map_and_legacy_forms_are_one_content() -> None:
    as_list = normalized({"span_type_schemas": [
        {"name": "llm", "params_schema": {"type": "object"}, "result_schema": {"type": "string"}},
    ]})
    as_map = normalized({"span_type_schemas": {
        "llm": {"params_schema": {"type": "object"}, "result_schema": {"type": "string"},
                "title": "llm"},
    }})
    legacy = normalized({"span_schemas": {"llm": {"type": "object"}},
                         "span_result_schemas": {"llm": {"type": "string"}}})
    assert as_list == as_map == legacy
    assert as_list.content_hash() == legacy.content_hash()
    assert as_list.span_type_schemas["llm"] == {
        "name": "llm", "title": "llm", "description": None, "params_schema": {"type": "object"},
        "result_schema": {"type": "string"}, "template": None, "data_risk": None,
    }


def test_span_type_entries_win_over_legacy_maps() -> None:
    declared = normalized({
        "span_type_schemas": [{"name": "a", "params_schema": {"type": "array"}}],
        "span_schemas": {"a": {"type": "object"}, "b": {"type": "object"}},
    })
    assert declared.span_type_schemas["a"]["params_schema"] == {"type": "array"}
    assert declared.span_type_schemas["b"]["result_schema"] == {}


names = st.text("abcdefgh:-", min_size=1, max_size=6)
schemas = st.dictionaries(st.sampled_from(["type", "title", "minimum"]),
                          st.sampled_from(["object", "string", 1, 2]), max_size=3)


@given(entries=st.dictionaries(names, schemas, min_size=1, max_size=5), data=st.data())
def test_content_hash_ignores_entry_order(entries: dict[str, Any], data: st.DataObject) -> None:
    shuffled = data.draw(st.permutations(list(entries.items())))
    first = normalized({"quality_schemas": [{"name": n, "schema": s} for n, s in entries.items()]})
    second = normalized({"quality_schemas": [{"name": n, "schema": s} for n, s in shuffled]})
    assert first.content_hash() == second.content_hash()
    changed = normalized({"quality_schemas": [
        {"name": n, "schema": {**s, "description": "changed"}} for n, s in entries.items()
    ]})
    assert changed.content_hash() != first.content_hash()


def test_checked_reports_invalid_schemas_without_refusing() -> None:
    checked = normalized({
        "span_type_schemas": [{"name": "t", "params_schema": "not a schema",
                               "template": "{{ x }}"}],
        "alert_schemas": {"slow": {"schema": {"type": "object"}}},
    }).checked()
    entry = checked["span_type_schemas"]["t"]
    assert entry["params_schema_validation"]["status"] == "invalid"
    assert entry["result_schema_validation"] == {"status": "valid", "message": None}
    assert entry["template_validation"]["status"] == "valid"
    assert checked["alert_schemas"]["slow"]["schema_validation"]["status"] == "valid"
    assert checked["alert_schemas"]["slow"]["template_validation"] is None
    assert checked["quality_schemas"] == {}


def test_check_json_schema() -> None:
    assert check_json_schema({"type": "object"}) == {"status": "valid", "message": None}
    assert check_json_schema(True)["status"] == "valid"
    bad = check_json_schema({"type": "whatever"})
    assert bad["status"] == "invalid" and "whatever" in bad["message"]


def test_shape_errors_name_the_entry() -> None:
    tree = error_tree({
        "span_type_schemas": [{"params_schema": {}}, "nope", {"name": "a"}, {"name": "a"},
                              {"name": "b", "title": 5}],
        "alert_schemas": {"x": {"data_risk": "high"}},
        "quality_schemas": 3,
        "span_schemas": ["x"],
    })
    span_types = tree["span_type_schemas"]["errors"]
    assert span_types["0"]["errors"]["name"]["code"] == "required_value"
    assert span_types["1"]["code"] == "invalid_value"
    assert span_types["3"]["errors"]["name"]["code"] == "invalid_value"
    assert span_types["4"]["errors"]["title"]["code"] == "invalid_value"
    assert "2" not in span_types
    assert tree["alert_schemas"]["errors"]["x"]["errors"]["data_risk"]["code"] == "invalid_value"
    assert tree["quality_schemas"]["code"] == "invalid_value"
    assert tree["span_schemas"]["code"] == "invalid_value"


def test_data_risk_errors_nest_under_the_entry() -> None:
    tree = error_tree({"span_type_schemas": {"llm": {
        "data_risk": {"params_data_categories": {"classification": "top"}},
    }}})
    risk = tree["span_type_schemas"]["errors"]["llm"]["errors"]["data_risk"]
    assert risk["errors"]["params_data_categories"]["errors"]["classification"]["code"] == (
        "invalid_value"
    )
