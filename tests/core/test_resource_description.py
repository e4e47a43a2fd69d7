"""One description per resource: a model's fields say what is stored, shown and server-set."""

from __future__ import annotations

from datetime import datetime

import attrs

from governance_core.models import RESOURCE_MODELS
from governance_core.models.agents import AgentSpan, Alert
from governance_core.models.description import (
    described,
    description_of,
    enum,
    hidden_fields,
    resource,
    sensitive_fields,
    server_managed_fields,
    stored_columns,
    view_notations,
)
from governance_core.storage.schema import TABLES
from governance_core.views import model_view


@resource("sample", shown_on_read="~int")
@attrs.frozen
class Sample:
    """A resource as a team would add one, or add a field to one."""

    id: str
    name: str = attrs.field(metadata=described(column=True))
    weight: float | None = attrs.field(default=None, metadata=described(column=True))
    count: int = attrs.field(default=0, metadata=described(column=True, managed=True))
    kind: str = attrs.field(default="a", metadata=described(notation=enum("a", "b")))
    secret: str | None = attrs.field(default=None, metadata=described(shown=False))
    owner_id: str | None = None
    seen_at: datetime | None = None
    tags: list[str] = attrs.field(factory=list)


def test_one_declaration_gives_the_columns_the_view_and_the_schema() -> None:
    assert stored_columns(Sample) == ("name", "weight:real", "count:integer")
    assert dict(view_notations(Sample)) == {
        "id": "id", "name": "str", "weight": "num?", "count": "int", "kind": "enum:a,b",
        "owner_id": "id?", "seen_at": "ts?", "tags": "list:str", "shown_on_read": "~int",
    }
    assert hidden_fields(Sample) == {"secret"}
    assert server_managed_fields(Sample) == {"count", "shown_on_read"}
    view = model_view(Sample, {"id": "s1", "name": "n", "secret": "x"}, shown_on_read=3)
    assert view == {
        "id": "s1", "name": "n", "weight": None, "count": 0, "kind": "a", "owner_id": None,
        "seen_at": None, "tags": [], "shown_on_read": 3, "type": "sample",
    }


def test_a_span_field_declared_a_column_is_a_column_of_the_spans_table() -> None:
    columns = {column.name for column in TABLES["agent_spans"].columns}
    assert columns == {"account_id", "inserted_at", *stored_columns(AgentSpan)}
    assert "parent_span_id" in columns and "payload" not in columns


def test_every_resource_table_takes_its_columns_from_its_model() -> None:
    tables = {table.kind: table for table in TABLES.values() if table.kind is not None}
    for model in RESOURCE_MODELS:
        table = tables.get(description_of(model).kind)
        if table is None:
            continue
        declared = {
            column.name if column.type == "text" else f"{column.name}:{column.type}"
            for column in table.columns
        }
        assert declared - {"account_id", "inserted_at"} == set(stored_columns(model)), model


def test_values_computed_on_read_do_not_shadow_a_field() -> None:
    for model in RESOURCE_MODELS:
        fields = {field.name for field in attrs.fields(model)}
        assert not fields & set(description_of(model).computed), model
        assert hidden_fields(model) <= fields, model


def test_the_payloads_that_may_hold_sensitive_values_are_declared() -> None:
    assert sensitive_fields(AgentSpan) == ("payload", "result_payload")
    assert sensitive_fields(Alert) == ("payload",)
    assert sensitive_fields(Sample) == ()
