"""Each package's public surface: an explicit, sorted ``__all__`` that the docs import from.

Every module of both packages declares ``__all__`` of names it defines; each package's own is
sorted and documented; the packages import without optional drivers; docs and examples import
a public name from its package, never from the module that happens to define it.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

import governance_core
import governance_http

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [governance_core, governance_http]


def modules(package: ModuleType) -> list[str]:
    names = [package.__name__]
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        names.append(info.name)
    return names


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: p.__name__)
def test_the_package_surface_is_explicit_sorted_and_documented(package: ModuleType) -> None:
    assert package.__all__ == sorted(package.__all__)
    for name in package.__all__:
        value = getattr(package, name)
        if inspect.isclass(value) or inspect.isfunction(value):
            assert inspect.getdoc(value), name


def test_the_core_surface_names_what_an_embedder_needs() -> None:
    assert {
        "Governance", "Session", "Bootstrap", "GovernanceError", "NotFound", "ValidationErrors",
        "Store", "MemoryStore", "SQLiteStore", "FixedClock", "SeededIds",
    } <= set(governance_core.__all__)


# Entry points run on import; optional adapters need their extra.
CHECKED = [
    name for package in PACKAGES for name in modules(package)
    if not name.endswith("__main__") and not name.startswith("governance_core.storage.postgres")
]


@pytest.mark.parametrize("module", CHECKED)
def test_every_module_declares_an_all_of_defined_names(module: str) -> None:
    loaded = importlib.import_module(module)
    names = getattr(loaded, "__all__", None)
    assert names is not None, module
    assert all(hasattr(loaded, name) for name in names), module


def test_the_packages_import_without_optional_drivers() -> None:
    blocked = "import sys; sys.modules.update(psycopg=None, psycopg_pool=None, cryptography=None)"
    code = f"{blocked}; import governance_core, governance_http"
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


IMPORT = re.compile(r"from (governance_core|governance_http)\.[\w.]+ import \(?([\w, \n]+)\)?")


def test_docs_and_examples_import_public_names_from_the_package() -> None:
    surface = {package.__name__: package.__all__ for package in PACKAGES}
    found = []
    for path in [*ROOT.joinpath("docs").glob("*.md"), *ROOT.joinpath("examples").glob("*.py")]:
        for match in IMPORT.finditer(path.read_text()):
            names = {name.strip() for name in match.group(2).replace("\n", ",").split(",")}
            public = names & set(surface[match.group(1)])
            if public:
                found.append((path.name, match.group(0), sorted(public)))
    assert found == []
