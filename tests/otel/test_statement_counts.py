"""How many SQL statements an OTLP export runs: a regression guard, not a timing.

An export's steps read what their spans need (idempotency records, id claims, the parents
other runs' spans name) a window at a time, and write each table's records together; the
reads per step do not grow with its spans.
"""

from __future__ import annotations

import collections
import re
from pathlib import Path
from typing import Any

from governance_core.otel import ingest
from governance_core.otel.ingest import ExportSteps
from governance_core.otel.otlp_codec import decode_request
from governance_core.service import Governance
from governance_core.storage import SQLiteStore
from tests.core.test_statement_counts import statements
from tests.otel.exports import export

PROTOBUF = "application/x-protobuf"


def _reads(
    tmp_path: Path, spans: int, traces: int = 1, *, agent_known: bool = False
) -> collections.Counter[str]:
    gov = Governance(SQLiteStore(tmp_path / f"{traces}x{spans}{'+' * agent_known}.db"))
    principal = gov.authenticate(gov.bootstrap().token)
    body = decode_request(export(traces, spans, first_trace=2), PROTOBUF, 64)
    assert isinstance(gov.store, SQLiteStore)
    try:
        if agent_known:
            # An earlier export made the agent, its version and its deployment.
            ingest(gov, principal, decode_request(export(1, 2), PROTOBUF, 64))
        with statements(gov.store) as seen:
            # Steps of 200 spans whatever the machine's speed (by default a step also ends
            # after 50 ms).
            result = ingest(gov, principal, body, steps=ExportSteps(max_seconds=3600))
        assert result.accepted == traces * spans and not result.rejected
        return collections.Counter(s for s in seen if s.startswith("SELECT "))
    finally:
        gov.close()


def test_an_exports_reads_do_not_grow_with_its_spans(tmp_path: Path) -> None:
    small, large = _reads(tmp_path, 64), _reads(tmp_path, 512)
    per_span = ("SELECT idempotency_keys", "SELECT ids", "SELECT agent_spans")
    # A 512-span export is three steps: each reads each of these a few times.
    for read in per_span:
        assert large[read] <= 3 * max(small[read], 3), (read, small, large)
    assert sum(large.values()) <= 50, large


def test_an_export_of_short_traces_reads_their_runs_together(tmp_path: Path) -> None:
    # 40 traces of 5 spans, one step: the runs are looked up by trace id in one read before
    # the step (to check the spans ahead) and one in it, not twice a trace; each new run's
    # registration checks its trace id once more.
    reads = _reads(tmp_path, 5, traces=40)
    assert reads["SELECT agent_instances"] <= 2 + 40, reads
    # Each run is new, registered in the step: until the step commits no one else can know
    # its id, so no record is keyed by its spans' derived ids and none is looked for.
    for read in ("SELECT ids", "SELECT idempotency_keys", "SELECT agent_spans"):
        assert reads[read] == 0, (read, reads)
    # The agent's ruleset: looked up once for the step's span writes (a run's finish between
    # them changes no profile), and once a trace by the run's view its finish answers with.
    assert reads["SELECT risk_profiles"] <= 1 + 40, reads
    # Which is the same query each time: answered once in the step's transaction, as are each
    # registration's look-ups of the default environment and of the agent's deployment.
    assert reads["SELECT risk_profiles"] <= 1, reads
    assert reads["SELECT environments"] <= 1 and reads["SELECT agent_deployments"] <= 2, reads
    # Making the agent changes no setting: the account's policies are read once for the step,
    # under the change mark read as it began, not once a trace after the agent is made.
    assert reads["SELECT _changes"] == 1 and reads["SELECT policies"] <= 1, reads


def test_an_export_for_a_known_agent_reads_the_settings_and_its_parties_once(
    tmp_path: Path,
) -> None:
    # The step's calls apply the settings under the change mark read as it began: the
    # agent's risk profile and the account's policies are read once, not once a trace.
    reads = _reads(tmp_path, 5, traces=40, agent_known=True)
    assert reads["SELECT _changes"] == 1, reads
    assert reads["SELECT risk_profiles"] <= 1 and reads["SELECT policies"] <= 1, reads
    # Each run's registration looks up the default environment, the agent's deployment and
    # version: answered once in the step's transaction (the version once more before it, to
    # check the spans ahead), however many traces register a run.
    assert reads["SELECT environments"] <= 1 and reads["SELECT agent_deployments"] <= 1, reads
    assert reads["SELECT agent_versions"] <= 2, reads


def _postgres_statements(spans: int) -> collections.Counter[str]:
    """The statements PostgreSQL is sent for a new run's ``spans``-span export, by verb and
    table (many rows sent with one ``executemany`` count once: they go in one round trip)."""
    from governance_core.storage.postgres import PostgresStore
    from tests.stores import make_store

    store = make_store("postgres")
    assert isinstance(store, PostgresStore)
    seen: collections.Counter[str] = collections.Counter()
    one, many = store._execute, store._execute_many

    def note(query: str) -> str:
        words = query.split()
        table = re.search(r'(?:FROM|INTO|UPDATE)\s+("?\w+"?)', query)
        return f"{words[0].upper()} {table.group(1).strip(chr(34)) if table else ''}".strip()

    def execute(query: str, params: Any = (), *, fetch: bool = True) -> Any:
        seen[note(query)] += 1
        return one(query, params, fetch=fetch)

    def execute_many(query: str, rows: Any) -> None:
        seen[note(query)] += 1
        many(query, rows)

    gov = Governance(store)
    try:
        principal = gov.authenticate(gov.bootstrap().token)
        body = decode_request(export(1, spans), PROTOBUF, 64)
        store._execute = execute  # type: ignore[method-assign]
        store._execute_many = execute_many  # type: ignore[method-assign]
        result = ingest(gov, principal, body, steps=ExportSteps(max_seconds=3600))
        assert result.accepted == spans and not result.rejected
        return seen
    finally:
        gov.close()


def test_a_postgresql_export_sends_statements_per_step_not_per_span() -> None:
    small, large = _postgres_statements(64), _postgres_statements(512)
    # Each table's spans and idempotency records go in one executemany a step, and a step's
    # reads do not grow with its spans: a 512-span export is three steps of 200 at most.
    for statement in set(small) | set(large):
        assert large[statement] <= 3 * max(small[statement], 2), (statement, small, large)
    assert large["INSERT agent_spans"] <= 3 and large["INSERT idempotency_keys"] <= 3, large
    # The new run's registration included (its agent, versions, deployment and run).
    assert sum(large.values()) <= 64, large
