"""Payload checks and summaries are made before a write's transaction opens, never inside it.

A store that knows whether a transaction is open records, for every payload check the
validator makes and every summary rendered, whether one was: a span create, a bulk request of
creates, a quality record, an alert raise and an OpenTelemetry export make theirs outside.
A run whose schema version is not the one its checks were prepared for is checked inside, as
before, and the span records the checks of the run's own schema version.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import attrs
import pytest
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2

from governance_core.clock import FixedClock
from governance_core.context import Config, Context
from governance_core.domain import runs
from governance_core.encryption import PlaintextForTests
from governance_core.fields import Fields
from governance_core.ids import SeededIds
from governance_core.operations import default_registry
from governance_core.otel import ingest
from governance_core.otel.ingest import ExportSteps
from governance_core.otel.otlp_codec import decode_protobuf
from governance_core.registry import Registry
from governance_core.rules import payload_validation
from governance_core.rules.templates import render_template
from governance_core.service import Governance
from governance_core.storage.memory import MemoryStore
from tests.core.runs import Caller, account_caller, make_agent
from tests.core.span_world import register_run
from tests.otel.exports import export

CREATE = "agent_spans/create"


class TrackedStore(MemoryStore):
    """A store that knows how deep in transactions its caller is."""

    def __init__(self) -> None:
        super().__init__()
        self.depth = 0

    @contextmanager
    def transaction(self) -> Iterator[None]:
        self.depth += 1
        try:
            with super().transaction():
                yield
        finally:
            self.depth -= 1


@attrs.define
class Seen:
    """For each payload check and each summary rendered: whether a transaction was open."""

    checks: list[bool] = attrs.field(factory=list)
    renders: list[bool] = attrs.field(factory=list)

    @property
    def inside(self) -> int:
        return sum(self.checks) + sum(self.renders)


def governance(store: TrackedStore, registry: Registry | None = None) -> Governance:
    return Governance(
        store, clock=FixedClock(), ids=SeededIds(7), config=Config(cipher=PlaintextForTests()),
        registry=registry,
    )


@pytest.fixture
def store() -> TrackedStore:
    return TrackedStore()


@pytest.fixture
def seen(store: TrackedStore, monkeypatch: pytest.MonkeyPatch) -> Seen:
    """Record the store's transaction state at each check and render (patched before use)."""
    found = Seen()
    check = payload_validation._check

    def tracked_check(*args: Any) -> dict[str, Any]:
        found.checks.append(store.depth > 0)
        return check(*args)

    def tracked_render(*args: Any) -> str | None:
        found.renders.append(store.depth > 0)
        return render_template(*args)

    monkeypatch.setattr(payload_validation, "_check", tracked_check)
    monkeypatch.setattr(runs, "render_template", tracked_render)
    return found


def run_of(gov: Governance) -> tuple[Caller, str]:
    caller = account_caller(gov, gov.bootstrap())
    agent = make_agent(caller)
    return caller, register_run(caller, agent["id"])["id"]


def span(instance_id: str, number: int, **members: Any) -> dict[str, Any]:
    return {
        "agent_instance_id": instance_id, "schema_name": "llm", "status": "complete",
        "payload": {"prompt": f"question {number}"}, "result_payload": {"text": "answer"},
        "idempotency_key": f"span-{number:04d}", **members,
    }


def test_a_span_create_checks_its_payloads_before_its_transaction(
    store: TrackedStore, seen: Seen,
) -> None:
    caller, instance_id = run_of(governance(store))
    first = caller.details(CREATE, span(instance_id, 1))
    # The first span of a run reads the run once without a transaction; later ones do not.
    second = caller.details(CREATE, span(instance_id, 2, payload={"prompt": 2}))
    assert first["payload_validation"]["status"] == "valid"
    assert second["payload_validation"]["status"] == "invalid"
    assert second["result_payload_validation"]["status"] == "valid"
    assert second["summary"] == "2 -> answer"
    assert len(seen.checks) == 4 and len(seen.renders) == 2
    assert seen.inside == 0


