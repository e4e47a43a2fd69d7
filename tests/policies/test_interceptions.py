"""A decision keeps the agent-hooks interception record of the emission it decided."""

from __future__ import annotations

from typing import Any

import pytest

from governance_core.errors import Conflict, NotFound, ValidationErrors
from governance_core.operations.decisions import INTERCEPTION_MAX_BYTES
from tests.policies.support import RunWorld


def record(sequence: int = 1, **members: Any) -> dict[str, Any]:
    """An interception record's wire form, as an agent-hooks host writes it."""
    return {
        "interception_point": "pre_tool_call", "mode": "enforce",
        "verdict": {"decision": "allow"}, "input_identity": "sha256:aa",
        "enforced_identity": "sha256:aa", "session_id": "s-1", "sequence": sequence,
        "decided_by": 0, "composition": {"mode": "all"}, "interceptors_registered": 1,
        **members,
    }


def keep(world: RunWorld, decision_id: str, body: Any, **caller: Any) -> dict[str, Any]:
    session = caller.get("session", world.session)
    return session.details(  # type: ignore[no-any-return]
        "decisions/record_interception", {"decision_id": decision_id, "record": body}
    )


def test_a_decision_keeps_its_interception_record_once(world: RunWorld) -> None:
    run = world.run()
    decision = world.decide(run, "tool_call", "search")
    assert decision["interception"] is None
    kept = keep(world, decision["id"], record())
    assert kept["interception"] == record() and kept["outcome"] == "allow"
    # The same record again changes nothing; another is refused, the first one kept.
    assert keep(world, decision["id"], record()) == kept
    with pytest.raises(Conflict, match="another interception record"):
        keep(world, decision["id"], record(sequence=2))
    listed = world.session.call("decisions/list", {"agent_instance_id": run})["summaries"]
    assert [d["interception"] for d in listed] == [record()]
    shown = world.session.details("decisions/show", {"decision_id": decision["id"]})
    assert shown["interception"] == record()


@pytest.mark.parametrize(("body", "message"), [
    (None, "record"),
    ("text", "record must be an object"),
    ({"mode": "enforce"}, "record.interception_point must be a str"),
    (record(sequence=True), "record.sequence must be a int"),
    (record(verdict="allow"), "record.verdict must be a dict"),
    (record(declaration="x" * INTERCEPTION_MAX_BYTES), f"larger than {INTERCEPTION_MAX_BYTES}"),
])
def test_a_record_that_is_not_an_interception_record_is_refused(
    world: RunWorld, body: Any, message: str
) -> None:
    decision = world.decide(world.run(), "tool_call", "search")
    with pytest.raises(ValidationErrors) as refused:
        keep(world, decision["id"], body)
    assert message in str(refused.value.to_payload())
    shown = world.session.details("decisions/show", {"decision_id": decision["id"]})
    assert shown["interception"] is None


def test_only_a_decision_in_reach_keeps_a_record(world: RunWorld) -> None:
    issued = world.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": world.agent_id,
        "environment_id": world.boot.environment_id,
    })
    ingestion = world.gov.session(issued["token"])
    own = world.decide(world.run(), "tool_call", "search", session=ingestion)
    assert keep(world, own["id"], record(), session=ingestion)["interception"] == record()
    other_agent = world.session.details("agents/create", {"name": "Other"})["id"]
    foreign = world.decide(world.run(other_agent), "tool_call", "search")
    for unknown in (foreign["id"], "not-an-id"):
        with pytest.raises(NotFound):
            keep(world, unknown, record(), session=ingestion)
