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


_TABLE_CALLS = frozenset({
    "get", "put", "delete", "query", "count", "iterate", "aggregate", "read_ahead", "prepare",
    "write_prepared", "change_mark",
})


def _is_store(node: ast.expr) -> bool:
    """Whether ``node`` names a store: ``store``, ``_store``, or an attribute of that name."""
    name = node.id if isinstance(node, ast.Name) else (
        node.attr if isinstance(node, ast.Attribute) else None
    )
    return name in ("store", "_store")


def _package_sources() -> list[Path]:
    """Every module of both packages but the storage adapters and the repository."""
    allowed = (ROOT / "governance_core" / "storage", ROOT / "governance_core" / "repository.py")
    return [
        path for package in ("governance_core", "governance_http")
        for path in sorted((ROOT / package).rglob("*.py"))
        if not any(path == place or place in path.parents for place in allowed)
    ]


def test_only_storage_and_the_repository_name_tables_to_the_store() -> None:
    offences = []
    for path in _package_sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in _TABLE_CALLS and _is_store(node.func.value)):
                offences.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offences, f"a table named to a store outside storage and the repository: {offences}"


def test_the_repository_has_every_table_of_the_schema() -> None:
    from governance_core.repository import RecordTable, Tables
    from governance_core.storage.memory import MemoryStore
    from governance_core.storage.schema import TABLES

    tables = Tables(MemoryStore())
    declared = {name for name in vars(Tables) if isinstance(getattr(tables, name), RecordTable)}
    assert declared == set(TABLES)
    assert all(getattr(tables, name).name == name for name in TABLES)


def test_rules_depend_on_nothing_but_rules_models_and_errors() -> None:
    leaves = ("governance_core.rules", "governance_core.models", "governance_core.errors")
    for module in _modules("governance_core.rules"):
        outside = {name for name in imports_of(module) if not name.startswith(leaves)}
        assert not outside, f"{module} imports {outside}"
