"""The embedder's recording API: runs, nested spans, traced functions, termination."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from governance_core.recording import Run, RunTerminated
from governance_core.service import Bootstrap, Governance, Session
from tests.core.span_world import ALERT_SCHEMAS, QUALITY_SCHEMAS, SPAN_TYPES

SCHEMA = {"span_type_schemas": SPAN_TYPES, "quality_schemas": QUALITY_SCHEMAS,
          "alert_schemas": ALERT_SCHEMAS}


@pytest.fixture
def session(gov: Governance, boot: Bootstrap) -> Session:
    return gov.session(boot.token)


@pytest.fixture
def agent_id(session: Session) -> str:
    result: str = session.details("agents/create", {"details": {"name": "Recorder"}})["id"]
    return result


def start(session: Session, agent_id: str) -> Run:
    return session.run(agent_id=agent_id, agent_version="1.0.0", schema=SCHEMA)


def spans_of(session: Session, run: Run) -> dict[str, dict[str, Any]]:
    """The run's activity spans by their schema name and payload's ``step`` (or name)."""
    rows = session.call("agent_spans/list", agent_instance_id=run.id, purpose="activity",
                        **{"pagination[page_size]": 100})["summaries"]
    return {row["payload"].get("step", row["schema_name"]): row for row in rows}


def test_a_run_registers_starts_nests_and_finishes(session: Session, agent_id: str) -> None:
    with start(session, agent_id) as run:
        assert run.details()["status"] == "active"
        with run.span("llm", {"prompt": "plan", "step": "outer"}) as outer:
            outer.result = {"text": "done"}
            with run.span("tool", {"step": "inner"}):
                pass
        with run.span("tool", {"step": "sibling"}):
            pass
    details = run.details()
    assert details["status"] == "complete"
    assert details["span_counts"]["complete"] == 3 and details["span_counts"]["total"] == 3
    spans = spans_of(session, run)
    assert spans["inner"]["parent_span_id"] == spans["outer"]["id"]
    assert spans["outer"]["parent_span_id"] is None
    assert spans["sibling"]["parent_span_id"] is None
    assert spans["outer"]["result_payload"] == {"text": "done"}
    assert spans["outer"]["result_payload_validation"]["status"] == "valid"


def test_a_failing_span_records_the_error_and_reraises(session: Session, agent_id: str) -> None:
    with (
        start(session, agent_id) as run,
        pytest.raises(ZeroDivisionError),
        run.span("tool", {"step": "bad"}) as span,
    ):
        span.result = {"partial": 1}
        _ = 1 / 0
    failed = spans_of(session, run)["bad"]
    assert failed["status"] == "failed"
    assert failed["result_payload"] == {
        "partial": 1, "error": {"type": "ZeroDivisionError", "message": "division by zero"}
    }
    assert run.details()["status"] == "complete"


def test_a_failing_run_block_fails_the_run(session: Session, agent_id: str) -> None:
    with pytest.raises(RuntimeError), start(session, agent_id) as run:
        raise RuntimeError("agent crashed")
    assert run.details()["status"] == "failed"


def test_traced_functions_sync_and_async(session: Session, agent_id: str) -> None:
    with start(session, agent_id) as run:

        @run.traced("tool")
        def add(a: int, b: int = 0) -> int:
            return a + b

        @run.traced("llm")
        async def answer(prompt: str) -> dict[str, Any]:
            await asyncio.sleep(0)
            return {"text": prompt.upper()}

        assert add(2, b=3) == 5
        assert asyncio.run(answer("hi")) == {"text": "HI"}
    spans = spans_of(session, run)
    assert spans["tool"]["payload"] == {"args": [2], "kwargs": {"b": 3}}
    assert spans["tool"]["result_payload"] == {"return": 5}
    assert spans["llm"]["result_payload"] == {"return": {"text": "HI"}}


def test_non_json_values_are_recorded_by_their_repr(session: Session, agent_id: str) -> None:
    marker = object()
    with start(session, agent_id) as run, run.span("tool", {"thing": marker}) as span:
        span.result = [1, (2, 3)]
    recorded = spans_of(session, run)["tool"]
    assert recorded["payload"] == {"thing": repr(marker)}
    assert recorded["result_payload"] == {"value": [1, [2, 3]]}


def test_spans_in_threads_nest_under_their_own_enclosing_span(
    session: Session, agent_id: str
) -> None:
    with start(session, agent_id) as run, run.span("tool", {"step": "main"}):
        def work() -> None:
            with run.span("tool", {"step": "thread"}):
                pass

        worker = threading.Thread(target=work)
        worker.start()
        worker.join()
    assert spans_of(session, run)["thread"]["parent_span_id"] is None


def test_termination_raises_at_the_next_span(
    gov: Governance, boot: Bootstrap, session: Session, agent_id: str
) -> None:
    admin = gov.session(boot.token)
    with pytest.raises(RunTerminated) as caught, start(session, agent_id) as run:
        with run.span("tool", {"step": "before"}):
            admin.call("agent_instances/terminate", agent_instance_id=run.id, reason="budget")
        with run.span("tool", {"step": "never"}):
            pytest.fail("a terminated run must not start new work")
    assert caught.value.reason == "budget" and caught.value.run_id == run.id
    assert run.terminated and run.termination_reason == "budget"
    details = run.details()
    assert details["status"] == "terminated"
    assert "never" not in spans_of(session, run)


def test_termination_noticed_on_creating_a_span(
    gov: Governance, boot: Bootstrap, session: Session, agent_id: str
) -> None:
    with pytest.raises(RunTerminated), start(session, agent_id) as run:
        gov.session(boot.token).call(
            "agent_instances/terminate", agent_instance_id=run.id, reason="stop"
        )
        with run.span("tool", {"step": "late"}):
            pytest.fail("the block of a span on a terminated run must not run")
    late = spans_of(session, run)["late"]
    assert late["status"] == "cancelled"


def test_termination_after_the_last_span_raises_on_leaving_the_run(
    gov: Governance, boot: Bootstrap, session: Session, agent_id: str
) -> None:
    with pytest.raises(RunTerminated), start(session, agent_id) as run:
        gov.session(boot.token).call(
            "agent_instances/terminate", agent_instance_id=run.id, reason="stop"
        )


def test_an_explicit_finish_is_kept(session: Session, agent_id: str) -> None:
    with start(session, agent_id) as run:
        run.finish("cancelled")
    assert run.details()["status"] == "cancelled"


def test_quality_and_alerts_from_a_run(session: Session, agent_id: str) -> None:
    with start(session, agent_id) as run:
        assert run.record_quality("accuracy", {"score": 1})["quality_payloads"] == {
            "accuracy": {"score": 1}
        }
        assert run.raise_alert("slow", "warning", {"seconds": 5})["summary"] == "took 5s"
        assert run.clear_alert("slow")["status"] == "cleared"
        assert run.record_quality("accuracy", None)["quality_payloads"] == {}


def test_a_run_with_an_ingestion_token(
    gov: Governance, session: Session, agent_id: str, boot: Bootstrap
) -> None:
    issued = session.call("api_tokens/create", token_scope="agent_deployment",
                          agent_id=agent_id, environment_id=boot.environment_id)
    ingestion = gov.session(issued["token"])
    with ingestion.run(agent_version="2.0.0", schema=SCHEMA) as run:
        with run.span("llm", {"prompt": "x"}):
            pass
        assert run.details()["agent_id"] == agent_id
    assert run.details()["span_counts"]["complete"] == 1


def test_the_run_id_needs_the_block(session: Session, agent_id: str) -> None:
    with pytest.raises(RuntimeError):
        _ = start(session, agent_id).id


def test_another_runs_termination_fails_the_enclosing_run(
    gov: Governance, boot: Bootstrap, session: Session, agent_id: str
) -> None:
    with (
        pytest.raises(RunTerminated),
        start(session, agent_id) as outer,
        outer.span("tool", {"step": "delegate"}),
        start(session, agent_id) as inner,
    ):
        gov.session(boot.token).call(
            "agent_instances/terminate", agent_instance_id=inner.id, reason="stop"
        )
        with inner.span("tool"):
            pass
    assert outer.details()["status"] == "failed"
    assert spans_of(session, outer)["delegate"]["status"] == "failed"
    assert inner.details()["status"] == "terminated"
