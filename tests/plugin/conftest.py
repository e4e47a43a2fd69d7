"""The plugin is tested as a user meets it: test files run by an inner pytest (pytester)."""

from __future__ import annotations

import pytest

PLUGIN = "governance_core.pytest_plugin"
HTTP_PLUGIN = "governance_http.pytest_plugin"
BOTH = ("-p", PLUGIN, "-p", HTTP_PLUGIN)
"""The inner pytest's options loading both plugins, as the two entry points do."""


@pytest.fixture
def user_pytest(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> pytest.Pytester:
    """An inner pytest that loads only the plugin, whether or not the package is installed.

    Entry-point autoloading is off so an installed copy is not registered a second time
    beside ``-p``; the entry points themselves are checked in
    ``test_server_and_entry_point.py``.
    """
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    return pytester