def test_a_bulk_request_checks_every_item_before_its_transaction(
    store: TrackedStore, seen: Seen,
) -> None:
    caller, instance_id = run_of(governance(store))
    items = [{"_type": CREATE, **span(instance_id, number)} for number in range(30)]
    outputs = caller.call("bulk", {"items": items})["outputs"]
    assert [output["details"]["payload_validation"]["status"] for output in outputs.values()] \
        == ["valid"] * 30
    assert len(seen.checks) == 60
    assert seen.inside == 0


def test_calls_grouped_in_one_transaction_use_what_was_prepared_before_it(
    store: TrackedStore, seen: Seen,
) -> None:
    gov = governance(store)
    caller, instance_id = run_of(gov)
    bodies = [span(instance_id, number) for number in range(3)]
    prepared = [gov.prepare(CREATE, body, principal=caller.principal) for body in bodies]
    with gov.transaction():
        for body, value in zip(bodies, prepared, strict=True):
            gov.call(CREATE, body, principal=caller.principal, prepared=value)
    assert len(seen.checks) == 6
    assert seen.inside == 0
    # A call in a transaction without what was prepared for it checks its payloads there.
    with gov.transaction():
        gov.call(CREATE, span(instance_id, 9), principal=caller.principal)
    assert seen.checks[6:] == [True, True]


def test_quality_and_alert_payloads_are_checked_before_their_transaction(
    store: TrackedStore, seen: Seen,
) -> None:
    caller, instance_id = run_of(governance(store))
    caller.call("agent_instances/record_quality", {
        "agent_instance_id": instance_id, "name": "accuracy", "payload": {"score": "high"},
    })
    caller.call("agent_instances/update", {
        "agent_instance_id": instance_id, "quality_payload": {"accuracy": {"score": 0.5}},
    })
    alert = caller.details("alerts/raise", {
        "agent_instance_id": instance_id, "name": "slow", "severity": "warning",
        "payload": {"seconds": 12},
    })
    assert alert["summary"] == "took 12s"
    spans = caller.call("agent_spans/list", {"agent_instance_id": instance_id,
                                             "include_summaries": True})["summaries"]
    by_purpose = {(item["purpose"], item["summary"]): item["payload_validation"]["status"]
                  for item in spans}
    assert by_purpose == {
        ("quality", "score high"): "invalid", ("quality", "score 0.5"): "valid",
        ("alert", "took 12s"): "valid",
    }
    assert len(seen.checks) == 3
    assert seen.inside == 0


def test_an_opentelemetry_export_checks_its_spans_before_each_step(
    store: TrackedStore, seen: Seen,
) -> None:
    gov = governance(store)
    principal = gov.as_account(gov.bootstrap().account_id).principal
    # The first export makes the agent and its version in its first step: the schema version
    # of that step's run is not known before it, so its 3 spans are checked there. The next
    # step's run is registered with the version the first made, and is known beforehand.
    # Steps of so many spans however slow the machine (a step also ends after 50 ms by default).
    first = ingest(gov, principal, decode_protobuf(export(2, 3)),
                   steps=ExportSteps(max_spans=3, max_seconds=3600, pause_seconds=0))
    assert first.accepted == 6
    assert seen.checks == [True] * 6 + [False] * 6
    seen.checks.clear()
    seen.renders.clear()
    # New traces of the known agent version, two exports' worth of steps of them.
    steps = ExportSteps(max_spans=7, max_seconds=3600, pause_seconds=0)
    result = ingest(gov, principal, decode_protobuf(later_traces(export(3, 12))), steps=steps)
    assert (result.accepted, result.rejected) == (36, ())
    assert len(seen.checks) == 36 * 2 and len(seen.renders) == 36
    assert seen.inside == 0
    stored = [record for record in store.query("agent_spans") if record["purpose"] == "activity"]
    assert len(stored) == 42
    assert {record["payload_validation"]["status"] for record in stored} == {"valid"}


