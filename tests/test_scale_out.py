"""Several stateless nodes on one PostgreSQL database keep every aggregate exact.

Four ``governance serve`` processes (then four library processes) share one database; eight
clients write spans, span finishes, quality payloads and alerts to the same few runs for a
bounded time, re-sending some requests with their idempotency keys. Afterwards every aggregate
kept on write equals a recount from the stored rows, nothing was stored twice, a re-sent
request answered what the first did, and no failure other than ``temporarily_unavailable``
(503) happened. Needs $GOVERNANCE_TEST_POSTGRES_URL.
"""

from __future__ import annotations

import json
import multiprocessing
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import attrs
import pytest

from governance_core.encryption import generate_key
from governance_core.errors import GovernanceError
from governance_core.rules.aggregates import apply_span
from governance_core.service import Governance
from governance_core.storage import Filter, Store, open_store
from governance_http.settings import ENCRYPTION_KEY_VARIABLE
from tests.core.runs import account_caller, make_agent
from tests.core.span_world import register_run
from tests.stores import scratch_schema

pytestmark = pytest.mark.slow

NODES = 4
CLIENTS = 8
RUNS = 3
SECONDS = 20.0
RESEND_SHARE = 0.2

# operation -> (method, path template) of the HTTP interface
ROUTES = {
    "agent_spans/create": ("POST", "/agent_spans"),
    "agent_spans/finish": ("POST", "/agent_spans/{agent_span_id}/finish"),
    "agent_instances/record_quality": (
        "POST", "/agent_instance/{agent_instance_id}/record_quality"
    ),
    "alerts/raise": ("POST", "/alerts/raise"),
    "alerts/clear": ("POST", "/alerts/clear"),
}

# A send: (operation, params) -> (status, body); status 200 for a success, else the error's.
Send = Callable[[str, dict[str, Any]], tuple[int, Any]]


@attrs.define
class Tally:
    """What one client saw and what it knows was stored."""

    client: int
    created: list[str] = attrs.Factory(list)
    quality: dict[str, dict[str, Any]] = attrs.Factory(dict)
    statuses: Counter[int] = attrs.Factory(Counter)
    replays: int = 0
    mismatches: list[str] = attrs.Factory(list)


def _http_send(base_urls: list[str], token: str) -> Send:
    def send(operation: str, params: dict[str, Any]) -> tuple[int, Any]:
        method, template = ROUTES[operation]
        path = template.format(**params)
        body = {k: v for k, v in params.items() if "{" + k + "}" not in template}
        request = urllib.request.Request(
            f"{random.choice(base_urls)}/api/v1{path}", json.dumps(body).encode(), method=method
        )
        request.add_header("Content-Type", "application/json")
        request.add_header("Authorization", f"Bearer {token}")
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return response.status, json.loads(response.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"null")

    return send


_STATUS = {"temporarily_unavailable": 503}


def _library_send(gov: Governance, token: str) -> Send:
    def send(operation: str, params: dict[str, Any]) -> tuple[int, Any]:
        try:
            return 200, gov.call(operation, params, token=token)
        except GovernanceError as error:
            return _STATUS.get(error.code, 400), error.to_payload()

    return send


