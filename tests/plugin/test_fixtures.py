from __future__ import annotations

import pytest

from tests.plugin.conftest import PLUGIN

pytest_plugins = ["pytester"]

AGENT = '''
from governance_core.service import Session

SCHEMA = {"span_type_schemas": [
    {"name": "llm"},
    {"name": "tool", "data_risk": {
        "action_profile": {"read_data": "allowed"},
        "params_data_categories": {"financial_information": "included"},
    }},
]}


def record(session: Session, *, fail_tool: bool = False, tokens: int = 1200) -> str:
    agent = session.details("agents/create", name="Reviewer")
    with session.run(agent_id=agent["id"], agent_version="1.0.0", schema=SCHEMA) as run:
        with run.span("llm", {"model": "gpt-4o"}) as llm:
            llm.result = {"usage": {"input_tokens": tokens, "output_tokens": 80}}
        try:
            with run.span("tool", {"name": "credit_check"}):
                if fail_tool:
                    raise TimeoutError("no answer")
        except TimeoutError:
            pass
    return run.id
'''


def test_fixtures_and_passing_assertions(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(agent=AGENT, test_agent='''
from agent import record


def test_governance_is_bootstrapped(governance, governance_bootstrap):
    session = governance.as_account(governance_bootstrap.account_id)
    assert session.details("accounts/show")["name"] == "Test account"
    assert governance.session(governance_bootstrap.token).account_id == session.account_id


def test_each_test_gets_a_new_store(governance_session):
    assert governance_session.call("agent_instances/list")["summaries"] == []
    record(governance_session)


def test_assertions_pass_on_what_was_recorded(governance_session, recorded_run):
    run = recorded_run(record(governance_session, fail_tool=True))
    run.assert_status("complete")
    assert len(run.assert_spans("llm", count=1, status="complete")) == 1
    run.assert_spans("tool", status="failed")
    run.assert_no_spans("tool", status="complete")
    assert 0 < run.assert_cost(at_most=1, at_least=0.001)
    level = run.assert_risk_level(at_most="critical")
    run.assert_risk_level(level)
    run.assert_alerts()
    assert recorded_run().id == run.id
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=3)


def test_failures_read_as_a_description_of_the_run(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(agent=AGENT, test_agent='''
from agent import record


def test_span_count(governance_session, recorded_run):
    recorded_run(record(governance_session, fail_tool=True)).assert_spans(
        "tool", count=2, status="complete")


def test_cost(governance_session, recorded_run):
    recorded_run(record(governance_session, tokens=1_000_000)).assert_cost(at_most=0.01)


def test_status(governance_session, recorded_run):
    recorded_run(record(governance_session)).assert_status("failed")


def test_risk(governance_session, recorded_run):
    recorded_run(record(governance_session)).assert_risk_level("critical")


def test_alerts(governance_session, recorded_run):
    recorded_run(record(governance_session)).assert_alerts("affordability_concern")


def test_no_run(recorded_run):
    recorded_run()


def test_not_assessed(governance_session, recorded_run):
    agent = governance_session.details("agents/create", name="Plain")
    with governance_session.run(agent_id=agent["id"], agent_version="1") as run:
        pass
    recorded_run(run).assert_risk_level(at_most="low")
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(failed=7)
    result.stdout.fnmatch_lines([
        "E *AssertionError: expected 2 'tool' spans with status 'complete', found 0",
        "E *run *: complete, risk *, cost $*",
        "E *  spans: llm x1 (complete 1), tool x1 (failed 1)",
        "E *  alerts: none",
        "E *AssertionError: expected a cost of at most $0.01, it is $2.5*",
        "E *AssertionError: expected the run to be 'failed', it is 'complete'",
        "E *AssertionError: expected risk level 'critical', it is *",
        "E *AssertionError: expected alerts: affordability_concern; found none",
        "E *AssertionError: no run was recorded in the test account",
        "E *AssertionError: expected an assessed risk level, but no span type the run used*",
        "E *run *: complete, risk not assessed (score 0), cost no span reported token usage",
    ])
    assert "pytest_plugin.py" not in result.stdout.str(), "helper frames should be hidden"


def test_alerts_are_compared_by_name_severity_and_status(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(test_alerts='''
def test_alerts(governance_session, recorded_run):
    agent = governance_session.details("agents/create", name="Reviewer")
    with governance_session.run(agent_id=agent["id"], agent_version="1") as run:
        run.raise_alert("over_budget", severity="warning")
    recorded = recorded_run(run)
    recorded.assert_alerts("over_budget")
    recorded.assert_alerts("over_budget", severity="warning", status="raised")
    recorded.assert_alerts(severity="critical")
    recorded.assert_alerts("something_else")
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines([
        "E *AssertionError: expected alerts: something_else; found over_budget",
        "E *  alerts: over_budget (warning, raised)",
    ])


def test_span_assertions_count_the_agents_spans_only(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(test_purposes='''
import pytest

SCHEMA = {"quality_schemas": [{"name": "review_quality"}]}


def test_alert_and_quality_records_are_no_span_type(governance_session, recorded_run):
    agent = governance_session.details("agents/create", name="Reviewer")
    with governance_session.run(agent_id=agent["id"], agent_version="1",
                                schema=SCHEMA) as run:
        with run.span("llm", {"model": "gpt-4o"}):
            pass
        run.raise_alert("over_budget", severity="warning")
        run.clear_alert("over_budget")
        run.record_quality("review_quality", {"score": 4})
    recorded = recorded_run(run)
    assert [span["schema_name"] for span in recorded.spans] == ["llm"]
    recorded.assert_spans("llm", count=1)
    recorded.assert_no_spans("over_budget")
    recorded.assert_no_spans("review_quality")
    recorded.assert_alerts("over_budget", status="cleared")
    with pytest.raises(AssertionError, match="expected 'over_budget' spans, found none"):
        recorded.assert_spans("over_budget")
    with pytest.raises(AssertionError, match="expected 'review_quality' spans, found none"):
        recorded.assert_spans("review_quality")
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=1)


def test_recorded_run_takes_a_run_its_details_or_its_id(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(test_inputs='''
import pytest


def test_every_form_loads_the_same_run(governance_session, recorded_run):
    agent = governance_session.details("agents/create", name="Reviewer")
    with governance_session.run(agent_id=agent["id"], agent_version="1") as run:
        with run.span("llm", {}):
            pass
    answer = governance_session.call("agent_instances/show", {"agent_instance_id": run.id})
    listed = governance_session.call("agent_instances/list")["summaries"][0]
    for given in (run, run.id, f"  {run.id} ", answer["details"], answer, listed):
        loaded = recorded_run(given)
        assert loaded.id == run.id and loaded.details == answer["details"]
        loaded.assert_spans("llm", count=1)


def test_anything_else_is_refused_clearly(governance_session, recorded_run):
    agent = governance_session.details("agents/create", name="Reviewer")
    with pytest.raises(TypeError, match="takes a Run, a run's details .* not int"):
        recorded_run(42)
    with pytest.raises(TypeError, match="not list"):
        recorded_run(["x"])
    with pytest.raises(ValueError, match="this dict's type is 'agent'"):
        recorded_run(agent)
    with pytest.raises(ValueError, match="this dict's type is None"):
        recorded_run({"id": agent["id"]})
    with pytest.raises(ValueError, match="hold no well-formed id: None"):
        recorded_run({"type": "agent_instance"})
    with pytest.raises(ValueError, match="'run-1' is not a well-formed id"):
        recorded_run("run-1")
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=2)
