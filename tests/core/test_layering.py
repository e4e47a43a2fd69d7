"""The core stands alone: every module imports with falcon made unimportable."""

import ast
import subprocess
import sys
from pathlib import Path

CHECK = """
import importlib, pkgutil, sys
sys.modules["falcon"] = None  # any import of falcon now raises ImportError
import governance_core
for module in pkgutil.walk_packages(governance_core.__path__, "governance_core."):
    importlib.import_module(module.name)
assert not any(name == "falcon" or name.startswith("falcon.") for name in sys.modules
               if sys.modules[name] is not None)
print("ok")
"""


def test_core_imports_without_falcon() -> None:
    result = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


ROOT = Path(__file__).resolve().parents[2]


def imports_of(module: str) -> set[str]:
    """The governance modules ``module`` imports, at any level of its source."""
    path = ROOT / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = ROOT / module.replace(".", "/") / "__init__.py"
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name.startswith("governance_")}


def test_recording_and_the_service_do_not_import_each_other() -> None:
    assert not any(name.startswith("governance_core.service") for name in imports_of(
        "governance_core.recording"
    ))


def test_the_service_needs_no_storage_adapter() -> None:
    adapters = ("governance_core.storage.sqlite", "governance_core.storage.memory")
    assert not any(name.startswith(adapters) for name in imports_of("governance_core.service"))


def _modules(package: str) -> list[str]:
    folder = ROOT / package.replace(".", "/")
    return [f"{package}.{path.stem}" for path in sorted(folder.glob("*.py"))
            if path.stem != "__init__"]


def test_handlers_import_no_storage_module() -> None:
    for module in _modules("governance_core.operations"):
        storage = {name for name in imports_of(module)
                   if name.startswith("governance_core.storage")}
        assert not storage, f"{module} imports {storage}"


def test_the_domain_imports_no_operation_module() -> None:
    for module in _modules("governance_core.domain"):
        upward = {name for name in imports_of(module)
                  if name.startswith("governance_core.operations")}
        assert not upward, f"{module} imports {upward}"
