"""A whole run in one read over HTTP: ``.../export.jsonl`` and the pages of ``.../export``."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import falcon.testing
import jsonschema
import pytest

from governance_core.clock import format_timestamp
from governance_core.service import Bootstrap, Governance
from governance_http import create_app
from governance_http.cli import main
from governance_http.jsonlines import JSON_LINES, run_lines
from governance_http.openapi import build_document
from governance_http.routes import ROUTES, RUN_EXPORT
from tests.http.support import Api, assert_error, success_schema
from tests.http.world import World, build_world

START = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
MARKER = {"$sensitive": "string", "labels": ["pii"], "value": "078-05-1120"}
REDACTED = {"$sensitive": "string", "labels": ["pii"]}


@pytest.fixture
def world(gov: Governance, boot: Bootstrap) -> World:
    return build_world(gov, boot)


def run_id(world: World) -> str:
    return world.ids["agent_instance_id"]


def add_spans(world: World, count: int) -> None:
    """``count`` more spans on the world's run, three to each start time."""
    with world.gov.transaction():
        for index in range(count):
            world.call("agent_spans/create", {
                "agent_instance_id": run_id(world), "schema_name": "langchain:llm",
                "status": "complete", "payload": {"prompt": f"call {index}"},
                "started_at": format_timestamp(START + timedelta(seconds=index // 3)),
            })


def lines(result: falcon.testing.Result) -> list[dict[str, Any]]:
    assert result.status_code == 200, result.text
    assert result.headers["content-type"] == JSON_LINES
    assert result.text.endswith("\n")
    return [json.loads(line) for line in result.text.splitlines()]


def paged_list(api: Api, instance_id: str) -> list[dict[str, Any]]:
    """The run's spans read as clients read them today: pages of 100, in start order."""
    spans: list[dict[str, Any]] = []
    while True:
        page = api.ok("GET", "/agent_spans", params={
            "agent_instance_id": instance_id, "sorting": "started_at",
            "include_summaries": "true", "pagination[page_size]": "100",
            "pagination[offset]": str(len(spans)),
        })
        spans += page["summaries"]
        if page["pagination"]["next_page_offset"] is None:
            return spans


def test_a_run_read_whole_equals_its_paged_reads(api: Api, world: World) -> None:
    add_spans(world, 350)
    path = f"/agent_instance/{run_id(world)}/export.jsonl"
    read = lines(api.get(path, params={"page_size": "64"}))
    assert read[0] == api.ok("GET", f"/agent_instance/{run_id(world)}")["details"]
    spans = read[1:]
    # The world's run already holds a span and alert spans.
    assert len(spans) > 350
    assert spans == paged_list(api, run_id(world))
    # The default page size gives the same answer in fewer pages.
    assert lines(api.get(path)) == read


def test_the_json_pages_follow_the_cursor(api: Api, world: World) -> None:
    add_spans(world, 30)
    path = f"/agent_instance/{run_id(world)}/export"
    route = next(route for route in ROUTES if route.operation == RUN_EXPORT)
    schema = success_schema(api.get("/openapi.json").json, route)
    pages = [api.ok("GET", path, params={"page_size": "8"})]
    while pages[-1]["next_cursor"] is not None:
        pages.append(api.ok("GET", path, params={
            "page_size": "8", "cursor": pages[-1]["next_cursor"],
        }))
    for page in pages:
        jsonschema.validate(page, schema)
    listed = paged_list(api, run_id(world))
    full, rest = divmod(len(listed), 8)
    assert [len(page["spans"]) for page in pages] == [8] * full + ([rest] if rest else [])
    assert [span for page in pages for span in page["spans"]] == listed


def test_bulk_answers_the_same_page(api: Api, world: World) -> None:
    add_spans(world, 5)
    direct = api.ok("GET", f"/agent_instance/{run_id(world)}/export")
    bulk = api.ok("POST", "/bulk", json={"items": [{
        "_type": RUN_EXPORT, "idempotency_key": "export-page-1",
        "agent_instance_id": run_id(world),
    }]})
    assert bulk["outputs"]["export-page-1"] == direct


def test_sensitive_values_show_only_when_asked_by_an_account_token(
    api: Api, world: World
) -> None:
    world.call("agent_spans/create", {
        "agent_instance_id": run_id(world), "schema_name": "langchain:llm",
        "status": "complete", "payload": {"ssn": MARKER}, "sensitive_encoding": True,
    })
    path = f"/agent_instance/{run_id(world)}/export.jsonl"

    def ssn(**kwargs: Any) -> Any:
        return next(line["payload"]["ssn"] for line in lines(api.get(path, **kwargs))
                    if "ssn" in line.get("payload", {}))

    assert ssn() == REDACTED
    assert ssn(query="redacted=false") == MARKER
    assert ssn(query="redacted=false", token=world.secrets["ingestion"]) == REDACTED


def test_an_ingestion_token_exports_its_own_runs_only(api: Api, world: World) -> None:
    token = world.secrets["ingestion"]
    own = lines(api.get(f"/agent_instance/{run_id(world)}/export.jsonl", token=token))
    assert own[0]["id"] == run_id(world)
    other = world.call("agents/create", {"name": "Another agent"})["details"]
    foreign = world.call("agent_instances/register", {
        "agent_id": other["id"], "agent_version": {"external_identifier": "1"},
    })["details"]
    answer = api.get(f"/agent_instance/{foreign['id']}/export.jsonl", token=token)
    assert_error(answer, 404, "not_found")
    assert answer.headers["content-type"] == falcon.MEDIA_JSON


def test_another_accounts_run_is_not_found(
    api: Api, gov: Governance, world: World
) -> None:
    stranger = gov.bootstrap(account_name="Other", admin_email="other@other.test")
    path = f"/agent_instance/{run_id(world)}/export.jsonl"
    assert_error(api.get(path, token=stranger.token), 404, "not_found")
    assert_error(api.get(f"/agent_instance/{run_id(world)}/export", token=stranger.token),
                 404, "not_found")


def test_errors_answer_json_before_any_line(api: Api, world: World) -> None:
    path = f"/agent_instance/{run_id(world)}/export.jsonl"
    assert_error(api.get(path, token=None), 401, "not_authenticated")
    bad = assert_error(api.get(path, params={"cursor": "yesterday"}), 422, "validation_errors")
    assert list(bad["errors"]) == ["cursor"]
    bad = assert_error(api.get(path, params={"page_size": "1001"}), 422, "validation_errors")
    assert list(bad["errors"]) == ["page_size"]


def test_the_stream_reads_a_page_only_when_the_previous_one_is_written(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    add_spans(world, 25)
    gov = world.gov
    principal = gov.authenticate(world.token)
    members = {"agent_instance_id": run_id(world), "page_size": 10}
    first = gov.call(RUN_EXPORT, members, principal=principal)
    total = gov.call("agent_spans/list", {"agent_instance_id": run_id(world)},
                     principal=principal)["pagination"]["item_count"]
    assert 20 < total <= 30
    calls: list[dict[str, Any]] = []
    call = gov.call

    def counted(operation: str, params: Any = None, **kwargs: Any) -> dict[str, Any]:
        calls.append(dict(params))
        return call(operation, params, **kwargs)

    monkeypatch.setattr(gov, "call", counted)
    chunks = run_lines(gov, principal, members, first)
    assert len(next(chunks).splitlines()) == 11  # the run, then the first ten spans
    assert calls == []
    assert len(next(chunks).splitlines()) == 10
    assert len(calls) == 1
    assert calls[0]["cursor"] == first["next_cursor"]
    assert len(next(chunks).splitlines()) == total - 20
    assert len(calls) == 2 and calls[1]["cursor"] not in (None, first["next_cursor"])
    assert next(chunks, None) is None
    assert len(calls) == 2


def test_the_document_describes_the_json_lines_route(world: World) -> None:
    document = build_document(ROUTES, world.gov.registry)
    operation = document["paths"]["/api/v1/agent_instance/{agent_instance_id}/export.jsonl"]
    answer = operation["get"]["responses"]["200"]["content"]
    assert list(answer) == [JSON_LINES]
    names = {parameter["name"] for parameter in operation["get"]["parameters"]}
    assert {"agent_instance_id", "cursor", "page_size", "redacted"} <= names


def test_the_cli_export_writes_what_the_route_answers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = tmp_path / "runs.db"
    gov = Governance.open(db)
    boot = gov.bootstrap()
    world = build_world(gov, boot)
    add_spans(world, 40)
    api = Api(falcon.testing.TestClient(create_app(gov)), boot.token)
    served = lines(api.get(f"/agent_instance/{run_id(world)}/export.jsonl",
                           params={"page_size": "16"}))
    gov.close()
    assert main(["export", "--db", str(db), "--run", run_id(world)]) == 0
    written = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert written == served