def _client(number: int, send: Send, runs: list[str], seconds: float) -> Tally:
    """Write to ``runs`` until ``seconds`` have passed; what was acknowledged."""
    tally = Tally(number)
    rng = random.Random(number)
    active: list[str] = []
    deadline = time.monotonic() + seconds
    step = 0
    while time.monotonic() < deadline:
        step += 1
        run = rng.choice(runs)
        key = f"client-{number}-step-{step}"
        choice = rng.random()
        if choice < 0.4:
            operation, params = "agent_spans/create", {
                "agent_instance_id": run, "schema_name": rng.choice(["llm", "tool"]),
                "status": "active", "payload": {"prompt": "p", "model": "gpt-4o"},
            }
        elif choice < 0.6 and active:
            operation, params = "agent_spans/finish", {
                "agent_span_id": active.pop(rng.randrange(len(active))),
                "status": rng.choice(["complete", "failed"]),
                "result_payload": {"usage": {"input_tokens": step, "output_tokens": number}},
            }
        elif choice < 0.75:
            operation, params = "agent_instances/record_quality", {
                "agent_instance_id": run, "name": f"q{number}", "payload": {"step": step},
            }
        elif choice < 0.9:
            operation, params = "alerts/raise", {
                "agent_instance_id": run, "name": rng.choice(["slow", "odd"]),
                "severity": rng.choice(["warning", "error"]),
                "payload": {"client": number, "step": step},
            }
        else:
            operation, params = "alerts/clear", {
                "agent_instance_id": run, "name": rng.choice(["slow", "odd"]),
            }
        params["idempotency_key"] = key
        status, body = _until_answered(send, operation, params, tally)
        if status == 200 and rng.random() < RESEND_SHARE:
            again, replayed = _until_answered(send, operation, params, tally)
            tally.replays += 1
            if (again, replayed) != (status, body):
                tally.mismatches.append(f"{operation} {key}: {body} then {replayed}")
        if status != 200:
            continue
        if operation == "agent_spans/create":
            tally.created.append(body["details"]["id"])
            active.append(body["details"]["id"])
        elif operation == "agent_instances/record_quality":
            tally.quality[run] = params["payload"]
    return tally


def _until_answered(
    send: Send, operation: str, params: dict[str, Any], tally: Tally
) -> tuple[int, Any]:
    """Send, and send again with the same key while the answer is 503 (100 times at most)."""
    for _ in range(100):
        status, body = send(operation, params)
        tally.statuses[status] += 1
        if status != 503:
            return status, body
        time.sleep(min(body.get("retry_after_ms", 100), 200) / 1000 * random.random())
    raise AssertionError(f"{operation} {params['idempotency_key']} answered 503 100 times")


# -- the world and its recount ----------------------------------------------------------------
@attrs.frozen
class World:
    url: str
    token: str
    agent_id: str
    runs: list[str]


@pytest.fixture
def world() -> Iterator[World]:
    with scratch_schema("nodes") as url:
        gov = Governance.open(url)
        try:
            boot = gov.bootstrap()
            caller = account_caller(gov, boot)
            agent_id = make_agent(caller)["id"]
            runs = [register_run(caller, agent_id)["id"] for _ in range(RUNS)]
        finally:
            gov.close()
        yield World(url, boot.token, agent_id, runs)


def _rows(store: Store, table: str, **equal: Any) -> list[dict[str, Any]]:
    return list(store.iterate(table, [Filter(k, "eq", v) for k, v in equal.items()]))


