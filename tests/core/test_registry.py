"""The registry is an object built from operation modules; bulk is one of its operations."""

from __future__ import annotations

import types
from typing import Any

import pytest

from governance_core.clock import FixedClock
from governance_core.errors import InvalidValue, NotFound, ValidationErrors
from governance_core.fields import Fields
from governance_core.ids import SeededIds
from governance_core.operations import default_registry, operation_modules
from governance_core.operations.teams import create_team
from governance_core.registry import ANY_SCOPE, Context, Registry, operation
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore, SQLiteStore, open_store
from tests.stores import STORE_KINDS, make_store


@operation("test/note", write=True, scopes=ANY_SCOPE)
def note(ctx: Context, fields: Fields) -> dict[str, Any]:
    """Store a team named by ``name``, then fail when ``fail`` is sent."""
    ctx.store.put("teams", {"id": fields.str("name") or "", "account_id": ctx.account_id})
    if fields.bool("fail"):
        raise InvalidValue("asked to fail")
    return {"status": "success"}


def test_the_default_registry_holds_every_marked_handler_and_bulk() -> None:
    registry = default_registry()
    assert registry["teams/create"].handler is create_team
    assert registry["bulk"].write and not registry["bulk"].idempotent
    marked = sum(
        1 for module in operation_modules() for value in vars(module).values()
        if getattr(value, "__module__", None) == module.__name__
        and hasattr(value, "__governance_operation__")
    )
    assert len(registry) == marked


def _this_module() -> types.ModuleType:
    module = types.ModuleType(__name__)
    vars(module).update({"note": note, "create_team": create_team})
    return module


def test_a_registry_is_built_only_from_the_modules_it_is_given() -> None:
    # create_team is imported here, not defined here: it is not picked up twice.
    registry = Registry.from_modules([_this_module()])
    assert list(registry) == ["test/note"]
    with pytest.raises(ValueError, match="registered twice"):
        Registry([registry["test/note"], registry["test/note"]])


def _governance(store: Any, *operations: str) -> tuple[Governance, Bootstrap]:
    base = default_registry()
    chosen = [base[name] for name in operations]
    registry = Registry([*chosen, Registry.from_modules([_this_module()])["test/note"]])
    gov = Governance(store, clock=FixedClock(), ids=SeededIds(3), registry=registry)
    return gov, gov.bootstrap()


@pytest.mark.parametrize("store", STORE_KINDS)
def test_a_failing_bulk_item_is_undone_alone_and_stops_the_rest(store: str) -> None:
    gov, boot = _governance(make_store(store), "bulk")
    items = [
        {"_type": "test/note", "idempotency_key": "item-0001", "name": "first"},
        {"_type": "test/note", "idempotency_key": "item-0002", "name": "second", "fail": True},
        {"_type": "test/note", "idempotency_key": "item-0003", "name": "third"},
    ]
    outputs = gov.call("bulk", {"items": items}, token=boot.token)["outputs"]
    assert list(outputs) == ["item-0001", "item-0002"]
    assert outputs["item-0002"]["code"] == "invalid_value"
    assert gov.store.get("teams", "first") is not None
    assert gov.store.get("teams", "second") is None
    assert gov.store.get("teams", "third") is None
    # The stored key replays the first item; the second runs again.
    again = gov.call("bulk", {"items": items[:1]}, token=boot.token)["outputs"]
    assert again["item-0001"] == outputs["item-0001"]


def test_an_operation_outside_the_registry_is_unknown() -> None:
    gov, boot = _governance(MemoryStore(), "bulk")
    with pytest.raises(NotFound):
        gov.call("teams/create", {"name": "T"}, token=boot.token)
    with pytest.raises(ValidationErrors) as raised:
        gov.call("bulk", {"items": [
            {"_type": "teams/create", "idempotency_key": "item-0001", "name": "T"},
        ]}, token=boot.token)
    assert "unknown operation type" in str(raised.value.to_payload())


def test_open_store_reads_paths_and_sqlite_urls(tmp_path: Any) -> None:
    for location in (tmp_path / "a.db", f"sqlite:///{tmp_path / 'b.db'}", ":memory:"):
        store = open_store(location)
        assert isinstance(store, SQLiteStore)
        store.close()
    assert (tmp_path / "b.db").exists()
    with pytest.raises(ValueError, match="ftp://"):
        open_store("ftp://example.test/db")
