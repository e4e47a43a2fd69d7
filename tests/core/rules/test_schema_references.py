"""Untrusted schemas never cause I/O: references resolve inside the schema or are reported.

A listening socket records every connection; each reference form (an absolute ``$ref``, an
``$id`` with a relative ``$ref``, ``$dynamicRef``, a nested or ``$defs`` reference, ``$schema``,
a ``file:`` URI) is checked, used to validate payloads and stored with a span, and the socket
must record nothing.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from governance_core.rules.payload_validation import outside_references, validate_payload
from governance_core.rules.schemas import check_json_schema
from governance_core.service import Bootstrap, Governance
from tests.core.runs import account_caller, make_agent


class Listener:
    """A TCP socket on 127.0.0.1 that accepts, records and closes every connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.sock.settimeout(0.05)
        self.port = self.sock.getsockname()[1]
        self.connections: list[tuple[str, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, address = self.sock.accept()
            except (TimeoutError, OSError):
                continue
            self.connections.append(address)
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def reference_forms(port: int) -> dict[str, tuple[dict[str, Any], str]]:
    """Each form of reference, as a schema and the reference it must report."""
    base = f"http://127.0.0.1:{port}"
    return {
        "absolute $ref": ({"$ref": f"{base}/schema.json"}, f"{base}/schema.json"),
        "$id and relative $ref": (
            {"$id": f"{base}/root/", "properties": {"a": {"$ref": "other.json"}}}, "other.json"
        ),
        "$dynamicRef": ({"$dynamicRef": f"{base}/meta#node"}, f"{base}/meta#node"),
        "nested in items": (
            {"type": "array", "items": {"$ref": f"{base}/item.json"}}, f"{base}/item.json"
        ),
        "inside $defs": (
            {"$defs": {"x": {"$ref": f"{base}/defs.json"}}, "$ref": "#/$defs/x"},
            f"{base}/defs.json",
        ),
        "nested $id then relative": (
            {"properties": {"a": {"$id": f"{base}/sub/", "$ref": "leaf.json"}}}, "leaf.json"
        ),
        "file uri": ({"$ref": "file:///etc/passwd"}, "file:///etc/passwd"),
        "https": ({"$ref": f"https://127.0.0.1:{port}/s.json"}, f"https://127.0.0.1:{port}/s.json"),
    }


def test_every_reference_form_is_reported_and_never_fetched(listener: Listener) -> None:
    for form, (schema, reference) in reference_forms(listener.port).items():
        assert outside_references(schema) == [reference], form
        checked = check_json_schema(schema)
        assert checked["status"] == "invalid", form
        assert checked["outside_references"] == [reference], form
        for payload in ({"a": 1}, [1, 2], "x"):
            result = validate_payload(schema, payload)
            assert result["status"] in ("unchecked", "valid", "invalid"), form
    assert listener.connections == []


def test_a_schema_naming_a_remote_meta_schema_connects_nowhere(listener: Listener) -> None:
    schema = {"$schema": f"http://127.0.0.1:{listener.port}/meta", "type": "object"}
    validate_payload(schema, {"a": 1})
    check_json_schema(schema)
    assert listener.connections == []


def test_internal_references_resolve_and_are_not_reported() -> None:
    schema = {
        "$id": "https://schemas.example/loan.json",
        "$defs": {
            "money": {"type": "number", "minimum": 0},
            "named": {"$anchor": "named", "type": "string"},
            "remote_id": {"$id": "part.json", "type": "integer"},
        },
        "properties": {
            "amount": {"$ref": "#/$defs/money"},
            "name": {"$ref": "#named"},
            "count": {"$ref": "part.json"},
            "meta": {"$ref": "https://json-schema.org/draft/2020-12/schema"},
        },
    }
    assert outside_references(schema) == []
    assert check_json_schema(schema) == {"status": "valid", "message": None}
    assert validate_payload(schema, {"amount": -1, "name": 3, "count": "x"})["status"] == "invalid"
    assert validate_payload(schema, {"amount": 1, "name": "a", "count": 2})["status"] == "valid"


def test_a_span_alert_and_quality_payload_are_stored_with_the_reference_reported(
    gov: Governance, boot: Bootstrap, listener: Listener
) -> None:
    caller = account_caller(gov, boot)
    agent = make_agent(caller)
    forms = reference_forms(listener.port)
    span_types = [
        {"name": f"type{index}", "params_schema": schema, "result_schema": schema}
        for index, (schema, _) in enumerate(forms.values())
    ]
    remote = {"$ref": f"http://127.0.0.1:{listener.port}/payload.json"}
    run = caller.details("agent_instances/register", {
        "agent_id": agent["id"],
        "agent_version": {"name": "Reviewer", "external_identifier": "1"},
        "agent_schema_version": {
            "external_identifier": "s1", "span_type_schemas": span_types,
            "alert_schemas": [{"name": "slow", "schema": remote}],
            "quality_schemas": [{"name": "accuracy", "schema": remote}],
        },
    })
    version = caller.details("agent_versions/show", agent_version_id=run["agent_version_id"])
    schema_version = caller.details(
        "agent_schema_versions/show",
        agent_schema_version_id=version["agent_schema_version_id"],
    )
    for index, (_, reference) in enumerate(forms.values()):
        entry = schema_version["span_type_schemas"][f"type{index}"]
        assert entry["params_schema_validation"]["outside_references"] == [reference]
        span = caller.details("agent_spans/create", {"details": {
            "agent_instance_id": run["id"], "schema_name": f"type{index}", "status": "complete",
            "payload": {"a": 1}, "result_payload": {"a": 1},
        }})
        stored = caller.details("agent_spans/show", agent_span_id=span["id"])
        assert stored["payload"] == {"a": 1}
        checked = stored["payload_validation"]
        assert checked["status"] in ("unchecked", "valid", "invalid")
        if checked["status"] == "unchecked":
            assert reference in checked["message"]
        if index == 0:
            assert checked["status"] == "unchecked"
    alert = caller.details("alerts/raise", {
        "agent_instance_id": run["id"], "name": "slow", "severity": "warning",
        "payload": {"seconds": 3},
    })
    assert alert["payload"] == {"seconds": 3}
    caller.call("agent_instances/record_quality", {
        "agent_instance_id": run["id"], "name": "accuracy", "payload": {"score": 1},
    })
    assert listener.connections == []
