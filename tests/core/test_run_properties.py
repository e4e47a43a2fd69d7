"""Random runs on each reference store: the aggregates kept on write equal a recount.

A Hypothesis state machine registers runs, starts, finishes and terminates them, creates and
finishes spans, records quality payloads and raises and clears alerts, in any order. After
every step, each run's stored ``span_counts``, ``span_schema_counts``,
``last_activity_span_at``, ``raised_alert_count`` and ``quality_payloads``, and the agent's
``instance_counts`` and ``last_activity_span_at``, must equal what a recount from the
spans, alerts and instances tables gives; and a write is refused only where the state rules
say so.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from governance_core.errors import AlertAlreadyCleared, AlertUnknown, InvalidAction
from governance_core.storage.protocol import Filter, Record
from tests.core.runs import Caller, fresh_caller, make_agent
from tests.core.span_world import register_run
from tests.stores import STORE_KINDS

CLOCK_START = datetime(2026, 1, 1, tzinfo=UTC)
FINISHED = {"complete", "failed", "cancelled", "terminated"}
SECONDS = st.integers(min_value=-30, max_value=30)


def stamp(second: int) -> str:
    """A time ``second`` seconds from the facade's fixed clock start (so operations stamped
    by the clock, such as a termination, fall among the spans' own times)."""
    return (CLOCK_START + timedelta(seconds=second)).isoformat()


