"""The console's notifications page: destinations, monitors and deliveries, as forms."""

from __future__ import annotations

import re
from collections.abc import Iterator

import falcon.testing
import pytest

from governance_core.context import Config
from governance_core.service import Bootstrap, Governance
from governance_core.storage import MemoryStore
from governance_http import create_app
from tests.console.support import Visitor
from tests.notifications.conftest import LOOPBACK_ONLY

SECRET = re.compile(r'value="(whsec_[^"]+)"')


@pytest.fixture
def cgov() -> Iterator[Governance]:
    governance = Governance(MemoryStore(), config=Config(webhook_allowed_networks=LOOPBACK_ONLY))
    yield governance
    governance.close()


@pytest.fixture
def cboot(cgov: Governance) -> Bootstrap:
    return cgov.bootstrap()


@pytest.fixture
def browser(cgov: Governance, cboot: Bootstrap) -> Visitor:
    visitor = Visitor(falcon.testing.TestClient(create_app(cgov)))
    assert visitor.sign_in(cboot.token).status_code == 303
    return visitor


def act(browser: Visitor, path: str, form: dict[str, str]) -> falcon.testing.Result:
    return browser.post(path, {**form, "csrf_token": browser.csrf("/notifications")})


def test_a_destination_is_added_its_secret_shown_once_and_managed(
    browser: Visitor, cgov: Governance, cboot: Bootstrap
) -> None:
    page = browser.get("/notifications")
    assert page.status_code == 200 and "No destination yet." in page.text
    made = act(browser, "/notifications/destinations",
               {"name": "ops", "url": "https://hooks.example.com/ops", "body_format": "slack"})
    assert made.status_code == 200
    secret = SECRET.search(made.text)
    assert secret is not None
    again = browser.get("/notifications")
    assert "https://hooks.example.com/ops" in again.text and secret.group(1) not in again.text
    session = cgov.session(cboot.token)
    [row] = session.call("destinations/list")["summaries"]
    rotated = act(browser, f"/notifications/destinations/{row['id']}/rotate_secret", {})
    new_secret = SECRET.search(rotated.text)
    assert new_secret is not None and new_secret.group(1) != secret.group(1)
    assert act(browser, f"/notifications/destinations/{row['id']}/test", {}).status_code == 303
    assert "destination.test" in browser.get("/notifications").text
    act(browser, f"/notifications/destinations/{row['id']}/disable", {})
    assert session.details("destinations/show", destination_id=row["id"])["status"] == "disabled"
    assert act(browser, f"/notifications/destinations/{row['id']}/nope", {}).status_code == 404


def test_an_internal_url_is_refused_on_the_page(browser: Visitor) -> None:
    refused = act(browser, "/notifications/destinations",
                  {"name": "meta", "url": "http://169.254.169.254/"})
    assert refused.status_code == 422 and "not public" in refused.text


def test_a_monitor_is_added_evaluated_paused_and_deleted(
    browser: Visitor, cgov: Governance, cboot: Bootstrap
) -> None:
    made = act(browser, "/notifications/monitors", {
        "name": "quiet", "metric": "run_count", "comparison": "lt", "warning": "1",
        "critical": "", "hysteresis": "0", "window_seconds": "3600", "agent_id": "",
    })
    assert made.status_code == 303
    session = cgov.session(cboot.token)
    session.call("destinations/create", name="ops", url="https://hooks.example.com/")
    [monitor] = session.call("monitors/list")["summaries"]
    act(browser, f"/notifications/monitors/{monitor['id']}/evaluate", {})
    page = browser.get("/notifications").text
    assert "status-warning" in page and "monitor.state_changed" in page
    act(browser, f"/notifications/monitors/{monitor['id']}/pause", {})
    assert session.details("monitors/show", monitor_id=monitor["id"])["status"] == "paused"
    bad = act(browser, "/notifications/monitors", {
        "name": "x", "metric": "run_count", "warning": "lots", "window_seconds": "3600"})
    assert bad.status_code == 422 and "warning must be a finite number" in bad.text
    act(browser, f"/notifications/monitors/{monitor['id']}/delete", {})
    assert session.call("monitors/list")["summaries"] == []


def test_a_dead_delivery_is_resent_from_the_page(
    browser: Visitor, cgov: Governance, cboot: Bootstrap
) -> None:
    session = cgov.session(cboot.token)
    session.call("destinations/create", name="ops", url="https://hooks.example.com/")
    session.call("monitors/create", name="quiet", metric="run_count", comparison="lt",
                 window_seconds=3600, warning=1)
    session.call("monitors/evaluate")
    [delivery] = session.call("deliveries/list")["summaries"]
    stored = cgov.store.get("deliveries", delivery["id"])
    assert stored is not None
    cgov.store.put("deliveries", {**stored, "status": "dead"})
    page = browser.get("/notifications", status="dead").text
    assert f"/notifications/deliveries/{delivery['id']}/resend" in page
    assert act(browser, f"/notifications/deliveries/{delivery['id']}/resend", {}).status_code == 303
    assert session.details("deliveries/show", delivery_id=delivery["id"])["status"] == "pending"
