"""A serialization conflict on PostgreSQL is expected: logged once, at debug, without secrets.

Needs $GOVERNANCE_TEST_POSTGRES_URL; each test works in an empty schema of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from governance_core.errors import WriteConflict
from tests.stores import scratch_schema, server_url


@pytest.fixture
def url() -> Iterator[str]:
    """A URL whose connections use a new, empty schema, dropped afterwards."""
    server_url()
    with scratch_schema("conflict_log") as made:
        yield made


def _conflict_in_a_pipeline(url: str) -> None:
    """Run a transaction whose batched write collides with a concurrent update."""
    import psycopg

    from governance_core.storage.postgres import PostgresStore

    store = PostgresStore(url)
    try:
        store.put("teams", {"id": "counter", "value": 0})
        with pytest.raises(WriteConflict), store.transaction():
            seen = store.get("teams", "counter")
            with psycopg.connect(url, autocommit=True) as other:
                other.execute("UPDATE teams SET data = '{\"id\": \"counter\", \"value\": 5}'")
            with store.batched():
                store.write_prepared("teams", [store.prepare("teams", {**(seen or {}), "v": 1})])
                # The server's refusal arrives while the next statement is sent: that one
                # fails in the block, and closing the pipeline fails again.
                time.sleep(0.2)
                store.write_prepared("accounts", [store.prepare("accounts", {"id": "a1"})])
    finally:
        store.close()


def _secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found = [parts.hostname or "", parts.username or "", parts.path.strip("/")]
    return [secret for secret in found if secret]


def test_a_conflict_is_one_debug_record_naming_no_connection(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.DEBUG):
        _conflict_in_a_pipeline(url)
    shown = [record for record in caplog.records if record.levelno >= logging.INFO]
    assert shown == []
    conflicts = [
        record for record in caplog.records
        if record.name == "governance_core.storage.postgres" and "conflict" in record.getMessage()
    ]
    assert len(conflicts) == 1
    assert conflicts[0].levelno == logging.DEBUG
    for record in caplog.records:
        text = record.getMessage()
        assert "<psycopg" not in text
        for secret in _secrets(url):
            assert f"={secret}" not in text, text


def test_other_psycopg_warnings_are_left_alone(caplog: pytest.LogCaptureFixture) -> None:
    from governance_core.storage import postgres  # noqa: F401  (installs the filter)

    logger: Any = logging.getLogger("psycopg")
    with caplog.at_level(logging.WARNING, logger="psycopg"):
        logger.warning("error ignored terminating %r: %s", "pipeline", ValueError("other"))
        logger.warning("something else happened")
    assert len(caplog.records) == 2