def _check(world: World, tallies: list[Tally]) -> None:
    statuses: Counter[int] = sum((t.statuses for t in tallies), Counter())
    assert not [s for s in statuses if s >= 500 and s != 503], statuses
    assert statuses[200] > 100, f"too little was written to test anything: {statuses}"
    assert [m for t in tallies for m in t.mismatches] == []
    assert sum(t.replays for t in tallies) > 0
    created = [span_id for t in tallies for span_id in t.created]
    assert len(created) == len(set(created)), "a re-sent create made a second span"
    store = open_store(world.url)
    try:
        activity = {
            span["id"]: span for span in _rows(store, "agent_spans", agent_id=world.agent_id)
            if span["purpose"] == "activity"
        }
        assert sorted(activity) == sorted(created), "stored spans are not the acknowledged ones"
        for run_id in world.runs:
            run = store.get("agent_instances", run_id)
            assert run is not None
            spans = [s for s in activity.values() if s["agent_instance_id"] == run_id]
            recount: dict[str, Any] = {
                "span_counts": None, "span_schema_counts": None,
                "last_activity_span_at": None, "token_groups": None,
            }
            for span in sorted(spans, key=lambda s: s["id"]):
                recount = apply_span(recount, None, span)
            for field in ("span_counts", "span_schema_counts", "last_activity_span_at"):
                assert run[field] == recount[field], field
            assert (run.get("token_groups") or []) == (recount["token_groups"] or [])
            alerts = _rows(store, "alerts", agent_instance_id=run_id)
            names = Counter(alert["name"] for alert in alerts)
            assert all(count == 1 for count in names.values()), f"duplicate alerts {names}"
            assert run["raised_alert_count"] == sum(a["status"] == "raised" for a in alerts)
            events = Counter(
                span["schema_name"]
                for span in _rows(store, "agent_spans", agent_instance_id=run_id)
                if span["purpose"] == "alert"
            )
            for alert in alerts:
                # Every raise here changes the payload and every clear the status: one
                # version per recorded event.
                assert alert["version"] == events[alert["name"]], alert["name"]
            expected_quality = {
                f"q{t.client}": t.quality[run_id] for t in tallies if run_id in t.quality
            }
            assert run["quality_payloads"] == expected_quality
        agent = store.get("agents", world.agent_id)
        assert agent is not None
        runs = [store.get("agent_instances", run_id) or {} for run_id in world.runs]
        by_status = Counter(run["status"] for run in runs)
        counts = {status: n for status, n in agent["instance_counts"].items() if n}
        assert counts == {**by_status, "total": len(runs)}
        assert agent["last_activity_span_at"] == max(
            run["last_activity_span_at"] for run in runs if run["last_activity_span_at"]
        )
        # One key kept per acknowledged write; a re-sent one replays it.
        replays = sum(t.replays for t in tallies)
        assert store.count("idempotency_keys") == statuses[200] - replays
    finally:
        store.close()


# -- the two deployments ----------------------------------------------------------------------
def _run_clients(sends: list[Send], world: World, seconds: float) -> list[Tally]:
    tallies: list[Tally] = []
    failures: list[BaseException] = []

    def body(number: int) -> None:
        try:
            tallies.append(_client(number, sends[number % len(sends)], world.runs, seconds))
        except BaseException as error:
            failures.append(error)

    threads = [threading.Thread(target=body, args=(n,)) for n in range(CLIENTS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return tallies


def test_four_servers_on_one_database(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.http.server import Served

    # `governance serve` on PostgreSQL refuses to start without a key; the servers share one.
    monkeypatch.setenv(ENCRYPTION_KEY_VARIABLE, generate_key())
    servers = [Served(world.url) for _ in range(NODES)]  # type: ignore[arg-type]
    try:
        for server in servers:
            server.wait_ready(timeout=60)
        send = _http_send([server.base_url for server in servers], world.token)
        tallies = _run_clients([send], world, SECONDS)
    finally:
        for server in servers:
            server.stop()
    _check(world, tallies)


def _library_node(url: str, token: str, runs: list[str], first: int, out: Any) -> None:
    gov = Governance.open(url)
    try:
        send = _library_send(gov, token)
        numbers = range(first, first + CLIENTS // NODES)
        tallies: list[Tally] = []
        threads = [
            threading.Thread(target=lambda n=n: tallies.append(_client(n, send, runs, SECONDS)))
            for n in numbers
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        out.put([attrs.asdict(tally) for tally in tallies])
    except BaseException as error:
        out.put(repr(error))
    finally:
        gov.close()


def test_four_library_processes_on_one_database(world: World) -> None:
    context = multiprocessing.get_context("spawn")
    out = context.Queue()
    per_node = CLIENTS // NODES
    processes = [
        context.Process(
            target=_library_node, args=(world.url, world.token, world.runs, n * per_node, out)
        )
        for n in range(NODES)
    ]
    for process in processes:
        process.start()
    answers = [out.get(timeout=SECONDS + 120) for _ in processes]
    for process in processes:
        process.join(timeout=30)
    failed = [answer for answer in answers if isinstance(answer, str)]
    assert failed == []
    tallies = [
        Tally(**{**fields, "statuses": Counter(fields["statuses"])})
        for answer in answers for fields in answer
    ]
    assert len(tallies) == CLIENTS
    _check(world, tallies)
