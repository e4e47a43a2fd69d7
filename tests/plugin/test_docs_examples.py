"""The test files in docs/testing.md pass when run by pytest with the plugin.

The page's policy files (a ```cedar block opening with ``// <path>``) and its ini file (an
```ini block opening with ``# pytest.ini``) are written beside them.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests.plugin.conftest import BOTH

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
TEST_FILE = re.compile(r"^```python\n# (test_\w+)\.py\n(.*?)^```", re.S | re.M)
CEDAR_FILE = re.compile(r"^```cedar\n// ([\w/.-]+\.cedar)\n(.*?)^```", re.S | re.M)
INI_FILE = re.compile(r"^```ini\n# pytest\.ini\n(.*?)^```", re.S | re.M)


def test_the_documented_test_files_pass(user_pytest: pytest.Pytester) -> None:
    text = DOC.read_text()
    files = dict(TEST_FILE.findall(text))
    assert set(files) == {"test_agent", "test_agent_over_http", "test_policies"}
    policies = dict(CEDAR_FILE.findall(text))
    assert set(policies) == {"policies/refunds.cedar"}
    for path, source in policies.items():
        user_pytest.path.joinpath(path).parent.mkdir(parents=True, exist_ok=True)
        user_pytest.path.joinpath(path).write_text(source)
    (ini,) = INI_FILE.findall(text)
    user_pytest.makeini(ini)
    user_pytest.makepyfile(**files)
    result = user_pytest.runpytest(*BOTH)
    if importlib.util.find_spec("falcon") is None:  # the core alone: the server test skips
        result.assert_outcomes(passed=3, skipped=1)
    else:
        result.assert_outcomes(passed=4)