class RunMachine(RuleBasedStateMachine):
    """Drives one account's runs; subclasses choose the store."""

    store_kind = "memory"
    instances = Bundle("instances")
    spans = Bundle("spans")

    def __init__(self) -> None:
        super().__init__()
        self.caller: Caller = fresh_caller(self.store_kind)
        self.agent_id: str = make_agent(self.caller)["id"]
        self.quality: dict[str, dict[str, Any]] = {}

    # -- helpers ---------------------------------------------------------------------------
    def stored(self, table: str, record_id: str) -> Record:
        record = self.caller.gov.store.get(table, record_id)
        assert record is not None
        return record

    def rows(self, table: str, **equal: Any) -> list[Record]:
        filters = [Filter(name, "eq", value) for name, value in equal.items()]
        return list(self.caller.gov.store.iterate(table, filters))

    # -- rules -----------------------------------------------------------------------------
    @rule(target=instances)
    def register(self) -> str:
        instance_id: str = register_run(self.caller, self.agent_id)["id"]
        self.quality[instance_id] = {}
        return instance_id

    @rule(instance_id=instances, second=SECONDS)
    def start(self, instance_id: str, second: int) -> None:
        self.caller.call("agent_instances/start", agent_instance_id=instance_id,
                         timestamp=stamp(second))

    @rule(
        target=spans, instance_id=instances, second=SECONDS,
        status=st.sampled_from(["pending", "active", "complete", "failed", "cancelled"]),
        schema_name=st.sampled_from(["llm", "tool", "undeclared"]),
    )
    def create_span(self, instance_id: str, second: int, status: str, schema_name: str) -> str:
        span_id: str = self.caller.details(
            "agent_spans/create", agent_instance_id=instance_id, schema_name=schema_name,
            status=status, payload={"prompt": "p"}, started_at=stamp(second),
        )["id"]
        return span_id

    @rule(span_id=spans, status=st.sampled_from(["complete", "failed", "cancelled"]))
    def finish_span(self, span_id: str, status: str) -> None:
        before = self.stored("agent_spans", span_id)
        run = self.stored("agent_instances", before["agent_instance_id"])
        try:
            self.caller.call("agent_spans/finish", agent_span_id=span_id, status=status)
        except InvalidAction:
            assert before["status"] != "active"
            assert not (run["status"] == "terminated" and before["status"] == "cancelled"
                        and before["finished_at"] >= run["finished_at"])
        else:
            assert before["status"] == "active" or run["status"] == "terminated"

    @rule(instance_id=instances, status=st.sampled_from(["complete", "failed", "cancelled"]))
    def finish(self, instance_id: str, status: str) -> None:
        before = self.stored("agent_instances", instance_id)["status"]
        try:
            self.caller.call("agent_instances/finish", agent_instance_id=instance_id,
                             status=status)
        except InvalidAction:
            assert before in FINISHED
        else:
            assert before not in FINISHED

    @rule(instance_id=instances)
    def terminate(self, instance_id: str) -> None:
        before = self.stored("agent_instances", instance_id)["status"]
        try:
            self.caller.call("agent_instances/terminate", agent_instance_id=instance_id,
                             reason="test")
        except InvalidAction:
            assert before in FINISHED
        else:
            assert before not in FINISHED
            assert not self.rows("agent_spans", agent_instance_id=instance_id, status="active")

    @rule(instance_id=instances, name=st.sampled_from(["accuracy", "tone"]),
          payload=st.none() | st.dictionaries(st.sampled_from("abc"), st.integers(), max_size=2))
    def record_quality(self, instance_id: str, name: str, payload: dict[str, Any] | None) -> None:
        self.caller.call("agent_instances/record_quality", agent_instance_id=instance_id,
                         name=name, payload=payload)
        if payload is None:
            self.quality[instance_id].pop(name, None)
        else:
            self.quality[instance_id][name] = payload

    @rule(instance_id=instances, name=st.sampled_from(["slow", "odd"]),
          severity=st.sampled_from(["critical", "error", "warning", "info"]))
    def raise_alert(self, instance_id: str, name: str, severity: str) -> None:
        self.caller.call("alerts/raise", agent_instance_id=instance_id, name=name,
                         severity=severity, payload={})

    @rule(instance_id=instances, name=st.sampled_from(["slow", "odd"]))
    def clear_alert(self, instance_id: str, name: str) -> None:
        found = self.rows("alerts", agent_instance_id=instance_id, name=name)
        try:
            self.caller.call("alerts/clear", agent_instance_id=instance_id, name=name)
        except AlertUnknown:
            assert not found
        except AlertAlreadyCleared:
            assert found[0]["status"] == "cleared"
        else:
            assert found[0]["status"] == "raised"

    # -- the property ----------------------------------------------------------------------
    @invariant()
    def aggregates_equal_a_recount(self) -> None:
        instances = self.rows("agent_instances", agent_id=self.agent_id)
        for run in instances:
            activity = self.rows("agent_spans", agent_instance_id=run["id"], purpose="activity")
            by_status = Counter(span["status"] for span in activity)
            expected = {status: by_status[status]
                        for status in ("active", "complete", "failed", "cancelled")}
            assert run["span_counts"] == {**expected, "total": len(activity)}
            assert run["span_schema_counts"] == dict(Counter(s["schema_name"] for s in activity))
            stamps = [t for s in activity for t in (s["started_at"], s["finished_at"]) if t]
            assert run["last_activity_span_at"] == (max(stamps) if stamps else None)
            raised = self.rows("alerts", agent_instance_id=run["id"], status="raised")
            assert run["raised_alert_count"] == len(raised)
            assert run["quality_payloads"] == self.quality[run["id"]]
            assert (run["status"] == "pending") == (run["started_at"] is None
                                                    and not activity
                                                    and run["finished_at"] is None)
        agent = self.stored("agents", self.agent_id)
        by_status = Counter(run["status"] for run in instances)
        counts = {status: count for status, count in agent["instance_counts"].items() if count}
        assert counts == {**{s: n for s, n in by_status.items() if n},
                          **({"total": len(instances)} if instances else {})}
        latest = [run["last_activity_span_at"] for run in instances
                  if run["last_activity_span_at"]]
        assert agent["last_activity_span_at"] == (max(latest) if latest else None)

    def teardown(self) -> None:
        self.caller.gov.close()


SETTINGS = settings(max_examples=12, stateful_step_count=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


class SQLiteRunMachine(RunMachine):
    store_kind = "sqlite"


TestRunsInMemory = RunMachine.TestCase
TestRunsInMemory.settings = SETTINGS
TestRunsOnSQLite = SQLiteRunMachine.TestCase
TestRunsOnSQLite.settings = SETTINGS


class PostgresRunMachine(RunMachine):
    store_kind = "postgres"


if "postgres" in STORE_KINDS:
    TestRunsOnPostgres = PostgresRunMachine.TestCase
    TestRunsOnPostgres.settings = SETTINGS
