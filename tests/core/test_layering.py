"""The core stands alone: every module imports with falcon made unimportable."""

import subprocess
import sys

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
