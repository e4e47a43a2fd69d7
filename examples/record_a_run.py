"""Record a small run of an agent from inside the agent's code, then read what was kept.

Run it with ``python examples/record_a_run.py``: it needs no server and no files (the store
is in memory).
"""

from __future__ import annotations

from typing import Any

from governance_core import Governance, MemoryStore

SCHEMA = {
    "span_type_schemas": [
        {
            "name": "llm",
            "title": "Model call",
            "params_schema": {"type": "object", "properties": {"prompt": {"type": "string"}}},
            "template": "{{ prompt | truncate: 30 }}",
        },
        {"name": "tool", "title": "Tool call"},
    ],
    "quality_schemas": [{"name": "helpfulness", "schema": {"type": "object"}}],
}


def main() -> None:
    governance = Governance(MemoryStore())
    setup = governance.bootstrap(account_name="Example", admin_email="admin@example.test")
    session = governance.session(setup.token)
    agent = session.details("agents/create", {"details": {"name": "Loan reviewer"}})

    with session.run(agent_id=agent["id"], agent_version="1.0.0", schema=SCHEMA) as run:

        @run.traced("tool")
        def credit_score(customer_id: str) -> dict[str, Any]:
            return {"customer_id": customer_id, "score": 712}

        with run.span("llm", {"prompt": "Review the loan application of customer 42"}) as llm:
            score = credit_score("42")
            llm.result = {"text": f"approve (score {score['score']})"}

        try:
            with run.span("tool", {"name": "fetch_payslips"}):
                raise TimeoutError("the payroll service did not answer")
        except TimeoutError:
            pass  # the span is recorded as failed, with the error in its result

        run.record_quality("helpfulness", {"rating": 4})

    details = run.details()
    print("run status:", details["status"])
    print("span counts:", details["span_counts"])
    print("spans by type:", details["span_schema_counts"]["by_name"])
    for span in session.call("agent_spans/list", agent_instance_id=run.id,
                             purpose="activity", sorting="started_at")["summaries"]:
        parent = "nested" if span["parent_span_id"] else "top"
        print(f"  {span['schema_title']:<10} {span['status']:<9} {parent:<6} "
              f"{span['result_payload']}")


if __name__ == "__main__":
    main()
