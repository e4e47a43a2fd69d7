"""Operation handlers, one module per resource family.

:func:`default_registry` builds the :class:`~governance_core.registry.Registry` of every
operation marked in the modules of this package; importing a module registers nothing.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
from types import ModuleType

from governance_core.registry import Registry

__all__ = ["default_registry", "operation_modules"]


def operation_modules() -> list[ModuleType]:
    """Every module of this package, imported, in name order."""
    return [
        importlib.import_module(f"{__name__}.{info.name}")
        for info in sorted(pkgutil.iter_modules(__path__), key=lambda info: info.name)
    ]


@functools.cache
def default_registry() -> Registry:
    """The registry of every operation in this package (built once; it never changes)."""
    return Registry.from_modules(operation_modules())
