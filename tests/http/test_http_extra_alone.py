"""The app as ``pip install '.[http]'`` installs it: no otel or postgres extra.

Each check runs in a fresh interpreter that can import only what that install brings
(:func:`tests.http.extras.limited_to`), the way the README's first command runs on a new
machine.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.http.extras import limited_to, not_installed_by
from tests.http.server import free_port

ROOT = Path(__file__).resolve().parents[2]

# Serves the app over HTTP on a free port and prints what each request answered.
SERVE_AND_ASK = r"""
import json
import urllib.error
import urllib.request

missing = {}
for name in ("opentelemetry", "google.protobuf", "psycopg", "psycopg_pool"):
    try:
        __import__(name)
    except ModuleNotFoundError:
        missing[name] = True
    else:
        missing[name] = False

from governance_core import Governance
from governance_http import create_app
from governance_http.testing import GovernanceServer


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


opener = urllib.request.build_opener(NoRedirect)


def ask(path, method="GET", body=None, headers=None):
    request = urllib.request.Request(server.url + path, body, headers or {}, method=method)
    try:
        answer = opener.open(request, timeout=10)
    except urllib.error.HTTPError as error:
        answer = error
    with answer:
        named = {name.lower(): value for name, value in answer.headers.items()}
        return answer.status, named, answer.read().decode()


gov = Governance.open("governance.db")
token = gov.bootstrap().token
server = GovernanceServer(gov, token)
server.start()
auth = {"Authorization": f"Bearer {token}"}
answers = {
    "ping": ask("/api/v1/ping"),
    "ping with token": ask("/api/v1/ping", headers=auth),
    "console": ask("/"),
    "sign-in": ask("/sign-in"),
    "otlp protobuf": ask("/v1/traces", "POST", b"\x0a\x00",
                         {**auth, "Content-Type": "application/x-protobuf"}),
    "otlp json": ask("/api/v1/otlp/v1/traces", "POST", b'{"resourceSpans": []}',
                     {**auth, "Content-Type": "application/json"}),
}
server.stop()
gov.close()
print(json.dumps({"missing": missing, "answers": answers}))
"""


def test_the_limited_interpreter_lacks_every_other_extra() -> None:
    blocked = not_installed_by("http")
    assert {"opentelemetry", "google", "psycopg", "psycopg_pool", "pytest"} <= blocked
    # The http extra brings the encryption extra: a server can always encrypt.
    assert not {"falcon", "granian", "rich", "jinja2", "jsonschema", "cryptography"} & blocked


def test_create_app_serves_ping_and_the_console_without_the_otel_extra(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SERVE_AND_ASK], env=limited_to(tmp_path, "http"), cwd=tmp_path,
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert all(found["missing"].values()), found["missing"]
    answers = found["answers"]

    assert answers["ping"][0] == 200 and json.loads(answers["ping"][2]) == {"status": "success"}
    assert answers["ping with token"][0] == 200
    assert (answers["console"][0], answers["console"][1]["location"]) == (303, "/sign-in?next=%2F")
    assert answers["sign-in"][0] == 200 and "Account token" in answers["sign-in"][2]
    for name in ("otlp protobuf", "otlp json"):
        status, _, body = answers[name]
        assert status == 501, (name, body)
        assert json.loads(body) == {
            "status": "error", "code": "not_implemented",
            "message": "OTLP trace ingest needs the otel extra, which is not installed: install "
                       "agent-runs-governance[otel] (from a checkout: pip install '.[otel]')",
        }


def test_the_fallback_answers_at_the_otlp_module_paths() -> None:
    otlp = pytest.importorskip("governance_http.otlp")
    from governance_http import app

    assert app._OTLP_PATHS == otlp.OTLP_PATHS


def _get(url: str) -> int:
    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: object, **kwargs: object) -> None:
            return None

    try:
        with urllib.request.build_opener(NoRedirect).open(url, timeout=5) as answer:
            status: int = answer.status
    except urllib.error.HTTPError as error:
        status = error.code
    return status


@pytest.mark.slow
def test_governance_serve_answers_with_the_http_extra_alone(tmp_path: Path) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "governance_http", "serve", "--db", str(tmp_path / "new.db"),
         "--port", str(port), "--workers", "1"],
        env=limited_to(tmp_path, "http"), cwd=tmp_path, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            assert process.poll() is None, "the server exited"
            try:
                if _get(f"{base}/api/v1/ping") == 200:
                    break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the server did not answer /api/v1/ping"
            time.sleep(0.2)
        # The workers died just after starting: the server must still answer a moment later.
        time.sleep(1)
        assert (_get(f"{base}/api/v1/ping"), _get(f"{base}/")) == (200, 303)
        assert process.poll() is None
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        output, _ = process.communicate(timeout=20)
    assert "token (shown once, keep it):" in output, output
