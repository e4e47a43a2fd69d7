"""The ``governance_policies`` fixture: Cedar files loaded, decisions asserted, failures shown."""

from __future__ import annotations

import pytest

from tests.plugin.conftest import PLUGIN

pytest_plugins = ["pytester"]

REFUNDS = '''\
@approval("refunds over 100 need a person")
forbid (principal, action == Action::"call_tool", resource == Tool::"refund")
when { context.args has amount && context.args.amount > 100 };
'''
TOOLS = '''\
@reason("the disk is never wiped by an agent")
forbid (principal, action == Action::"call_tool", resource == Tool::"wipe_disk");

@warn("sending mail is watched")
forbid (principal, action == Action::"call_tool", resource == Tool::"send_email");
'''
EXFILTRATION = '''\
@reason("no external communication after reading restricted data")
forbid (principal, action, resource)
when { resource.actions.contains("external_communication") &&
       context.run.peak_classification == "restricted" };
'''


def with_policies(user_pytest: pytest.Pytester) -> None:
    """A project with a policies/ directory named by its ini file."""
    user_pytest.mkdir("policies")
    user_pytest.path.joinpath("policies", "refunds.cedar").write_text(REFUNDS)
    user_pytest.path.joinpath("policies", "tools.cedar").write_text(TOOLS)
    user_pytest.makeini("[pytest]\ngovernance_policies = policies\n")


def test_the_ini_files_are_loaded_and_the_assertions_pass(user_pytest: pytest.Pytester) -> None:
    with_policies(user_pytest)
    user_pytest.makepyfile(test_policies='''
def test_loaded(governance_policies):
    assert sorted(p["name"] for p in governance_policies.policies.values()) == [
        "refunds", "tools"]


def test_outcomes(governance_policies):
    governance_policies.assert_allows("tool:refund", args={"amount": 40})
    held = governance_policies.assert_needs_approval("tool:refund", args={"amount": 250},
                                                     by="refunds")
    assert held["approval_id"]
    denied = governance_policies.assert_denies("tool:wipe_disk", by=["tools"])
    assert denied["reasons"][0]["message"] == "the disk is never wiped by an agent"
    warned = governance_policies.assert_allows("tool:send_email")
    assert warned["warnings"] == ["sending mail is watched"]
    governance_policies.assert_allows("model:gpt-4o")


def test_an_approval_then_allows_the_same_action_once(governance_policies,
                                                      governance_session):
    run = governance_policies.run()
    held = governance_policies.assert_needs_approval("tool:refund", run=run,
                                                     args={"amount": 250})
    governance_session.call("approvals/approve", {"approval_id": held["approval_id"]})
    governance_policies.assert_allows("tool:refund", run=run, args={"amount": 250})
    governance_policies.assert_needs_approval("tool:refund", run=run, args={"amount": 250})
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=3)


def test_failures_show_the_decision_and_the_deciding_policies(
    user_pytest: pytest.Pytester,
) -> None:
    with_policies(user_pytest)
    user_pytest.makepyfile(test_policies='''
def test_expects_a_deny(governance_policies):
    governance_policies.assert_denies("tool:refund", args={"amount": 250})


def test_expects_an_allow(governance_policies):
    governance_policies.assert_allows("tool:wipe_disk")


def test_expects_an_approval(governance_policies):
    governance_policies.assert_needs_approval("tool:search")


def test_expects_another_policy(governance_policies):
    governance_policies.assert_denies("tool:wipe_disk", by="refunds")
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(failed=4)
    result.stdout.fnmatch_lines([
        '*expected tool:refund {"amount": 250} to be denied; it was held for approval',
        "*decision * in run *: pending_approval (approval *)",
        "*deciding policies:",
        "*'refunds' v1 (enforce, approval): refunds over 100 need a person",
        "*warnings: none",
    ])
    result.stdout.fnmatch_lines([
        "*expected tool:wipe_disk to be allowed; it was denied",
        "*'tools' v1 (enforce, deny): the disk is never wiped by an agent",
    ])
    result.stdout.fnmatch_lines([
        "*expected tool:search to be held for approval; it was allowed",
        "*deciding policies: none (no forbid matched)",
    ])
    result.stdout.fnmatch_lines([
        "*expected policy 'refunds' among those that decided tool:wipe_disk",
        "*'tools' v1 (enforce, deny): *",
    ])


def test_the_run_figures_and_span_types_are_the_real_ones(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(test_flow=f'''
SPAN_TYPES = [
    {{"name": "crm.read_patient", "data_risk": {{
        "action_profile": {{"read_data": "allowed"}},
        "params_data_categories": {{"health_and_medical": "included",
                                    "classification": "restricted"}}}}}},
    {{"name": "email.send",
      "data_risk": {{"action_profile": {{"external_communication": "allowed"}}}}}},
]


def test_mail_after_reading_a_patient(governance_policies):
    governance_policies.load_text({EXFILTRATION!r}, name="no-exfiltration")
    run = governance_policies.run(span_types=SPAN_TYPES)
    governance_policies.assert_allows("tool:send_email", run=run, span_type="email.send")
    governance_policies.span(run, "crm.read_patient", {{"patient": "p-1"}})
    governance_policies.assert_denies("tool:send_email", run=run, span_type="email.send",
                                      by="no-exfiltration")
    governance_policies.assert_denies("span:email.send", run=run)
    governance_policies.assert_allows("tool:lookup", run=run)
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=1)


def test_a_refused_file_names_the_file_and_line(user_pytest: pytest.Pytester) -> None:
    user_pytest.mkdir("policies")
    user_pytest.path.joinpath("policies", "good.cedar").write_text(REFUNDS)
    user_pytest.path.joinpath("policies", "broken.cedar").write_text(
        'forbid (principal, action, resource)\nwhen { context.run.nothing > 1 };\n'
    )
    user_pytest.makepyfile(test_policies='''
import pytest

from governance_core.policy_testing import PolicyFileError


def test_refused(governance_policies):
    with pytest.raises(PolicyFileError) as refused:
        governance_policies.load("policies")
    assert "policies/broken.cedar:1: " in str(refused.value)
    assert governance_policies.policies == {}


def test_missing(governance_policies):
    with pytest.raises(PolicyFileError, match="no such file"):
        governance_policies.load("policies/none.cedar")


def test_a_bad_action(governance_policies):
    with pytest.raises(ValueError, match="'tool:<name>'"):
        governance_policies.decide("refund")
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=3)


def test_a_broken_ini_file_errors_the_tests_that_use_the_fixture(
    user_pytest: pytest.Pytester,
) -> None:
    user_pytest.mkdir("policies")
    user_pytest.path.joinpath("policies", "broken.cedar").write_text("forbid (principal")
    user_pytest.makeini("[pytest]\ngovernance_policies = policies\n")
    user_pytest.makepyfile(test_policies='''
def test_uses_it(governance_policies):
    pass


def test_does_not(governance_session):
    pass
''')
    result = user_pytest.runpytest("-p", PLUGIN)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*policies/broken.cedar:1: *"])
