"""Docs and examples are executable: each ```python block in docs/, each example script."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for page in sorted((ROOT / "docs").glob("*.md")):
        for index, match in enumerate(BLOCK.finditer(page.read_text())):
            found.append((f"{page.name}#{index}", match.group(1)))
    return found


def _run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(("where", "code"), _blocks(), ids=[w for w, _ in _blocks()])
def test_doc_block_runs(where: str, code: str, tmp_path: Path) -> None:
    result = _run(["-c", code], tmp_path)
    assert result.returncode == 0, f"{where} failed:\n{result.stderr}"


@pytest.mark.parametrize(
    "script", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name
)
def test_example_runs(script: Path, tmp_path: Path) -> None:
    result = _run([str(script)], tmp_path)
    assert result.returncode == 0, f"{script.name} failed:\n{result.stderr}"
    assert result.stdout.strip(), f"{script.name} printed nothing"


def test_docs_pages_exist() -> None:
    for page in ("embedding.md", "serving.md", "http-reference.md", "storage-adapters.md",
                 "decisions.md"):
        assert (ROOT / "docs" / page).is_file(), page


def test_http_reference_is_generated_from_the_code() -> None:
    result = _run([str(ROOT / "scripts" / "http_reference.py"), "--check"], ROOT)
    assert result.returncode == 0, "run: python scripts/http_reference.py"
