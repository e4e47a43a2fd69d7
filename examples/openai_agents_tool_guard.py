"""Guard an OpenAI Agents SDK agent's tools with policies: one denied, one held for a person.

Run it with ``python examples/openai_agents_tool_guard.py``: the store is in memory and the
model is the SDK's scripted test model (``agents.testing.ScriptedModel``, an implementation of
its ``Model`` interface), with tracing off, so it needs no network and no key.

Each tool carries a tool input guardrail that, before the tool runs, asks the account's Cedar
policies through ``Session.guard``. A denied call never reaches the tool: the guardrail
rejects it and the model reads the policy's message instead of a result. A call a policy holds
for approval waits (on a worker thread, so the event loop keeps running) until a person
approves it through the approvals operations, then runs. Every decision, the approval and each
tool call that ran are kept on the run.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

from agents import (
    Agent,
    RunConfig,
    Runner,
    ToolGuardrailFunctionOutput,
    ToolInputGuardrailData,
    function_tool,
    set_tracing_disabled,
    tool_input_guardrail,
)
from agents.items import ToolCallOutputItem
from agents.testing import ScriptedModel, assistant_message, function_call

from governance_core import ActionDenied, Governance, MemoryStore, Run, Session

POLICY = """
@reason("an agent never deletes a customer")
forbid (principal, action == Action::"call_tool", resource == Tool::"delete_customer");

@approval("refunds over 100 need a person's approval")
forbid (principal, action == Action::"call_tool", resource == Tool::"refund")
when { context.args has amount && context.args.amount > 100 };
"""

SCHEMA = {"span_type_schemas": [{"name": "tool"}]}


def make_agent(session: Session, run: Run, model: ScriptedModel) -> Agent[Any]:
    """The support agent: its tools, each behind the policy guardrail, recorded on ``run``."""

    @tool_input_guardrail
    async def policies(data: ToolInputGuardrailData) -> ToolGuardrailFunctionOutput:
        name = data.context.tool_name
        args = json.loads(data.context.tool_arguments or "{}")
        try:
            decision = await asyncio.to_thread(
                session.guard, run.id, "tool_call", name, args, timeout=30, poll_interval=0.05
            )
        except ActionDenied as refused:
            return ToolGuardrailFunctionOutput.reject_content(f"blocked by policy: {refused}")
        return ToolGuardrailFunctionOutput.allow(output_info={"decision_id": decision["id"]})

    def recorded(name: str, args: dict[str, Any], result: str) -> str:
        with run.span("tool", {"name": name, "args": args}) as span:
            span.result = {"value": result}
        return result

    @function_tool(tool_input_guardrails=[policies])
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        return recorded("lookup_order", {"order_id": order_id},
                        f"order {order_id}: 2 items, 250 USD, delivered damaged")

    @function_tool(tool_input_guardrails=[policies])
    def refund(order_id: str, amount: int) -> str:
        """Refund an order."""
        return recorded("refund", {"order_id": order_id, "amount": amount},
                        f"refunded {amount} USD on order {order_id}")

    @function_tool(tool_input_guardrails=[policies])
    def delete_customer(customer_id: str) -> str:
        """Delete a customer and their history."""
        raise AssertionError("a denied tool must never run")

    return Agent(
        name="Support bot", instructions="Help with orders.", model=model,
        tools=[lookup_order, refund, delete_customer],
    )


def scripted_model() -> ScriptedModel:
    """The model's three turns: look up and delete, then refund, then answer."""
    return ScriptedModel([
        [function_call("lookup_order", {"order_id": "A-17"}, call_id="call-1"),
         function_call("delete_customer", {"customer_id": "C-9"}, call_id="call-2")],
        [function_call("refund", {"order_id": "A-17", "amount": 250}, call_id="call-3")],
        [assistant_message("I refunded 250 USD; deleting the customer is not allowed.")],
    ])


def approve_when_asked(approver: Session, run_id: str, said: Callable[[str], None],
                       stop: threading.Event) -> None:
    """A person: waits for the run's pending approval, reads what it holds, approves it."""
    while not stop.is_set():
        pending = approver.call("approvals/list", {
            "status": "pending", "agent_instance_id": run_id,
        })["summaries"]
        for approval in pending:
            action = approval["action"]
            said(f"person: approving {action['name']} {action['args']}"
                 f" ({approval['reasons'][0]['message']})")
            approver.call("approvals/approve", {
                "approval_id": approval["id"], "reason": "checked the damage photos",
            })
        time.sleep(0.02)


def main(said: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the agent once; what happened: the tool answers, decisions and spans of the run."""
    set_tracing_disabled(True)
    governance = Governance(MemoryStore())
    setup = governance.bootstrap(account_name="Example", admin_email="admin@example.test")
    session = governance.session(setup.token)
    approver = governance.session(setup.token)
    agent_record = session.details("agents/create", {"name": "Support bot"})
    session.call("policies/create", {"name": "Support tools", "source": POLICY})

    model = scripted_model()
    stop = threading.Event()
    with session.run(agent_id=agent_record["id"], agent_version="1.0.0", schema=SCHEMA) as run:
        person = threading.Thread(target=approve_when_asked,
                                  args=(approver, run.id, said, stop), daemon=True)
        person.start()
        try:
            result = Runner.run_sync(
                make_agent(session, run, model), "Order A-17 arrived damaged.",
                run_config=RunConfig(tracing_disabled=True),
            )
        finally:
            stop.set()
            person.join()
    model.assert_complete()

    names = {"call-1": "lookup_order", "call-2": "delete_customer", "call-3": "refund"}
    answers: dict[str, str] = {}
    for item in result.new_items:
        if isinstance(item, ToolCallOutputItem):
            call_id = str(item.raw_item["call_id"])
            answers[names[call_id]] = str(item.output)
            said(f"{names[call_id]}: {item.output}")
    said(f"model: {result.final_output}")

    decisions = session.call("decisions/list", {
        "agent_instance_id": run.id, "sorting": "decided_at",
    })["summaries"]
    spans = session.call("agent_spans/list", {
        "agent_instance_id": run.id, "purpose": "activity", "sorting": "started_at",
    })["summaries"]
    said(f"run {run.id}: {run.details()['status']}")
    for decision in decisions:
        said(f"  decision {decision['action']['name']}: {decision['outcome']}")
    tool_spans = [span["payload"]["name"] for span in spans if span["schema_name"] == "tool"]
    said(f"  tool calls that ran: {', '.join(tool_spans)}")
    approvals = session.call("approvals/list", {"agent_instance_id": run.id})["summaries"]
    governance.close()
    return {
        "answers": answers,
        "decisions": [(d["action"]["name"], d["outcome"]) for d in decisions],
        "tool_spans": tool_spans,
        "approvals": [(a["action"]["name"], a["status"]) for a in approvals],
        "final": result.final_output,
    }


if __name__ == "__main__":
    main()