def later_traces(raw: bytes) -> bytes:
    """The export ``raw`` with other trace ids than :func:`export` gives (its traces are new)."""
    request = trace_service_pb2.ExportTraceServiceRequest.FromString(raw)
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                span.trace_id = (int.from_bytes(span.trace_id, "big") + 1000).to_bytes(16, "big")
    shifted: bytes = request.SerializeToString()
    return shifted


def switching_registry(switch: Callable[[], None]) -> Registry:
    """The default operations, with ``switch`` run right after each span create is prepared."""
    default = default_registry()
    prepare = default[CREATE].prepare
    assert prepare is not None

    def then_switch(ctx: Context, fields: Fields) -> object:
        prepared = prepare(ctx, fields)
        assert prepared is not None
        switch()
        return prepared

    return Registry(
        attrs.evolve(op, prepare=then_switch) if name == CREATE else op
        for name, op in default.items()
    )


def test_a_run_whose_schema_version_changed_since_the_checks_is_checked_inside(
    store: TrackedStore, seen: Seen,
) -> None:
    target: dict[str, str] = {}

    def switch() -> None:
        # The run now names a schema version whose llm type wants an integer prompt.
        record = store.get("agent_instances", target["run"])
        assert record is not None
        store.put("agent_instances", {
            **record, "agent_schema_version_id": target["schema_version"],
        })

    gov = governance(store, switching_registry(switch))
    caller, instance_id = run_of(gov)
    other = caller.details("agent_instances/register", {
        "agent_id": make_agent(caller, name="Other")["id"],
        "agent_version": {"external_identifier": "2"},
        "agent_schema_version": {"external_identifier": "s2", "span_type_schemas": [{
            "name": "llm", "title": "Integer call",
            "params_schema": {"type": "object", "properties": {"prompt": {"type": "integer"}}},
            "template": "prompt {{ prompt }}",
        }]},
    })
    target.update(run=instance_id, schema_version=other["agent_schema_version_id"])
    details = caller.details(CREATE, span(instance_id, 1))
    # Checked against the run's schema version as it is in the transaction, not as prepared.
    assert details["payload_validation"]["status"] == "invalid"
    assert details["schema_title"] == "Integer call"
    assert details["summary"] == "prompt question 1"
    # Both payloads were checked before the transaction against the old version, and again
    # inside against the run's (its result schema defaults to {}).
    assert seen.checks == [False, False, True, True]
    assert seen.renders == [False, True]


def test_prepared_checks_store_what_checks_made_inside_store() -> None:
    """The same requests give the same spans, prepared beforehand or checked inside."""
    without_prepare = Registry(
        attrs.evolve(op, prepare=None) for op in default_registry().values()
    )
    stored = []
    for registry in (None, without_prepare):
        gov = governance(TrackedStore(), registry)
        caller, instance_id = run_of(gov)
        created = [
            caller.details(CREATE, span(instance_id, number, payload=payload))
            for number, payload in enumerate([
                {"prompt": "hi"}, {"prompt": 3}, {}, {"prompt": {"$sensitive": True}},
            ])
        ]
        created.append(caller.details(CREATE, span(
            instance_id, 9, sensitive_encoding=True,
            payload={"prompt": {"$sensitive": "string", "labels": ["pii"], "value": "secret"}},
        )))
        caller.call("bulk", {"items": [
            {"_type": CREATE, **span(instance_id, number, schema_name="tool")}
            for number in (10, 11)
        ]})
        caller.call("alerts/raise", {"agent_instance_id": instance_id, "name": "slow",
                                     "severity": "info", "payload": {"seconds": "x"}})
        stored.append(sorted(
            (record["id"], record["payload_validation"], record["result_payload_validation"],
             record["summary"], record["size_bytes"], record["schema_known"])
            for record in gov.store.query("agent_spans")
        ))
        assert len(created) == 5
    assert stored[0] == stored[1]
