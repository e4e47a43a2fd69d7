"""A batch keeps its runs' rollups once, at its end: what it stores is what single writes store.

Spans written one a call price their run and score its risk as they go; a bulk request or an
OpenTelemetry step notes the runs it moves and keeps their rollups (``total_cost``,
``risk_level``, ``span_total``, the ``run_models`` rows) once before it commits. Whatever a
batch holds (failed items, reads and other writes between its span writes), the stored
figures must equal those of the same spans written one by one.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governance_core.service import Governance
from governance_core.storage import SQLiteStore

SCHEMA = {"span_type_schemas": [
    {"name": "llm", "params_schema": {"type": "object"},
     "data_risk": {"action_profile": {"read_data": "allowed"},
                   "params_data_categories": {"personal_identifiers": "included"}}},
    {"name": "plain", "params_schema": {"type": "object"}},
]}
MODELS = ("gpt-4o", "gpt-4o-mini", "claude-sonnet-4-5")
ROLLUPS = ("total_cost", "risk_level", "span_total", "span_counts", "token_groups")


def _world() -> tuple[Governance, str, list[str]]:
    gov = Governance(SQLiteStore(":memory:"))
    token = gov.bootstrap().token
    agent = gov.call("agents/create", {"name": "batched"}, token=token)["details"]
    runs = [
        gov.call("agent_instances/register", {
            "agent_id": agent["id"], "agent_version": {"external_identifier": "1"},
            "agent_schema_version": {"external_identifier": "s", **SCHEMA},
        }, token=token)["details"]["id"]
        for _ in range(2)
    ]
    return gov, token, runs


def _span(run: str, schema: str, model: str, tokens: int) -> dict[str, Any]:
    return {
        "agent_instance_id": run, "schema_name": schema, "status": "complete",
        "payload": {"model": model,
                    "token_usage": {"prompt_tokens": tokens, "completion_tokens": tokens // 2}},
    }


def _stored(gov: Governance, runs: list[str]) -> list[Any]:
    found = []
    for run in runs:
        record = gov.store.get("agent_instances", run)
        assert record is not None
        found.append({name: record.get(name) for name in ROLLUPS})
    models = gov.store.query("run_models")
    found.append(sorted(
        (runs.index(row["agent_instance_id"]), row["model_name"], row["input_tokens"],
         row["output_tokens"], row["cost"]) for row in models
    ))
    return found


spans = st.lists(
    st.tuples(st.integers(0, 1), st.sampled_from(("llm", "plain")), st.sampled_from(MODELS),
              st.integers(1, 5000)),
    min_size=1, max_size=12,
)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spans, st.integers(0, 12))
def test_a_bulk_stores_the_rollups_single_writes_store(
    written: list[tuple[int, str, str, int]], failing_at: int
) -> None:
    one, one_token, one_runs = _world()
    batch, batch_token, batch_runs = _world()
    items: list[dict[str, Any]] = []
    for number, (run, schema, model, tokens) in enumerate(written):
        if number == failing_at:
            break
        one.call("agent_spans/create", _span(one_runs[run], schema, model, tokens),
                 token=one_token)
        items.append({"_type": "agent_spans/create", "idempotency_key": f"item-{number:06d}",
                      **_span(batch_runs[run], schema, model, tokens)})
    if failing_at < len(written):
        # An item that fails (no such span type field allowed): the bulk stops there.
        items.append({"_type": "agent_spans/create", "idempotency_key": "failing-item",
                      **_span(batch_runs[0], "llm", "gpt-4o", 1), "status": "no-such"})
    batch.call("bulk", {"items": items}, token=batch_token)
    assert _stored(batch, batch_runs) == _stored(one, one_runs)


def test_a_read_in_the_same_bulk_sees_the_runs_rollups_kept() -> None:
    gov, token, runs = _world()
    one, one_token, one_runs = _world()
    one.call("agent_spans/create", _span(one_runs[0], "llm", "gpt-4o", 1000), token=one_token)
    level = one.call("agent_instances/show", {"agent_instance_id": one_runs[0]},
                     token=one_token)["details"]["risk_score"]["risk_level"]
    assert level is not None
    out = gov.call("bulk", {"items": [
        {"_type": "agent_spans/create", "idempotency_key": "span-item",
         **_span(runs[0], "llm", "gpt-4o", 1000)},
        {"_type": "agent_instances/list", "idempotency_key": "list-item", "risk_level": level},
    ]}, token=token)
    assert out["status"] == "success"
    assert [run["id"] for run in out["outputs"]["list-item"]["summaries"]] == [runs[0]]


def test_an_export_step_keeps_each_runs_rollups_once() -> None:
    """Inside one transaction many span writes move the run; it is priced once, at the end."""
    gov, token, runs = _world()
    session = gov.session(token)
    with gov.transaction():
        for tokens in (100, 200, 300):
            session.call("agent_spans/create", _span(runs[0], "llm", "gpt-4o", tokens))
        middle = gov.store.get("agent_instances", runs[0])
        assert middle is not None and middle.get("total_cost") is None
    after = gov.store.get("agent_instances", runs[0])
    assert after is not None and after["total_cost"] is not None and after["span_total"] == 3


TIGHT = {"category_weights": {"personal_identifiers": 50}, "action_multipliers": {"read_data": 1},
         "thresholds": {"medium": 1, "high": 2, "critical": 10_000}}


def test_a_profile_changed_between_a_bulks_span_writes_scores_the_writes_after_it() -> None:
    """The batch's rulesets outlive a finish or a read, never a write that may change one."""
    one, one_token, one_runs = _world()
    batch, batch_token, batch_runs = _world()
    agents = [gov.store.query("agents")[0]["id"] for gov in (one, batch)]
    profiles = [
        gov.call("risk_profiles/create", {"name": "Tight", "ruleset": TIGHT},
                 token=token)["details"]["id"]
        for gov, token in ((one, one_token), (batch, batch_token))
    ]

    def steps(runs: list[str], agent: str, profile: str) -> list[tuple[str, dict[str, Any]]]:
        return [
            ("agent_spans/create", _span(runs[0], "llm", "gpt-4o", 10)),
            ("agent_instances/finish", {"agent_instance_id": runs[1]}),
            ("agent_spans/create", _span(runs[0], "llm", "gpt-4o", 10)),
            ("agents/update", {"agent_id": agent, "details": {"risk_profile_id": profile}}),
            ("agent_spans/create", _span(runs[0], "llm", "gpt-4o", 10)),
        ]

    for operation, params in steps(one_runs, agents[0], profiles[0]):
        one.call(operation, params, token=one_token)
    batch.call("bulk", {"items": [
        {"_type": operation, "idempotency_key": f"item-{number:06d}", **params}
        for number, (operation, params) in enumerate(steps(batch_runs, agents[1], profiles[1]))
    ]}, token=batch_token)
    stored = _stored(batch, batch_runs)
    assert stored == _stored(one, one_runs)
    # The tight profile scored the run: the default would not call it high.
    assert stored[0]["risk_level"] == "high"
