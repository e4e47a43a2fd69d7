"""agent_instances/export: a run and its spans page after page, on each reference store."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from governance_core.clock import format_timestamp
from governance_core.errors import NotFound, ValidationErrors
from governance_core.operations.run_export import EXPORT_PAGE_MAX, SpanPosition
from governance_core.service import Bootstrap, Governance
from tests.core.runs import Caller, account_caller, make_agent
from tests.core.span_world import SpanWorld, register_run, span_world

EXPORT = "agent_instances/export"
START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MARKER = {"$sensitive": "string", "labels": ["pii"], "value": "078-05-1120"}
REDACTED = {"$sensitive": "string", "labels": ["pii"]}


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> SpanWorld:
    return span_world(gov, boot)


def tied_spans(world: SpanWorld, count: int, instance_id: str | None = None) -> None:
    """``count`` spans, written latest first, five to each start time (so ids break ties)."""
    with world.gov.transaction():
        for index in reversed(range(count)):
            started = START + timedelta(seconds=index // 5)
            world.span(
                instance_id, status="complete", started_at=format_timestamp(started),
                payload={"prompt": f"call {index}"}, result_payload={"text": "ok"},
            )


def export_pages(caller: Caller, instance_id: str, **members: Any) -> list[dict[str, Any]]:
    """Every page of a run's export, following ``next_cursor``."""
    pages = [caller.call(EXPORT, agent_instance_id=instance_id, **members)]
    while pages[-1]["next_cursor"] is not None:
        pages.append(caller.call(
            EXPORT, agent_instance_id=instance_id, cursor=pages[-1]["next_cursor"], **members
        ))
    return pages


def listed(caller: Caller, instance_id: str) -> list[dict[str, Any]]:
    """A run's spans through agent_spans/list, 100 a page, in start order, with summaries."""
    spans: list[dict[str, Any]] = []
    while True:
        page = caller.call("agent_spans/list", {
            "agent_instance_id": instance_id, "sorting": "started_at",
            "include_summaries": "true",
            "pagination": {"offset": len(spans), "page_size": 100},
        })
        spans += page["summaries"]
        if page["pagination"]["next_page_offset"] is None:
            return spans


def test_the_pages_hold_the_spans_the_list_reads_in_the_same_order(world: SpanWorld) -> None:
    tied_spans(world, 320)
    other = world.new_run()
    tied_spans(world, 4, other["id"])
    # Seven a page: groups of spans sharing a start time straddle page boundaries.
    pages = export_pages(world.caller, world.instance_id, page_size=7)
    exported = [span for page in pages for span in page["spans"]]
    assert len(pages) == 46
    assert [len(page["spans"]) for page in pages] == [7] * 45 + [5]
    assert exported == listed(world.caller, world.instance_id)
    # Start time first, then id: within a start time, the span written first comes first.
    in_order = [f"call {5 * group + 4 - i}" for group in range(64) for i in range(5)]
    assert [span["payload"]["prompt"] for span in exported] == in_order
    assert all(page["details"] == world.show_instance() for page in pages)


def test_one_page_by_default_when_the_run_fits(world: SpanWorld) -> None:
    tied_spans(world, 12)
    page = world.caller.call(EXPORT, agent_instance_id=world.instance_id)
    assert page["status"] == "success" and page["next_cursor"] is None
    assert page["details"]["type"] == "agent_instance"
    assert [span["type"] for span in page["spans"]] == ["agent_span"] * 12
    assert page["spans"][0]["summary"] == "call 4 -> ok"


def test_an_empty_run_exports_its_details_alone(world: SpanWorld) -> None:
    page = world.caller.call(EXPORT, agent_instance_id=world.instance_id)
    assert page == {"status": "success", "details": world.show_instance(), "spans": [],
                    "next_cursor": None}


def test_the_cursor_names_the_last_span_of_a_full_page(world: SpanWorld) -> None:
    tied_spans(world, 10)
    first = world.caller.call(EXPORT, agent_instance_id=world.instance_id, page_size=10)
    # Exactly one page's worth: no cursor, no empty page after it.
    assert first["next_cursor"] is None
    half = world.caller.call(EXPORT, agent_instance_id=world.instance_id, page_size=5)
    last = half["spans"][-1]
    assert half["next_cursor"] == f"{last['started_at']}_{last['id']}"
    assert SpanPosition.parse(half["next_cursor"]) == SpanPosition(last["started_at"], last["id"])


