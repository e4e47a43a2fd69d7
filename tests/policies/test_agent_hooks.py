"""The agent-hooks interceptor, approval resolver and record sink, driven as a host drives them.

Every emission goes through the SDK's own ``InterceptionEmitter``; the conformance vectors
the SDK ships are run with these hooks in the place of the vectors' scripted interceptor and
resolver, for every vector whose script a policy can say.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

agent_hooks = pytest.importorskip(
    "agent_hooks",
    reason="agent-hooks-sdk is not installed: pip install '.[agent-hooks]' to test the hooks",
)

from agent_hooks import (  # noqa: E402
    AgentContextBuilder,
    ApprovalOutcome,
    ApprovalRequest,
    CompositionConfig,
    EnforcementMode,
    HostError,
    InterceptionBlocked,
    InterceptionEmitter,
    InterceptionPoint,
    InterceptionRecord,
    Verdict,
)
from agent_hooks.ctk import load_vectors, run_vector  # noqa: E402
from agent_hooks.ctk.reference import ReferenceHarness  # noqa: E402

from governance_core.policies.agent_hooks import (  # noqa: E402
    APPROVAL_EXPIRED,
    APPROVAL_REJECTED,
    APPROVAL_REQUIRED,
    DENIED,
    OBSERVED,
    WARNED,
    GovernanceHooks,
    stored_interceptions,
)
from tests.policies.support import RunWorld  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

POLICY = (
    '@reason("files are never deleted by an agent")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"delete_files");\n'
    '@approval("refunds over 100 need a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"refund")\n'
    "when { context.args has amount && context.args.amount > 100 };\n"
    '@reason("the large model is not for this agent")\n'
    'forbid (principal, action == Action::"call_model", resource == Model::"big-model");\n'
)


class Person:
    """The waiting clock of the resolver: at its first wait a person resolves the approval."""

    def __init__(self, world: RunWorld, run_id: str, resolution: str | None = "approve") -> None:
        self.world, self.run_id, self.resolution = world, run_id, resolution
        self.now = 0.0
        self.waits = 0

    def sleep(self, seconds: float) -> None:
        if self.waits == 0 and self.resolution is not None:
            pending = self.world.session.call(
                "approvals/list", {"status": "pending", "agent_instance_id": self.run_id}
            )["summaries"]
            for approval in pending:
                self.world.session.call(
                    f"approvals/{self.resolution}",
                    {"approval_id": approval["id"], "reason": "decided by a test"},
                )
        self.waits += 1
        self.now += seconds

    def monotonic(self) -> float:
        return self.now


def hooks_for(world: RunWorld, run_id: str, person: Person | None = None,
              **options: Any) -> GovernanceHooks:
    person = person or Person(world, run_id, None)
    return GovernanceHooks(world.session, run_id, sleep=person.sleep,
                           monotonic=person.monotonic, approval_timeout=10,
                           poll_interval=1, **options)


def builder() -> AgentContextBuilder:
    return AgentContextBuilder(agent_id="support-bot", framework="test", session_id="s-1")


def emit(emitter: InterceptionEmitter, context: dict[str, Any]) -> InterceptionRecord:
    """Emit like a host; the record (raising InterceptionBlocked on a block)."""
    return asyncio.run(emitter.emit(context)).record


def decisions(world: RunWorld, run_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = world.session.call(
        "decisions/list", {"agent_instance_id": run_id, "sorting": "decided_at"}
    )["summaries"]
    return found


def test_an_allowed_tool_call_proceeds_and_its_record_is_stored_on_the_run(
    world: RunWorld,
) -> None:
    world.policy(POLICY)
    run_id = world.run()
    emitter = hooks_for(world, run_id).emitter()
    record = emit(emitter, builder().pre_tool_call(call_id="c1", name="refund",
                                                   args={"amount": 20}))
    assert record.proceeds and record.verdict.reason is None
    (decision,) = decisions(world, run_id)
    assert decision["outcome"] == "allow"
    assert decision["action"]["args"] == {"amount": 20}
    (stored,) = stored_interceptions(world.session, run_id)
    assert stored == {"decision_id": decision["id"], "record": record.to_wire()}
    assert "amount" not in str(stored["record"])


def test_a_denied_tool_call_is_blocked_with_the_policy_message(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    emitter = hooks_for(world, run_id).emitter()
    with pytest.raises(InterceptionBlocked) as blocked:
        emit(emitter, builder().pre_tool_call(call_id="c1", name="delete_files",
                                              args={"path": "/"}))
    verdict = blocked.value.result.verdict
    assert (verdict.reason, verdict.message) == (DENIED, "files are never deleted by an agent")
    (decision,) = decisions(world, run_id)
    assert decision["outcome"] == "deny"
    assert verdict.evidence is not None
    assert verdict.evidence.verification_pointers == {
        "decision": f"/api/v1/decision/{decision['id']}"
    }
    (stored,) = stored_interceptions(world.session, run_id)
    assert stored["record"]["verdict"]["decision"] == "deny"
    alerts = world.session.call("alerts/list", {"agent_instance_id": run_id})["summaries"]
    assert [alert["name"] for alert in alerts] == ["policy_denied"]


def test_a_model_call_is_decided_at_pre_model_call(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    emitter = hooks_for(world, run_id).emitter()
    context = builder().pre_model_call(model_id="big-model", messages=[], temperature=0.5)
    with pytest.raises(InterceptionBlocked):
        emit(emitter, context)
    emit(emitter, builder().pre_model_call(model_id="small-model", messages=[]))
    denied, allowed = decisions(world, run_id)
    assert denied["action"] == {"kind": "model_call", "name": "big-model",
                                "args": {"temperature": 0.5}, "span_type": None}
    assert (denied["outcome"], allowed["outcome"]) == ("deny", "allow")


def test_points_no_policy_speaks_of_are_allowed_undecided_and_not_stored(
    world: RunWorld,
) -> None:
    world.policy(POLICY)
    run_id = world.run()
    emitter = hooks_for(world, run_id).emitter()
    made = builder()
    for context in (
        made.agent_startup(tools_registered=["delete_files"]),
        made.input(content="delete everything"),
        made.post_model_call(model_id="big-model", content="ok", tool_calls=[],
                             finish_reason="stop"),
        made.post_tool_call(call_id="c1", name="delete_files", args={}, value="done"),
        made.output(content="done"),
        made.agent_shutdown(reason="completed"),
    ):
        assert emit(emitter, context).proceeds
    assert decisions(world, run_id) == []
    assert stored_interceptions(world.session, run_id) == []
    assert len(emitter.results) == 6


def test_an_approval_a_person_gives_lifts_the_hold_once(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    person = Person(world, run_id, "approve")
    emitter = hooks_for(world, run_id, person).emitter()
    refund = builder()
    record = emit(emitter, refund.pre_tool_call(call_id="c1", name="refund",
                                                args={"amount": 500}))
    assert record.proceeds and record.resolved_by == "approval"
    assert person.waits == 1
    held, allowed = decisions(world, run_id)
    assert held["outcome"] == "pending_approval"
    assert allowed["outcome"] == "allow"
    assert allowed["reasons"][0]["approval_id"] == held["approval_id"]
    (stored,) = stored_interceptions(world.session, run_id)
    assert stored["decision_id"] == allowed["id"]
    assert stored["record"]["resolved_by"] == "approval"
    # The approval was used: the same refund again needs a new one, which nobody gives.
    person.resolution = None
    with pytest.raises(InterceptionBlocked) as blocked:
        emit(emitter, refund.pre_tool_call(call_id="c2", name="refund", args={"amount": 500}))
    assert blocked.value.result.verdict.reason == HostError.APPROVAL_UNRESOLVED.value
    pending = world.session.call("approvals/list", {"status": "pending"})["summaries"]
    assert len(pending) == 1


def test_the_liftable_deny_names_its_approval(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    hooks = hooks_for(world, run_id)
    verdict = hooks.intercept(builder().pre_tool_call(call_id="c1", name="refund",
                                                      args={"amount": 500}))
    (held,) = decisions(world, run_id)
    assert verdict.is_liftable and verdict.reason == APPROVAL_REQUIRED
    assert verdict.approval == {"approval_id": held["approval_id"], "decision_id": held["id"]}
    assert verdict.message == "refunds over 100 need a person"


def test_a_rejection_blocks_with_the_persons_reason(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    emitter = hooks_for(world, run_id, Person(world, run_id, "reject")).emitter()
    with pytest.raises(InterceptionBlocked) as blocked:
        emit(emitter, builder().pre_tool_call(call_id="c1", name="refund",
                                              args={"amount": 500}))
    result = blocked.value.result
    assert result.resolved_by == "rejection"
    assert result.verdict.reason == APPROVAL_REJECTED
    assert result.verdict.message is not None
    assert result.verdict.message.endswith("rejected: decided by a test")


def test_an_expired_approval_is_a_rejection(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    hooks = hooks_for(world, run_id, expires_in_ms=1000)
    verdict = hooks.intercept(builder().pre_tool_call(call_id="c1", name="refund",
                                                      args={"amount": 500}))
    world.gov.clock.advance(timedelta(seconds=2))  # type: ignore[attr-defined]
    request = ApprovalRequest("sha256:abc", InterceptionPoint.PRE_TOOL_CALL, verdict, {})
    resolution = hooks.resolve(request)
    assert resolution.outcome is ApprovalOutcome.REJECT
    assert resolution.context_identity == "sha256:abc"
    assert resolution.verdict is not None and resolution.verdict.reason == APPROVAL_EXPIRED


def test_nobody_resolving_in_time_is_unresolved_and_blocks(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    person = Person(world, run_id, None)
    emitter = hooks_for(world, run_id, person).emitter()
    with pytest.raises(InterceptionBlocked) as blocked:
        emit(emitter, builder().pre_tool_call(call_id="c1", name="refund",
                                              args={"amount": 500}))
    assert blocked.value.result.verdict.reason == HostError.APPROVAL_UNRESOLVED.value
    assert person.now == 10 and person.waits == 10


class Escalating:
    """Another interceptor, whose liftable deny is not governance's to lift."""

    def intercept(self, context: dict[str, Any]) -> Verdict:
        return Verdict.escalate(reason="other:needs-review")


