"""The framework examples block for real: run as scripts and in process, outcomes asserted.

Each example's agent calls three tools: one a policy allows, one it denies (the tool never
runs), one it holds until a person approves (then it runs). Both frameworks must show the
same decisions, approvals and recorded tool calls.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "langchain_tool_guard": "langchain_core",
    "openai_agents_tool_guard": "agents",
}


def load(name: str) -> ModuleType:
    pytest.importorskip(EXAMPLES[name], reason=f"{name} needs {EXAMPLES[name]} (the test extra)")
    path = ROOT / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_denies_holds_and_then_runs_what_was_approved(name: str) -> None:
    lines: list[str] = []
    outcome: dict[str, Any] = load(name).main(said=lines.append)
    assert outcome["decisions"] == [
        ("lookup_order", "allow"),
        ("delete_customer", "deny"),
        ("refund", "pending_approval"),
        ("refund", "allow"),
    ]
    assert outcome["approvals"] == [("refund", "approved")]
    assert outcome["tool_spans"] == ["lookup_order", "refund"]
    assert outcome["answers"]["delete_customer"] == (
        "blocked by policy: action denied: an agent never deletes a customer"
    )
    assert outcome["answers"]["refund"] == "refunded 250 USD on order A-17"
    assert any(line.startswith("person: approving refund") for line in lines)


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_the_example_runs_as_a_script(name: str, tmp_path: Path) -> None:
    pytest.importorskip(EXAMPLES[name], reason=f"{name} needs {EXAMPLES[name]} (the test extra)")
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / f"{name}.py")], cwd=tmp_path,
        capture_output=True, text=True, timeout=120, check=False,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout.splitlines()
    assert "delete_customer: blocked by policy: action denied: an agent never deletes a customer" \
        in printed
    assert "  decision delete_customer: deny" in printed
    assert "  tool calls that ran: lookup_order, refund" in printed