def test_spans_are_redacted_unless_an_account_token_asks(world: SpanWorld) -> None:
    world.span(status="complete", payload={"prompt": "p", "ssn": MARKER},
               sensitive_encoding=True)

    def payload(caller: Caller, **members: Any) -> Any:
        page = caller.call(EXPORT, agent_instance_id=world.instance_id, **members)
        return page["spans"][0]["payload"]["ssn"]

    assert payload(world.caller) == REDACTED
    assert payload(world.caller, redacted="true") == REDACTED
    assert payload(world.caller, redacted="false") == MARKER
    assert payload(world.ingestion(), redacted="false") == REDACTED


def test_quality_values_show_only_when_spans_do(world: SpanWorld) -> None:
    world.caller.call("agent_instances/record_quality", {
        "agent_instance_id": world.instance_id, "name": "accuracy",
        "payload": {"score": 1, "who": MARKER}, "sensitive_encoding": True,
    })

    def quality(**members: Any) -> Any:
        page = world.caller.call(EXPORT, agent_instance_id=world.instance_id, **members)
        return page["details"]["quality_payloads"]["accuracy"]["who"]

    assert quality() == REDACTED
    assert quality(redacted=False) == MARKER


def test_an_ingestion_token_exports_its_own_runs_only(world: SpanWorld) -> None:
    tied_spans(world, 3)
    own = world.ingestion().call(EXPORT, agent_instance_id=world.instance_id)
    assert len(own["spans"]) == 3
    other_agent = make_agent(world.caller, "Another agent")
    foreign = register_run(world.caller, other_agent["id"])
    with pytest.raises(NotFound):
        world.ingestion().call(EXPORT, agent_instance_id=foreign["id"])


def test_another_accounts_run_is_not_found(gov: Governance, world: SpanWorld) -> None:
    stranger = account_caller(gov, gov.bootstrap(account_name="Other", admin_email="o@o.test"))
    with pytest.raises(NotFound):
        stranger.call(EXPORT, agent_instance_id=world.instance_id)
    with pytest.raises(NotFound):
        world.caller.call(EXPORT, agent_instance_id="not-an-id")


@pytest.mark.parametrize(("member", "value"), [
    ("cursor", "2026-03-01T09:00:00Z_0"),
    ("cursor", " 2026-03-01T09:00:00.000000Z_01m8a9gr0pb7r3rfk6xaazqanb"),
    ("cursor", 12),
    ("page_size", 0),
    ("page_size", EXPORT_PAGE_MAX + 1),
    ("redacted", "perhaps"),
])
def test_bad_members_are_named(world: SpanWorld, member: str, value: Any) -> None:
    with pytest.raises(ValidationErrors) as raised:
        world.caller.call(EXPORT, agent_instance_id=world.instance_id, **{member: value})
    assert list(raised.value.errors) == [member]


def test_a_page_reads_one_page_of_spans_from_the_store(
    gov: Governance, world: SpanWorld, monkeypatch: pytest.MonkeyPatch
) -> None:
    tied_spans(world, 60)
    reads: list[tuple[int | None, int]] = []
    query = gov.store.query

    def spy(
        table: str, filters: Any = (), sort: Any = (), offset: int = 0, limit: int | None = None
    ) -> list[dict[str, Any]]:
        found = query(table, filters, sort, offset, limit)
        if table == "agent_spans":
            reads.append((limit, len(found)))
        return found

    monkeypatch.setattr(gov.store, "query", spy)
    monkeypatch.setattr(gov.store, "iterate", None)
    monkeypatch.setattr(gov.store, "get", _no_span_get(gov.store.get))
    pages = export_pages(world.caller, world.instance_id, page_size=25)
    assert [len(page["spans"]) for page in pages] == [25, 25, 10]
    # The first page is one query; each later one at most two (the tie, then later starts),
    # none asking or answering more than a page and the one that tells whether more follow.
    assert len(reads) == 5
    assert all(limit is not None and limit <= 26 and found <= 26 for limit, found in reads)


def _no_span_get(get: Any) -> Any:
    def checked(table: str, record_id: str) -> Any:
        assert table != "agent_spans", "spans are read by a query, not one by one"
        return get(table, record_id)

    return checked