def test_another_interceptors_liftable_deny_is_left_unresolved(world: RunWorld) -> None:
    run_id = world.run()
    hooks = hooks_for(world, run_id)
    emitter = InterceptionEmitter(resolver=hooks).register(Escalating()).register(hooks)
    with pytest.raises(InterceptionBlocked) as blocked:
        emit(emitter, builder().pre_tool_call(call_id="c1", name="refund", args={}))
    assert blocked.value.result.verdict.reason == HostError.APPROVAL_UNRESOLVED.value
    assert decisions(world, run_id) == []


def test_warnings_and_observe_mode_become_verdict_warnings(world: RunWorld) -> None:
    world.policy('@warn("refunds are watched")\n'
                 'forbid (principal, action == Action::"call_tool", resource == Tool::"refund");')
    world.policy('forbid (principal, action == Action::"call_tool", resource == Tool::"refund");',
                 mode="observe")
    run_id = world.run()
    record = emit(hooks_for(world, run_id).emitter(),
                  builder().pre_tool_call(call_id="c1", name="refund", args={}))
    assert record.proceeds
    assert [(w.reason, w.message) for w in record.verdict.warnings] == [
        (WARNED, "refunds are watched"),
        (OBSERVED, "observe-mode policies would have answered deny"),
    ]


