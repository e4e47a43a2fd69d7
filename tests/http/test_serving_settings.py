import json
from pathlib import Path

import pytest

from governance_core.encryption import FernetCipher, generate_key
from governance_http.serving import (
    BASE_URL_VARIABLE,
    ENCRYPTION_KEY_VARIABLE,
    PRICE_OVERRIDES_VARIABLE,
    open_governance,
)


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
