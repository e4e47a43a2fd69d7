"""The test files in docs/testing.md pass when run by pytest with the plugin."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from tests.plugin.conftest import BOTH

pytest_plugins = ["pytester"]

DOC = Path(__file__).resolve().parents[2] / "docs" / "testing.md"
TEST_FILE = re.compile(r"^```python\n# (test_\w+)\.py\n(.*?)^```", re.S | re.M)


def test_the_documented_test_files_pass(user_pytest: pytest.Pytester) -> None:
    files = dict(TEST_FILE.findall(DOC.read_text()))
    assert set(files) == {"test_agent", "test_agent_over_http"}
    user_pytest.makepyfile(**files)
    result = user_pytest.runpytest(*BOTH)
    if importlib.util.find_spec("falcon") is None:  # the core alone: the server test skips
        result.assert_outcomes(passed=1, skipped=1)
    else:
        result.assert_outcomes(passed=2)