def test_the_span_type_gives_the_policy_the_resources_data_risk(world: RunWorld) -> None:
    world.policy('forbid (principal, action, resource)\n'
                 'when { resource.actions.contains("external_communication") };')
    run_id = world.run()
    emitter = hooks_for(world, run_id, span_types={"send_email": "email.send"}).emitter()
    with pytest.raises(InterceptionBlocked):
        emit(emitter, builder().pre_tool_call(call_id="c1", name="send_email", args={}))
    assert emit(emitter, builder().pre_tool_call(call_id="c2", name="search", args={})).proceeds
    assert decisions(world, run_id)[0]["action"]["span_type"] == "email.send"


def test_evaluate_only_records_the_deny_and_proceeds(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    emitter = hooks_for(world, run_id).emitter(mode=EnforcementMode.EVALUATE_ONLY)
    record = emit(emitter, builder().pre_tool_call(call_id="c1", name="delete_files", args={}))
    assert record.proceeds and record.verdict.reason == DENIED
    assert decisions(world, run_id)[0]["outcome"] == "deny"
    assert stored_interceptions(world.session, run_id)[0]["record"]["mode"] == "evaluate_only"


def test_a_run_governance_cannot_find_fails_closed(world: RunWorld) -> None:
    world.policy(POLICY)
    run_id = world.run()
    unknown = run_id[:-4] + ("aaaa" if not run_id.endswith("aaaa") else "bbbb")
    emitter = hooks_for(world, unknown).emitter()
    with pytest.raises(InterceptionBlocked) as blocked:
        emit(emitter, builder().pre_tool_call(call_id="c1", name="search", args={}))
    assert blocked.value.result.verdict.reason == HostError.INTERCEPTOR_FAILED.value


def test_the_core_imports_and_decides_without_the_extra() -> None:
    code = (
        "import sys; sys.modules['agent_hooks'] = None\n"
        "import governance_core, governance_core.policies\n"
        "from governance_core import Governance\n"
        "g = Governance.open(':memory:'); s = g.session(g.bootstrap().token)\n"
        "agent = s.details('agents/create', {'name': 'a'})\n"
        "run = s.details('agent_instances/register', {'agent_id': agent['id'],"
        " 'agent_version': {'external_identifier': '1'}})\n"
        "assert s.decide(run['id'], 'tool_call', 'search')['outcome'] == 'allow'\n"
        "try:\n"
        "    import governance_core.policies.agent_hooks\n"
        "except ModuleNotFoundError as error:\n"
        "    print(error.name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "agent_hooks"


# -- the SDK's conformance vectors ------------------------------------------------------------

REFUND_HOLD = (
    '@approval("a wire transfer needs a person")\n'
    'forbid (principal, action == Action::"call_tool", resource == Tool::"wire_transfer");'
)
UNRELATED = 'forbid (principal, action == Action::"call_tool", resource == Tool::"format_disk");'

APPLICABLE: dict[str, str] = {
    # Every point, nothing forbidden: the hooks allow (and decide the model calls).
    "AH-CTK-001": UNRELATED,
    "AH-CTK-002": UNRELATED,
    "AH-CTK-003": UNRELATED,
    # A deny at pre_tool_call keeps the tool from running.
    "AH-CTK-010": 'forbid (principal, action == Action::"call_tool",'
                  ' resource == Tool::"delete_files");',
    # A liftable deny a person approves (with the jcs-sha256 identity, with none, redacted).
    "AH-CTK-030": REFUND_HOLD,
    "AH-CTK-089": REFUND_HOLD,
    "AH-CTK-099": REFUND_HOLD,
    # Evaluate-only: the deny is recorded and the tool runs.
    "AH-CTK-040": 'forbid (principal, action == Action::"call_tool",'
                  ' resource == Tool::"http_get");',
    # Composition with scripted interceptors beside the hooks.
    "AH-CTK-083": REFUND_HOLD,
    "AH-CTK-087": UNRELATED,
    "AH-CTK-094": UNRELATED,
    # A context the identity provider refuses after the hooks allowed the model call.
    "AH-CTK-090": UNRELATED,
    "AH-CTK-091": UNRELATED,
}
"""The vectors that apply, each with the policy that says what its first script says.

The others do not apply to these hooks: their first interceptor transforms, fails, or denies
at a point no policy speaks of (input, output, startup, after a call, streamed output); their
resolver fails or answers against the echo rule; they pin the scripted verdicts' own reason
strings (``ctk:...``), where the hooks name their own (``governance:...``); or they load a
host declaration, which tests the host and not an interceptor.
"""


class GovernedHarness(ReferenceHarness):
    """The reference host with the hooks in place of the first scripted interceptor.

    Contexts the first interceptor receives are still recorded (the vector checks them); the
    scripted resolver is replaced by the hooks, whose person resolves as the script would.
    """

    def __init__(self, make_hooks: Callable[[str | None], GovernanceHooks]) -> None:
        super().__init__()
        self.make_hooks = make_hooks
        self.resolution: str | None = None
        self.hooks: GovernanceHooks | None = None

    def setup(self, scenario: Any, interceptors: list[Any], resolver: Any,
              mode: EnforcementMode, composition: CompositionConfig | None = None,
              identity_provider: str | None = "jcs-sha256",
              redact_for_approval: list[str] | None = None) -> None:
        self.hooks = self.make_hooks(self.resolution)
        interceptors[0].inner = self.hooks
        super().setup(scenario, interceptors, None if resolver is None else self.hooks, mode,
                      composition, identity_provider, redact_for_approval)
        assert self._emitter is not None
        self._emitter.set_record_sink(self.hooks.record)


def _vectors() -> list[dict[str, Any]]:
    found = {vector["id"]: vector for vector in load_vectors()}
    assert set(APPLICABLE) <= set(found), "the SDK no longer ships some of these vectors"
    return [found[vector_id] for vector_id in APPLICABLE]


@pytest.mark.parametrize("vector", _vectors(), ids=lambda vector: vector["id"])
def test_conformance_vector_with_the_hooks_as_interceptor(
    world: RunWorld, vector: dict[str, Any]
) -> None:
    world.policy(APPLICABLE[vector["id"]])
    run_id = world.run()
    script = vector.get("approval_script") or [{}]
    resolution = script[0].get("resolve", {}).get("outcome")
    harness = GovernedHarness(
        lambda outcome: hooks_for(world, run_id, Person(world, run_id, outcome))
    )
    harness.resolution = resolution
    result = asyncio.run(run_vector(harness, vector))
    assert result.status == "pass", "\n".join([result.detail, *result.failures])
    decided = decisions(world, run_id)
    assert harness.hooks is not None
    if vector["id"] == "AH-CTK-010":
        assert [d["outcome"] for d in decided if d["action"]["kind"] == "tool_call"] == ["deny"]
    if resolution == "approve" and vector["id"] != "AH-CTK-083":
        outcomes = [d["outcome"] for d in decided if d["action"]["kind"] == "tool_call"]
        assert outcomes == ["pending_approval", "allow"]
        records = [s["record"] for s in stored_interceptions(world.session, run_id)]
        assert [r["resolved_by"] for r in records if r["interception_point"] ==
                "pre_tool_call"] == ["approval"]
