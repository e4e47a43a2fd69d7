"""Docs and examples are executable: each ```python block in docs/, each example script.

Each page's blocks run where only what the page's install lines install can be imported, and
every install line names the real distribution and real extras.
"""

from __future__ import annotations

import ast
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from tests.http.extras import (
    distribution,
    installed_by,
    limited_to,
    project_extras,
    providers,
)

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
INLINE_CODE = re.compile(r"`([^`]+)`")
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# What the docs install besides the project: the README's test command installs nox.
TOOLS = {"nox"}
# pip options whose value is not a package to install.
VALUED_OPTIONS = {"-r", "--requirement", "-c", "--constraint", "-i", "--index-url",
                  "--extra-index-url", "-f", "--find-links", "--target", "-t", "--prefix"}


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


def _commands(text: str) -> list[str]:
    """Each shell command of a page: the lines of its code blocks and its inline code."""
    commands = []
    for match in FENCE.finditer(text):
        if match.group(1) != "python":
            commands += match.group(2).replace("\\\n", " ").splitlines()
    prose = FENCE.sub("", text)
    commands += [code.replace("\n", " ") for code in INLINE_CODE.findall(prose)]
    return commands


def install_lines(text: str) -> list[list[str]]:
    """The packages named by each ``pip install`` of a page (its options left out)."""
    found = []
    for command in _commands(text):
        for part in re.split(r"&&|\|\||;|\|", command):
            if not re.search(r"\bpip3? install\b", part):
                continue
            words = shlex.split(part, comments=True)
            for at, word in enumerate(words[1:], 1):
                if word == "install" and Path(words[at - 1]).name in {"pip", "pip3"}:
                    found.append(_packages(words[at + 1:]))
    return found


def _packages(arguments: list[str]) -> list[str]:
    packages, skip = [], False
    for argument in arguments:
        if skip:
            skip = False
        elif argument in VALUED_OPTIONS:
            skip = True
        elif not argument.startswith("-"):
            packages.append(argument)
    return packages


def named_extras(package: str) -> set[str] | None:
    """The project's extras a ``pip install`` argument names; None when it is not the project."""
    local = re.fullmatch(r"\.(?:\[([^\]]*)\])?", package)
    if local:
        return {extra.strip() for extra in (local.group(1) or "").split(",") if extra.strip()}
    try:
        requirement = Requirement(package)
    except InvalidRequirement:
        return None
    if canonicalize_name(requirement.name) != canonicalize_name(distribution()):
        return None
    return set(requirement.extras)


def page_extras(page: Path) -> tuple[str, ...]:
    """The extras a page's install lines name (none: the page needs the core alone)."""
    found: set[str] = set()
    for packages in install_lines(page.read_text()):
        for package in packages:
            found |= named_extras(package) or set()
    return tuple(sorted(found & project_extras()))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_install_lines_name_the_distribution_and_real_extras(page: Path) -> None:
    for packages in install_lines(page.read_text()):
        assert packages, f"{page.name}: a pip install with nothing to install"
        for package in packages:
            extras = named_extras(package)
            if extras is None:
                assert package in TOOLS, (
                    f"{page.name}: `pip install {package}` names neither the checkout (`.`) nor "
                    f"the distribution {distribution()}")
                continue
            unknown = extras - project_extras()
            assert not unknown, (
                f"{page.name}: `pip install {package}` names no such extra: {sorted(unknown)} "
                f"(pyproject.toml has {sorted(project_extras())})")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_extras_named_in_prose_exist(page: Path) -> None:
    text = page.read_text()
    named = set(re.findall(r"`(\w+)` extra", text))
    for group in re.findall(r"(?:'\.|" + re.escape(distribution()) + r")\[([\w, -]+)\]", text):
        named |= {extra.strip() for extra in group.split(",")}
    assert named <= project_extras(), f"{page.name}: no such extra: {named - project_extras()}"


def test_install_lines_are_found() -> None:
    lines = {page.name: install_lines(page.read_text()) for page in PAGES}
    assert lines["README.md"][0] == [".[http]"]
    assert [p for packages in lines["testing.md"] for p in packages] == [".", ".[http]"]
    assert page_extras(ROOT / "docs" / "testing.md") == ("http",)
    assert install_lines("`pip install 'agent-governance[http]'`") == [["agent-governance[http]"]]
    assert named_extras("agent-governance[http]") is None
    assert named_extras("agent-runs-governance[http, otel]") == {"http", "otel"}


def _install(extras: tuple[str, ...]) -> str:
    return f"pip install '.[{','.join(extras)}]'" if extras else "pip install ."


def _imported(code: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def _page_blocks() -> list[tuple[str, Path, str]]:
    return [(where, ROOT / "docs" / where.partition("#")[0], code) for where, code in _blocks()]


@pytest.mark.parametrize(("where", "page", "code"), _page_blocks(),
                         ids=[w for w, _, _ in _page_blocks()])
def test_doc_block_imports_what_its_install_line_installs(
    where: str, page: Path, code: str
) -> None:
    extras = page_extras(page)
    installed = installed_by(*extras)
    for module in sorted(_imported(code)):
        top = module.partition(".")[0]
        if top in sys.stdlib_module_names or top in {"governance_core", "governance_http"}:
            continue
        assert providers(module) & installed, (
            f"{where} imports {module}, which `{_install(extras)}` does not install: name "
            "the extra that does on the page's install line")


@pytest.mark.parametrize(("where", "page", "code"), _page_blocks(),
                         ids=[w for w, _, _ in _page_blocks()])
def test_doc_block_runs(where: str, page: Path, code: str, tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True,
        timeout=120, env=limited_to(tmp_path, *page_extras(page)),
    )
    assert result.returncode == 0, (
        f"{where} failed where only `{_install(page_extras(page))}` is installed:\n"
        f"{result.stderr}")


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


def test_the_span_create_path_is_traced(tmp_path: Path) -> None:
    result = _run([str(ROOT / "scripts" / "span_create_path.py"), "--trace"], tmp_path)
    assert result.returncode == 0, result.stderr
    first, *modules = result.stdout.splitlines()
    counted = re.match(r"one POST /api/v1/agent_spans on SQLite: (\d+) project modules", first)
    assert counted is not None, first
    assert int(counted.group(1)) == len(modules)
    assert "  governance_core.domain.spans" in modules


def test_every_benchmark_imports() -> None:
    # A benchmark runs only in the nox bench session: at least the names it takes from the
    # packages must still be there.
    names = sorted(path.stem for path in (ROOT / "benchmarks").glob("*.py"))
    code = (f"import importlib, sys; sys.path.insert(0, {str(ROOT / 'benchmarks')!r})\n"
            f"for name in {names!r}: importlib.import_module(name)")
    result = _run(["-c", code], ROOT)
    assert result.returncode == 0, result.stderr
