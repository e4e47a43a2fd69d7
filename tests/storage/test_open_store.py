"""``open_store``: a location names its store."""

from __future__ import annotations

from pathlib import Path

import pytest

from governance_core.service import Governance
from governance_core.storage import SQLiteStore, open_store


@pytest.mark.parametrize(
    ("location", "path"),
    [
        (":memory:", ":memory:"),
        ("sqlite:///:memory:", ":memory:"),
        ("governance.db", "governance.db"),
        ("sqlite:///governance.db", "governance.db"),
        ("sqlite:///nested/../governance.db", "nested/../governance.db"),
    ],
)
def test_sqlite_locations(location: str, path: str, tmp_path: Path,
                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "nested").mkdir()
    store = open_store(location)
    try:
        assert isinstance(store, SQLiteStore)
        assert store.path == path
    finally:
        store.close()


def test_an_absolute_sqlite_url_and_a_path_object(tmp_path: Path) -> None:
    for location in (f"sqlite:///{tmp_path}/a.db", tmp_path / "b.db"):
        store = open_store(location)
        store.put("teams", {"id": "t1"})
        store.close()
    assert (tmp_path / "a.db").is_file() and (tmp_path / "b.db").is_file()


@pytest.mark.parametrize("location", ["mysql://db/governance", "https://example.com/x.db"])
def test_other_schemes_are_refused_without_making_a_file(
    location: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match="no store adapter"):
        open_store(location)
    assert list(tmp_path.iterdir()) == []


def test_governance_open_takes_a_url(tmp_path: Path) -> None:
    with Governance.open(f"sqlite:///{tmp_path}/gov.db") as gov:
        assert gov.bootstrap().account_id
    assert (tmp_path / "gov.db").is_file()
