"""The ``governance`` command installed without the http extra (falcon, granian) or rich.

Each command runs as ``python -m governance_http.cli`` in a fresh interpreter where those
packages cannot be imported, as in an install of the core alone.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def blocked(tmp_path: Path, *modules: str) -> dict[str, str]:
    """An environment whose interpreters cannot import ``modules``."""
    site = tmp_path / f"without-{'-'.join(modules)}"
    site.mkdir()
    (site / "sitecustomize.py").write_text(
        "import sys\n" + "".join(f"sys.modules[{name!r}] = None\n" for name in modules)
    )
    return {**os.environ, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}


def governance(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "governance_http.cli", *argv],
        env=env, cwd=cwd, capture_output=True, text=True, timeout=60,
    )


def test_every_command_but_serve_works_without_falcon(tmp_path: Path) -> None:
    env = blocked(tmp_path, "falcon", "granian")
    check = governance(env, tmp_path, "--help")
    assert check.returncode == 0 and check.stdout.startswith("usage: governance")

    made = governance(env, tmp_path, "init", "--json")
    assert made.returncode == 0, made.stderr
    account = json.loads(made.stdout)["account_id"]
    issued = governance(env, tmp_path, "tokens", "create", "--account", account, "--json")
    assert issued.returncode == 0 and json.loads(issued.stdout)["token"].startswith("pf_")
    demo = governance(env, tmp_path, "demo")
    assert demo.returncode == 0 and "risk:      high, total score 293" in demo.stdout
    listed = governance(env, tmp_path, "runs", "list")
    assert listed.returncode == 0 and "Loan application review agent" in listed.stdout

    served = governance(env, tmp_path, "serve", "--port", "1")
    assert served.returncode == 1
    assert served.stderr.strip() == (
        "error: `governance serve` needs the http extra (falcon is missing): "
        "install agent-runs-governance[http] (from a checkout: pip install '.[http]')")


@pytest.mark.parametrize("command", [["runs", "list"], ["accounts", "list"]])
def test_without_rich_json_works_and_tables_name_the_extra(
    tmp_path: Path, command: list[str]
) -> None:
    env = blocked(tmp_path, "falcon", "granian", "rich")
    assert governance(env, tmp_path, "init").returncode == 0
    as_json = governance(env, tmp_path, *command, "--json")
    assert as_json.returncode == 0 and isinstance(json.loads(as_json.stdout), list)
    for_people = governance(env, tmp_path, *command)
    assert for_people.returncode == 1
    assert for_people.stderr.strip() == (
        "error: this output needs rich: install agent-runs-governance[cli] (from a checkout: "
        "pip install '.[cli]'), or add --json")
