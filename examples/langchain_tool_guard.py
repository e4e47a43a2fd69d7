"""Guard a LangChain agent's tools with policies: a call denied, a call held for a person.

Run it with ``python examples/langchain_tool_guard.py``: the store is in memory and the chat
model is LangChain's fake one (it answers from a script), so it needs no network and no key.

Each tool is wrapped so that, before it runs, ``Session.guard`` asks the account's Cedar
policies whether the run may call it with these arguments. A denied call never reaches the
tool: the model gets the policy's message as the tool's error. A call a policy holds for
approval waits until a person approves it (here a second thread, through the approvals
operations), then runs. Every decision, the approval and each tool call that ran are kept on
the run.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from langchain_core.language_models.fake_chat_models import FakeMessagesListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, ToolException, tool

from governance_core import ActionDenied, Governance, MemoryStore, Run, Session

POLICY = """
@reason("an agent never deletes a customer")
forbid (principal, action == Action::"call_tool", resource == Tool::"delete_customer");

@approval("refunds over 100 need a person's approval")
forbid (principal, action == Action::"call_tool", resource == Tool::"refund")
when { context.args has amount && context.args.amount > 100 };
"""

SCHEMA = {"span_type_schemas": [{"name": "llm"}, {"name": "tool"}]}


@tool
def lookup_order(order_id: str) -> str:
    """Look an order up."""
    return f"order {order_id}: 2 items, 250 USD, delivered damaged"


@tool
def refund(order_id: str, amount: int) -> str:
    """Refund an order."""
    return f"refunded {amount} USD on order {order_id}"


@tool
def delete_customer(customer_id: str) -> str:
    """Delete a customer and their history."""
    raise AssertionError("a denied tool must never run")


def governed(original: BaseTool, session: Session, run: Run) -> StructuredTool:
    """``original``, asking the policies first and recording each call that runs on ``run``."""

    def call(**args: Any) -> Any:
        try:
            session.guard(run.id, "tool_call", original.name, args, timeout=30,
                          poll_interval=0.05)
        except ActionDenied as refused:
            raise ToolException(f"blocked by policy: {refused}") from None
        with run.span("tool", {"name": original.name, "args": args}) as span:
            result = original.invoke(args)
            span.result = {"value": result}
            return result

    return StructuredTool.from_function(
        func=call, name=original.name, description=original.description,
        args_schema=original.args_schema, handle_tool_error=True,
    )


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


def scripted_model() -> FakeMessagesListChatModel:
    """The model's three turns: look up and delete, then refund, then answer."""
    return FakeMessagesListChatModel(responses=[
        AIMessage(content="", tool_calls=[
            {"name": "lookup_order", "args": {"order_id": "A-17"}, "id": "call-1"},
            {"name": "delete_customer", "args": {"customer_id": "C-9"}, "id": "call-2"},
        ]),
        AIMessage(content="", tool_calls=[
            {"name": "refund", "args": {"order_id": "A-17", "amount": 250}, "id": "call-3"},
        ]),
        AIMessage(content="I refunded 250 USD; deleting the customer is not allowed."),
    ])


def main(said: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the agent once; what happened: the tool answers, decisions and spans of the run."""
    governance = Governance(MemoryStore())
    setup = governance.bootstrap(account_name="Example", admin_email="admin@example.test")
    session = governance.session(setup.token)
    approver = governance.session(setup.token)
    agent = session.details("agents/create", {"name": "Support bot"})
    session.call("policies/create", {"name": "Support tools", "source": POLICY})

    model = scripted_model()
    stop = threading.Event()
    answers: dict[str, str] = {}
    with session.run(agent_id=agent["id"], agent_version="1.0.0", schema=SCHEMA) as run:
        person = threading.Thread(target=approve_when_asked,
                                  args=(approver, run.id, said, stop), daemon=True)
        person.start()
        tools = {t.name: governed(t, session, run)
                 for t in (lookup_order, refund, delete_customer)}
        messages: list[BaseMessage] = [HumanMessage("Order A-17 arrived damaged.")]
        try:
            while True:
                with run.span("llm", {"model": "fake", "messages": len(messages)}) as turn:
                    reply = model.invoke(messages)
                    turn.result = {"text": reply.content}
                assert isinstance(reply, AIMessage)
                messages.append(reply)
                if not reply.tool_calls:
                    break
                for call in reply.tool_calls:
                    answer = tools[call["name"]].invoke(call)
                    assert isinstance(answer, ToolMessage)
                    answers[call["name"]] = str(answer.content)
                    said(f"{call['name']}: {answer.content}")
                    messages.append(answer)
        finally:
            stop.set()
            person.join()
        said(f"model: {reply.content}")

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
        "final": reply.content,
    }


if __name__ == "__main__":
    main()
