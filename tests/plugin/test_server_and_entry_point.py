"""The plugins' entry points, the server fixture, and the core plugin standing alone."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.plugin.conftest import BOTH, HTTP_PLUGIN, PLUGIN

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[2]


def test_the_plugins_are_registered_by_pytest11_entry_points() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["entry-points"]["pytest11"] == {
        "governance": PLUGIN, "governance_http": HTTP_PLUGIN}
    assert "pytest" not in " ".join(project["dependencies"])


def test_the_core_plugin_imports_nothing_of_the_http_package() -> None:
    source = (ROOT / "governance_core" / "pytest_plugin.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module)
        elif isinstance(node, ast.Import):
            imported.update(alias.name for alias in node.names)
    assert not {name for name in imported if name.split(".")[0] == "governance_http"}


def test_the_core_plugin_works_with_the_http_package_unimportable(tmp_path: Path) -> None:
    (tmp_path / "test_core_only.py").write_text('''
import sys


def test_session(governance_session, recorded_run):
    agent = governance_session.details("agents/create", name="Alone")
    with governance_session.run(agent_id=agent["id"], agent_version="1") as run:
        with run.span("llm", {}):
            pass
    recorded_run(run).assert_spans("llm", count=1)
    assert not [name for name, module in sys.modules.items()
                if name.startswith("governance_http") and module is not None]
''')
    (tmp_path / "sitecustomize.py").write_text(
        "import sys\nsys.modules['governance_http'] = None\n"
    )
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", PLUGIN, "-p", "no:cacheprovider", "-q",
         str(tmp_path / "test_core_only.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
             "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed" in result.stdout


def test_an_sdk_style_client_records_through_the_server(user_pytest: pytest.Pytester) -> None:
    user_pytest.makepyfile(test_sdk='''
import json
import urllib.request


def send(server, method, path, body=None, request_id=None):
    request = urllib.request.Request(
        server.api_url + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"Bearer {server.token}", "Content-Type": "application/json",
                 **({"X-Request-Id": request_id} if request_id else {})},
    )
    with urllib.request.urlopen(request) as response:
        return response.headers, json.loads(response.read())


def test_records_over_http(governance_server, recorded_run):
    _, agent = send(governance_server, "POST", "/agent", {"details": {"name": "Remote"}})
    headers, run = send(governance_server, "POST", "/agent_instance/register", {
        "agent_id": agent["details"]["id"], "agent_version": {"name": "v1",
        "external_identifier": "v1"}, "agent_schema_version": {"external_identifier": "s1",
        "span_type_schemas": [{"name": "llm"}]}}, request_id="run-42")
    assert headers["X-Request-Id"] == "run-42"
    run_id = run["details"]["id"]
    send(governance_server, "POST", f"/agent_instance/{run_id}/start")
    send(governance_server, "POST", "/agent_spans", {"details": {
        "agent_instance_id": run_id, "schema_name": "llm", "status": "complete",
        "payload": {"model": "gpt-4o"},
        "result_payload": {"usage": {"input_tokens": 10, "output_tokens": 5}}}})
    send(governance_server, "POST", f"/agent_instance/{run_id}/finish", {})
    recorded = recorded_run()
    assert recorded.id == run_id
    recorded.assert_status("complete")
    recorded.assert_spans("llm", count=1)
    recorded.assert_cost(at_most=0.01)
''')
    result = user_pytest.runpytest(*BOTH, "-rs")
    if importlib.util.find_spec("falcon") is None:  # the core alone (nox's tests_core)
        result.assert_outcomes(skipped=1)
        result.stdout.fnmatch_lines(["*the governance_server fixture needs the http extra*"])
    else:
        result.assert_outcomes(passed=1)


def test_without_falcon_the_server_fixture_skips_saying_why(tmp_path: Path) -> None:
    (tmp_path / "test_needs_server.py").write_text(
        "def test_server(governance_server):\n    pass\n\n"
        "def test_session(governance_session):\n"
        "    assert governance_session.call('agents/list')['summaries'] == []\n"
    )
    blocker = tmp_path / "sitecustomize.py"
    blocker.write_text("import sys\nsys.modules['falcon'] = None\n")
    result = subprocess.run(
        [sys.executable, "-m", "pytest", *BOTH, "-p", "no:cacheprovider", "-rs",
         "-q", str(tmp_path / "test_needs_server.py")],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}", "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1",
             "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "1 passed, 1 skipped" in result.stdout
    assert "the governance_server fixture needs the http extra" in result.stdout
