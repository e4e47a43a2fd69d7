import json
import os
from pathlib import Path

import pytest

from governance_core.encryption import FernetCipher, generate_key
from governance_http import serving
from governance_http.serving import (
    BASE_URL_VARIABLE,
    ENCRYPTION_KEY_VARIABLE,
    PRICE_OVERRIDES_VARIABLE,
    open_governance,
)
from governance_http.settings import POSTGRES_THREADS, SQLITE_THREADS, default_threads


def test_operator_settings_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prices = tmp_path / "prices.json"
    prices.write_text(json.dumps({"house-model": {"input_cost_per_token": 0.001}}))
    monkeypatch.setenv(ENCRYPTION_KEY_VARIABLE, generate_key())
    monkeypatch.setenv(PRICE_OVERRIDES_VARIABLE, str(prices))
    monkeypatch.setenv(BASE_URL_VARIABLE, "https://governance.example.test/")
    with open_governance(tmp_path / "g.db") as gov:
        assert isinstance(gov.config.cipher, FernetCipher)
        assert gov.config.pricing.lookup("house-model", None) is not None
        assert gov.config.pricing.version.endswith("+overrides")
        assert gov.config.base_url == "https://governance.example.test"


def test_without_settings_values_are_plain_and_prices_packaged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (ENCRYPTION_KEY_VARIABLE, PRICE_OVERRIDES_VARIABLE, BASE_URL_VARIABLE):
        monkeypatch.delenv(name, raising=False)
    with open_governance(tmp_path / "g.db") as gov:
        assert not isinstance(gov.config.cipher, FernetCipher)
        assert gov.config.pricing.lookup("house-model", None) is None
        assert "+overrides" not in gov.config.pricing.version


@pytest.mark.parametrize(
    ("location", "threads"),
    [("governance.db", SQLITE_THREADS), ("sqlite:///governance.db", SQLITE_THREADS),
     (":memory:", SQLITE_THREADS), ("postgresql://db.example.test/governance", POSTGRES_THREADS),
     ("postgres://db.example.test/governance", POSTGRES_THREADS)],
)
def test_a_worker_runs_one_request_thread_on_sqlite_and_more_on_postgres(
    location: str, threads: int
) -> None:
    assert default_threads(location) == threads


def test_serve_gives_the_server_the_stores_default_threads_unless_told(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    started: list[str] = []

    class Recorded:
        def __init__(self, target: str, **options: object) -> None:
            # Each worker's request pool is sized from the environment it inherits.
            started.append(os.environ[serving.THREADS_VARIABLE])

        def serve(self) -> None:
            pass

    monkeypatch.setattr(serving, "Granian", Recorded)
    monkeypatch.setenv(serving.DB_ENVIRONMENT_VARIABLE, "")
    monkeypatch.setenv(serving.THREADS_VARIABLE, "")
    serving.serve(tmp_path / "g.db", host="127.0.0.1", port=0)
    serving.serve(tmp_path / "g.db", host="127.0.0.1", port=0, threads=3)
    serving.serve("postgresql://db.example.test/g", host="127.0.0.1", port=0)
    assert started == ["1", "3", "4"]
