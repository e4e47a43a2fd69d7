"""What an install of this project with some extras can import, and interpreters limited to it.

``pip install '.[http]'`` on a fresh machine installs the project's dependencies, the ``http``
extra's and theirs, nothing else. The test environment holds every extra at once, so a module
that imports an optional package works here and crashes there. :func:`limited_to` gives the
environment of an interpreter in which every installed distribution that such an install would
not bring cannot be imported (``ModuleNotFoundError``, as when it is absent).
"""

from __future__ import annotations

import importlib.metadata as metadata
import os
import sys
import tomllib
from functools import cache
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]


@cache
def project() -> dict[str, Any]:
    """The ``[project]`` table of ``pyproject.toml`` (the source, not the installed metadata)."""
    table: dict[str, Any] = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    return table


def distribution() -> str:
    """The project's distribution name, as pyproject spells it."""
    name: str = project()["name"]
    return name


def project_extras() -> set[str]:
    """The project's extras."""
    return set(project()["optional-dependencies"])


def _wanted(requirement: Requirement, extras: frozenset[str]) -> bool:
    if requirement.marker is None:
        return True
    return any(requirement.marker.evaluate({"extra": extra}) for extra in extras | {""})


def _requirements(name: str, extras: frozenset[str]) -> list[Requirement]:
    if name == canonicalize_name(distribution()):
        listed = list(project()["dependencies"])
        for extra in extras:
            listed += project()["optional-dependencies"][extra]
    else:
        try:
            listed = metadata.requires(name) or []
        except metadata.PackageNotFoundError:  # not installed here (another platform's)
            return []
    return [req for req in map(Requirement, listed) if _wanted(req, extras)]


@cache
def installed_by(*extras: str) -> frozenset[str]:
    """The distributions (canonical names) ``pip install '.[extras]'`` installs, this one too."""
    unknown = set(extras) - project_extras()
    assert not unknown, f"no such extra: {sorted(unknown)}"
    found: set[str] = set()
    seen: set[tuple[str, frozenset[str]]] = set()
    pending = [(canonicalize_name(distribution()), frozenset(extras))]
    while pending:
        name, wanted = pending.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        found.add(name)
        for requirement in _requirements(name, wanted):
            pending.append((canonicalize_name(requirement.name), frozenset(requirement.extras)))
    return frozenset(found)


@cache
def _module_index() -> dict[str, frozenset[str]]:
    """Each module and package installed here, with the distributions (canonical) providing it.

    Built from each distribution's file list, so a namespace package (``opentelemetry``,
    ``google``) lists every distribution that installs a module under it.
    """
    index: dict[str, set[str]] = {}
    for found in metadata.distributions():
        name = canonicalize_name(found.metadata["Name"])
        for file in found.files or []:
            parts = file.parts
            if ".." in parts or "__pycache__" in parts or parts[0].endswith((".dist-info",
                                                                              ".data")):
                continue
            if file.suffix == ".py":
                dotted = [*parts[:-1], file.stem]
            elif file.suffix in {".so", ".pyd"}:
                dotted = [*parts[:-1], file.name.partition(".")[0]]
            else:
                continue
            if dotted[-1] == "__init__":
                dotted.pop()
            if not dotted or not all(part.isidentifier() for part in dotted):
                continue
            for depth in range(1, len(dotted) + 1):
                index.setdefault(".".join(dotted[:depth]), set()).add(name)
    return {module: frozenset(names) for module, names in index.items()}


def providers(module: str) -> frozenset[str]:
    """The installed distributions (canonical names) that provide ``module``, or its package."""
    index = _module_index()
    parts = module.split(".")
    for depth in range(len(parts), 0, -1):
        if (prefix := ".".join(parts[:depth])) in index:
            return index[prefix]
    return frozenset()


@cache
def not_installed_by(*extras: str) -> frozenset[str]:
    """The outermost modules installed here that ``pip install '.[extras]'`` would not bring.

    A module is listed when no distribution of that install provides it or anything under it,
    and its package (if any) is not listed: for ``opentelemetry``, whose ``sdk`` comes with
    the ``otel`` extra, that is ``opentelemetry.exporter`` when the exporters do not.
    """
    allowed = installed_by(*extras)
    index = _module_index()
    return frozenset(
        module for module, names in index.items()
        if not names & allowed and module.partition(".")[0] not in sys.stdlib_module_names
        and ("." not in module or index[module.rpartition(".")[0]] & allowed)
    )


def limited_to(tmp_path: Path, *extras: str) -> dict[str, str]:
    """The environment of an interpreter that imports only what ``.[extras]`` installs.

    Every other installed top-level module is set to ``None`` in ``sys.modules`` by a
    ``sitecustomize``, so importing it raises ``ModuleNotFoundError`` and ``find_spec`` of it
    returns ``None``, as when it is not installed. Modules the interpreter loaded before
    (``.pth`` hooks) are left alone.
    """
    site = tmp_path / f"only-{'-'.join(extras) or 'core'}"
    site.mkdir(exist_ok=True)
    blocked = sorted(not_installed_by(*extras))
    (site / "sitecustomize.py").write_text(
        "import sys\n"
        f"for name in {blocked!r}:\n"
        "    sys.modules.setdefault(name, None)\n"
    )
    environment = {name: value for name, value in os.environ.items()
                   if not name.startswith("GOVERNANCE_")}
    return {**environment, "PYTHONPATH": f"{site}{os.pathsep}{ROOT}"}
