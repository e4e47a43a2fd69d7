"""Under load an OTLP export that no thread takes in time is answered 503 at once, never run;
one that runs counts the time it waited against its deadline."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterable
from typing import Any

import falcon
import falcon.testing
from google.rpc import status_pb2

from governance_core.context import Principal
from governance_core.otel.ingest import ExportSteps
from governance_core.service import Bootstrap, Governance
from governance_http.body import BodyLimits
from governance_http.gateway import WAITED_KEY, BodyFirst, Shedding
from governance_http.otlp import EXPORT_DEADLINE_S, OTLP_PATHS, add_otlp_routes, export_shedding
from tests.http.test_slow_bodies import Client, scope
from tests.otel.exports import export
from tests.otel.test_large_exports import StoppedClock, principal, stored_spans

__all__ = ["principal"]  # the fixture, imported for these tests


class HeldApp:
    """A WSGI app that holds its thread on ``/hold`` until released; notes what it ran."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.ran: list[tuple[str, float]] = []
        self.hold_s = 0.0

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        self.ran.append((environ["PATH_INFO"], environ[WAITED_KEY]))
        if environ["PATH_INFO"] == "/hold":
            self.release.wait(10)
        time.sleep(self.hold_s)
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b"{}"]


def shed(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    start_response("503 Service Unavailable", [("Retry-After", "1")])
    return [f"{environ[WAITED_KEY]:.2f}".encode()]


def test_an_export_no_thread_takes_in_time_is_answered_503_and_never_run() -> None:
    app = HeldApp()
    gateway = BodyFirst(app, threads=1, shedding=Shedding(frozenset({"/v1/traces"}), 0.2, shed))
    holder, export_, other = Client([b"{}"]), Client([b"{}"]), Client([b"{}"])

    async def run() -> None:
        held = asyncio.create_task(gateway(scope("/hold"), holder.receive, holder.send))
        await asyncio.sleep(0.05)
        waiting = asyncio.create_task(gateway(scope("/x"), other.receive, other.send))
        # The one thread is held: the export waits, and is answered at its time, unrun.
        await gateway(scope("/v1/traces"), export_.receive, export_.send)
        assert not holder.sent and not other.sent
        app.release.set()
        await held
        await waiting

    asyncio.run(run())
    assert export_.status == 503
    waited = float(b"".join(m.get("body", b"") for m in export_.sent[1:]))
    assert 0.2 <= waited < 2
    # A request the shedding does not name waits its turn and runs; the export never ran.
    assert (holder.status, other.status) == (200, 200)
    assert [path for path, _ in app.ran] == ["/hold", "/x"]
    assert app.ran[1][1] >= 0.05


def test_an_export_a_thread_takes_in_time_runs_and_knows_its_wait() -> None:
    app = HeldApp()
    gateway = BodyFirst(app, threads=1, shedding=Shedding(frozenset({"/v1/traces"}), 5, shed))
    client = Client([b"{}"])
    asyncio.run(gateway(scope("/v1/traces"), client.receive, client.send))
    assert client.status == 200
    [(path, waited)] = app.ran
    assert path == "/v1/traces" and 0 <= waited < 1


def test_the_server_sheds_exports_with_a_status_in_their_encoding() -> None:
    shedding = export_shedding()
    assert shedding.paths == frozenset(OTLP_PATHS) and shedding.after_s == EXPORT_DEADLINE_S
    for content_type in ("application/x-protobuf", "application/json"):
        answered: list[Any] = []
        body = b"".join(shedding.answer(
            {"CONTENT_TYPE": content_type, WAITED_KEY: 6.25, "HTTP_X_REQUEST_ID": "r-1"},
            lambda status, headers, into=answered: into.append((status, dict(headers))),
        ))
        [(status, headers)] = answered
        assert status.startswith("503") and headers["Retry-After"] == "1"
        assert headers["Content-Type"] == content_type and headers["X-Request-Id"] == "r-1"
        if content_type == "application/json":
            found = json.loads(body)
            code, message = found["code"], found["message"]
        else:
            parsed = status_pb2.Status.FromString(body)
            code, message = parsed.code, parsed.message
        assert code == 14
        assert "waited 6.2 s" in message and "nothing of it is stored" in message


def test_an_export_counts_the_time_it_waited_against_its_deadline(
    gov: Governance, boot: Bootstrap, principal: Principal,
) -> None:
    app = falcon.App()
    add_otlp_routes(app, gov, BodyLimits(), environ={}, deadline_s=5,
                    steps=ExportSteps(max_spans=10, pause_seconds=0, timer=StoppedClock()))
    client = falcon.testing.TestClient(app)
    headers = {"Content-Type": "application/x-protobuf", "Authorization": f"Bearer {boot.token}"}
    body = export(1, 30)
    # Waited 4 s of its 5: not yet past its deadline (the clock stands still), stored whole.
    whole = client.simulate_post("/v1/traces", body=body, headers=headers,
                                 extras={WAITED_KEY: 4.0})
    assert whole.status_code == 200
    # Waited 6 s: past its deadline on arrival, it stores one step of new spans (the steps
    # finding the first trace stored do not count) and answers 503.
    cut = client.simulate_post("/v1/traces", body=export(2, 30), headers=headers,
                               extras={WAITED_KEY: 6.0})
    assert cut.status_code == 503 and cut.headers["retry-after"] == "1"
    assert "stopped at its deadline" in status_pb2.Status.FromString(cut.content).message
    assert 30 < len(stored_spans(gov, principal)) < 62


def test_an_export_that_would_wait_past_its_time_is_answered_at_once() -> None:
    app = HeldApp()
    gateway = BodyFirst(app, threads=1, shedding=Shedding(frozenset({"/v1/traces"}), 0.3, shed))
    first, held, queued, late = (Client([b"{}"]) for _ in range(4))

    async def run() -> None:
        # An export that takes 0.4 s teaches the gateway what an export costs.
        app.release.set()
        timed = gateway(scope("/v1/traces"), first.receive, first.send)
        app.hold_s = 0.4
        await timed
        app.hold_s = 0.0
        app.release.clear()
        holding = asyncio.create_task(gateway(scope("/hold"), held.receive, held.send))
        await asyncio.sleep(0.05)
        # Nothing waits yet: this export is queued, and shed when its 0.3 s pass.
        waiting = asyncio.create_task(gateway(scope("/v1/traces"), queued.receive, queued.send))
        await asyncio.sleep(0.05)
        # One export (0.4 s) waits before this one: more than its 0.3 s, answered now.
        began = time.monotonic()
        await gateway(scope("/v1/traces"), late.receive, late.send)
        assert time.monotonic() - began < 0.2 and not queued.sent
        await waiting
        app.release.set()
        await holding

    asyncio.run(run())
    for client, least, most in ((late, 0.0, 0.2), (queued, 0.3, 1.0)):
        assert client.status == 503
        assert least <= float(b"".join(m.get("body", b"") for m in client.sent[1:])) < most
    assert [path for path, _ in app.ran] == ["/v1/traces", "/hold"]
