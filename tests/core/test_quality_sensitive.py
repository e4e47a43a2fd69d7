"""Sensitive values in quality payloads are kept apart as in spans and alerts (decisions 11).

The class test writes a marked value through every operation that takes a payload (span create
and finish, alert raise, record_quality, the older instance update) on a file store with a key,
and then finds the value in no file, in clear; single-run reads of account tokens put it back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from governance_core import Governance, ValidationErrors
from governance_core.clock import FixedClock
from governance_core.encryption import generate_key
from governance_core.ids import SeededIds
from governance_core.service import Bootstrap
from tests.core.insight_world import InsightWorld, insight_world

SECRET = "QQ123456C"
MARKER = {"$sensitive": "string", "labels": ["pii"], "value": SECRET}
REDACTED = {"$sensitive": "string", "labels": ["pii"]}


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> InsightWorld:
    return insight_world(gov, boot)


def record(world: InsightWorld, payload: Any, **members: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.details(
        "agent_instances/record_quality", agent_instance_id=world.instance_id,
        name="accuracy", payload=payload, **members,
    )
    return result


def show(world: InsightWorld, **query: Any) -> dict[str, Any]:
    result: dict[str, Any] = world.caller.details(
        "agent_instances/show", agent_instance_id=world.instance_id, **query
    )
    return result


def test_record_quality_keeps_the_value_apart(world: InsightWorld) -> None:
    written = record(world, {"score": 4, "reviewer_id": MARKER}, sensitive_encoding=True)
    assert written["quality_payloads"]["accuracy"] == {"score": 4, "reviewer_id": REDACTED}
    assert show(world)["quality_payloads"]["accuracy"]["reviewer_id"] == MARKER
    assert show(world, redacted=True)["quality_payloads"]["accuracy"]["reviewer_id"] == REDACTED
    listed = world.caller.call("agent_instances/list")["summaries"]
    assert all(SECRET not in str(row) for row in listed)
    ingestion = world.ingestion()
    seen = ingestion.details("agent_instances/show", agent_instance_id=world.instance_id)
    assert seen["quality_payloads"]["accuracy"]["reviewer_id"] == REDACTED
    spans = world.caller.call(
        "agent_spans/list", agent_instance_id=world.instance_id, purpose="quality"
    )["summaries"]
    assert SECRET not in str(spans)


def test_a_new_payload_or_a_removal_forgets_the_kept_value(world: InsightWorld) -> None:
    record(world, {"reviewer_id": MARKER}, sensitive_encoding=True)
    record(world, {"score": 1})
    assert show(world)["quality_payloads"]["accuracy"] == {"score": 1}
    assert world.gov.store.query("sensitive_values") == []
    record(world, {"reviewer_id": MARKER}, sensitive_encoding=True)
    record(world, None)
    assert "accuracy" not in show(world)["quality_payloads"]
    assert world.gov.store.query("sensitive_values") == []


def test_the_older_update_form_keeps_values_apart_too(world: InsightWorld) -> None:
    world.caller.call(
        "agent_instances/update", agent_instance_id=world.instance_id,
        quality_payload={"accuracy": {"id": MARKER}, "other": {"n": 1}}, sensitive_encoding=True,
    )
    assert show(world, redacted=True)["quality_payloads"] == {
        "accuracy": {"id": REDACTED}, "other": {"n": 1},
    }
    assert show(world)["quality_payloads"]["accuracy"]["id"] == MARKER


def test_a_bad_marker_is_422_at_its_path(world: InsightWorld) -> None:
    with pytest.raises(ValidationErrors) as caught:
        record(world, {"card": {"$sensitive": "number", "value": "x"}}, sensitive_encoding=True)
    errors = caught.value.to_payload()["errors"]
    assert errors["payload"]["errors"]["card"]["code"] == "invalid_value"
    with pytest.raises(ValidationErrors) as caught:
        world.caller.call(
            "agent_instances/update", agent_instance_id=world.instance_id,
            quality_payload={"accuracy": {"card": {"$sensitive": "string"}}},
            sensitive_encoding=True,
        )
    errors = caught.value.to_payload()["errors"]
    nested = errors["quality_payload"]["errors"]["accuracy"]["errors"]["card"]
    assert nested["code"] == "invalid_value"


def test_every_payload_write_keeps_no_value_in_clear_on_disk(tmp_path: Path) -> None:
    key = generate_key()
    gov = Governance.open(
        tmp_path / "store.db", encryption_key=key, clock=FixedClock(), ids=SeededIds(3)
    )
    world = insight_world(gov, gov.bootstrap())
    secrets = {name: f"secret-{name}-8841" for name in ("span", "finish", "alert", "q", "upd")}

    def marked(name: str) -> dict[str, Any]:
        return {"$sensitive": "string", "value": secrets[name]}

    span = world.span("read_pii", status="active", payload={"v": marked("span")},
                      sensitive_encoding=True)
    world.finish(span["id"], result_payload={"v": marked("finish")}, sensitive_encoding=True)
    world.caller.call("alerts/raise", agent_instance_id=world.instance_id, name="overspend",
                      severity="warning", payload={"v": marked("alert")},
                      payload_sensitive_encoding=True)
    record(world, {"v": marked("q")}, sensitive_encoding=True)
    world.caller.call("agent_instances/update", agent_instance_id=world.instance_id,
                      quality_payload={"other": {"v": marked("upd")}}, sensitive_encoding=True)
    shown = show(world)["quality_payloads"]
    assert shown["other"]["v"]["value"] == secrets["upd"]
    gov.close()
    content = b"".join(path.read_bytes() for path in tmp_path.iterdir())
    for secret in secrets.values():
        assert secret.encode() not in content, secret
