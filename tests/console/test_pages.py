"""Every console page through falcon's test client: status, content, security, isolation."""

from __future__ import annotations

import re
from datetime import timedelta

import falcon
import falcon.testing
import pytest

from governance_core.console_sessions import SESSION_LIFETIME
from governance_core.service import Governance
from governance_http import create_app
from governance_http.console import pages as console_pages
from governance_http.console.web import SESSION_COOKIE, SIGN_IN_COOKIE
from tests.console.support import CSRF, Visitor
from tests.console.world import ATTRIBUTE_BREAK, XSS, Account

ESCAPED_XSS = "&lt;script&gt;alert(1)&lt;/script&gt;"


def pages(account: Account) -> list[str]:
    """Every GET page and fragment of the console, with the account's ids."""
    run, span = account.playground_run_id, account.markup_span_id
    return [
        "/", "/agents", f"/agents/{account.agent_id}", "/runs", f"/runs/{run}",
        f"/runs/{run}/live", f"/runs/{run}/spans?fragment=1",
        f"/runs/{account.running_run_id}/spans?parent={account.running_root_span_id}&fragment=1",
        f"/runs/{account.running_run_id}/spans?parent={account.running_root_span_id}",
        f"/runs/{account.markup_run_id}/spans/{span}",
        f"/runs/{account.markup_run_id}/spans/{span}?fragment=1",
        "/alerts", "/alerts?status=all", "/settings",
    ]


# -- signing in and out ------------------------------------------------------------------
def test_pages_redirect_to_sign_in_without_a_session(visitor: Visitor, alice: Account) -> None:
    for path in pages(alice):
        result = visitor.get(path)
        if "fragment" in path or path.endswith("/live"):
            assert result.status_code == 401, path
        else:
            assert result.status_code == 303, path
            assert result.headers["location"].startswith("/sign-in?next=")


def test_sign_in_sets_a_strict_http_only_session_cookie(visitor: Visitor, alice: Account) -> None:
    result = visitor.sign_in(alice.token)
    assert result.status_code == 303
    assert result.headers["location"] == "/"
    cookie = result.cookies[SESSION_COOKIE]
    assert cookie.http_only and cookie.same_site == "Strict"
    assert cookie.max_age == int(SESSION_LIFETIME.total_seconds())
    assert alice.token not in cookie.value
    assert alice.token not in result.headers.get("location", "")
    for path in pages(alice):
        page = visitor.get(path)
        assert page.status_code == 200, path
        assert alice.token not in page.text


def test_the_sign_in_page_sends_a_signed_in_visitor_on(signed_in: Visitor) -> None:
    result = signed_in.get("/sign-in", next="/runs")
    assert result.status_code == 303 and result.headers["location"] == "/runs"


def test_sign_in_refuses_bad_ingestion_and_unchecked_requests(
    visitor: Visitor, alice: Account
) -> None:
    assert visitor.sign_in("pf_not-a-token").status_code == 401
    ingestion = alice.session.call("api_tokens/create", {
        "token_scope": "agent_deployment", "agent_id": alice.agent_id,
        "environment_id": alice.session.call("environments/list")["summaries"][0]["id"],
    })["token"]
    refused = visitor.sign_in(ingestion)
    assert refused.status_code == 403
    assert "ingestion token cannot sign in" in refused.text
    assert ingestion not in refused.text
    assert SESSION_COOKIE not in visitor.cookies
    # Without the sign-in form's double-submit token the post is refused.
    visitor.cookies.pop(SIGN_IN_COOKIE, None)
    assert visitor.post("/sign-in", {"token": alice.token}).status_code == 403
    assert SESSION_COOKIE not in visitor.cookies


def test_sign_in_goes_back_to_a_local_page_only(visitor: Visitor, alice: Account) -> None:
    csrf = CSRF.search(visitor.get("/sign-in", next="//evil.example/x").text)
    assert csrf is not None
    result = visitor.post("/sign-in", {"token": alice.token, "csrf_token": csrf.group(1),
                                       "next": "https://evil.example/"})
    assert result.headers["location"] == "/"


def test_an_admin_invite_signs_in_a_new_admin(
    visitor: Visitor, alice: Account, gov: Governance
) -> None:
    invite = alice.session.call("admin_user_invites/create", {"email": "new@alice.example"})
    token = invite["details"]["token"]
    csrf = CSRF.search(visitor.get("/sign-in").text)
    assert csrf is not None
    result = visitor.post("/sign-in", {"invite_token": token, "name": "Nia",
                                       "csrf_token": csrf.group(1)})
    assert result.status_code == 303
    assert "Loan application review agent" in visitor.get("/agents").text


def test_sign_out_ends_the_session(signed_in: Visitor, gov: Governance) -> None:
    cookie = signed_in.cookies[SESSION_COOKIE]
    result = signed_in.act("/sign-out", {})
    assert result.status_code == 303
    assert SESSION_COOKIE not in signed_in.cookies
    assert gov.store.count("console_sessions") == 0
    signed_in.cookies[SESSION_COOKIE] = cookie
    assert signed_in.get("/").status_code == 303


@pytest.mark.parametrize("action", ["suspend", "revoke"])
def test_a_suspended_or_revoked_token_ends_its_sessions_at_once(
    visitor: Visitor, alice: Account, gov: Governance, action: str
) -> None:
    second = alice.session.call("api_tokens/create", {"description": "laptop"})
    assert visitor.sign_in(second["token"]).status_code == 303
    assert visitor.get("/").status_code == 200
    alice.session.call(f"api_tokens/{action}", {"api_token_id": second["details"]["id"]})
    assert visitor.get("/").status_code == 303
    assert gov.store.count("console_sessions") == 0


def test_a_forged_or_tampered_cookie_is_no_session(signed_in: Visitor) -> None:
    session_id, nonce, signature = signed_in.cookies[SESSION_COOKIE].split(".")
    for forged in (f"{session_id}.{nonce}.{'0' * 64}", f"{session_id}.x{nonce}.{signature}",
                   "garbage", ""):
        signed_in.cookies[SESSION_COOKIE] = forged
        assert signed_in.get("/").status_code == 303


def test_sessions_live_in_the_store_so_any_server_accepts_them(
    signed_in: Visitor, gov: Governance
) -> None:
    other_server = Visitor(falcon.testing.TestClient(create_app(gov)))
    other_server.cookies = dict(signed_in.cookies)
    assert other_server.get("/agents").status_code == 200


def test_an_expired_session_is_no_session(
    visitor: Visitor, alice: Account, gov: Governance
) -> None:
    visitor.sign_in(alice.token)
    record = gov.store.query("console_sessions")[0]
    gov.store.put("console_sessions", {**record, "expires_at": "2000-01-01T00:00:00.000000Z"})
    assert visitor.get("/").status_code == 303


# -- security headers, CSRF, escaping ----------------------------------------------------
def test_every_page_sends_the_security_headers(signed_in: Visitor, alice: Account) -> None:
    for path in [*pages(alice), "/sign-in"]:
        headers = signed_in.get(path).headers
        policy = headers["content-security-policy"]
        assert "script-src 'self'" in policy and "unsafe-inline" not in policy
        assert "frame-ancestors 'none'" in policy
        assert headers["x-frame-options"] == "DENY"
        assert headers["cache-control"] == "no-store"


def test_pages_hold_no_inline_script(signed_in: Visitor, alice: Account) -> None:
    for path in pages(alice):
        text = signed_in.get(path).text
        assert not re.search(r"<script(?![^>]*\bsrc=)", text), path
        assert not re.search(r"<[^>]*\son[a-z]+=", text), path


def actions(account: Account) -> list[tuple[str, dict[str, str]]]:
    """Every form action of the console with a valid form (but no CSRF token)."""
    return [
        (f"/runs/{account.running_run_id}/terminate", {"reason": "stop"}),
        ("/alerts/clear", {"agent_instance_id": account.running_run_id,
                           "name": "affordability_concern"}),
        (f"/runs/{account.markup_run_id}/spans/{account.markup_span_id}/reveal",
         {"pointer": "/payload/secret"}),
        ("/settings/tokens", {"description": "made by a forged form"}),
        (f"/settings/tokens/{account.token_id}/revoke", {}),
        ("/sign-out", {}),
    ]


def test_every_form_needs_the_session_csrf_token(
    signed_in: Visitor, alice: Account, gov: Governance
) -> None:
    tokens_before = gov.store.count("api_tokens")
    for path, form in actions(alice):
        for csrf in (None, "forged"):
            sent = form if csrf is None else {**form, "csrf_token": csrf}
            assert signed_in.post(path, sent).status_code == 403, path
        cross_site = signed_in.post(path, {**form, "csrf_token": signed_in.csrf()},
                                    headers={"Origin": "https://evil.example"})
        assert cross_site.status_code == 403, path
    run = alice.session.details("agent_instances/show", agent_instance_id=alice.running_run_id)
    assert run["status"] == "active" and run["raised_alert_count"] == 1
    assert gov.store.count("api_tokens") == tokens_before
    assert gov.store.count("sensitive_reveals") == 0
    assert signed_in.get("/").status_code == 200


def test_markup_written_by_agents_stays_text(signed_in: Visitor, alice: Account) -> None:
    span = f"/runs/{alice.markup_run_id}/spans/{alice.markup_span_id}"
    for path in ["/", "/agents", "/runs", f"/runs/{alice.markup_run_id}",
                 f"/runs/{alice.markup_run_id}/spans?fragment=1", span, "/alerts"]:
        text = signed_in.get(path).text
        assert XSS not in text and "<img" not in text, path
    assert ESCAPED_XSS in signed_in.get(span).text
    assert "&#34;&#39;&gt;&lt;img src=x onerror=alert(2)&gt;" in signed_in.get(span).text
    assert ESCAPED_XSS in signed_in.get(f"/runs/{alice.markup_run_id}").text
    assert ESCAPED_XSS in signed_in.get("/agents").text
    assert ESCAPED_XSS in signed_in.get("/alerts").text
    assert ATTRIBUTE_BREAK not in signed_in.get(f"/agents/{alice.agent_id}").text


# -- isolation -----------------------------------------------------------------------------
def test_one_account_never_sees_another(signed_in: Visitor, alice: Account, bob: Account) -> None:
    for path in pages(bob):
        result = signed_in.get(path)
        assert bob.playground_run_id not in result.text, path
        assert "bob" not in result.text, path
        if any(part in path for part in (bob.agent_id, bob.playground_run_id,
                                         bob.running_run_id, bob.markup_run_id)):
            assert result.status_code == 404, path


def test_one_account_cannot_act_on_another(
    signed_in: Visitor, alice: Account, bob: Account, gov: Governance
) -> None:
    for path, form in actions(bob)[:3]:
        # A run named in a form's body is refused as the API refuses it (422 on the member).
        assert signed_in.act(path, form).status_code in (404, 422), path
    assert signed_in.act(f"/settings/tokens/{bob.token_id}/suspend", {}).status_code == 404
    run = bob.session.details("agent_instances/show", agent_instance_id=bob.running_run_id)
    assert run["status"] == "active" and run["raised_alert_count"] == 1
    assert gov.store.get("api_tokens", bob.token_id)["status"] == "active"  # type: ignore[index]


# -- pages ---------------------------------------------------------------------------------
def test_overview_shows_runs_by_status_plots_and_raised_alerts(
    signed_in: Visitor, alice: Account
) -> None:
    text = signed_in.get("/").text
    assert "Runs started · Last 24 hours" in text and "Runs started · Last 7 days" in text
    assert "runs have not started yet" in text or "run has not started yet" in text
    assert text.count("<svg class=\"chart\"") == 2
    assert 'class="risk-high"' in text or 'class="risk-medium"' in text
    assert "affordability_concern" not in text or "Affordability" in text
    assert f"/runs/{alice.running_run_id}" in text


def test_agents_and_agent_page(signed_in: Visitor, alice: Account) -> None:
    listing = signed_in.get("/agents").text
    assert "Loan application review agent" in listing
    assert f"/agents/{alice.agent_id}" in listing
    page = signed_in.get(f"/agents/{alice.agent_id}").text
    assert "loan-review-1.0.0" in page
    assert "Deployments" in page and "Default" in page
    assert f"/runs/{alice.playground_run_id}" in page and f"/runs/{alice.running_run_id}" in page


def test_runs_list_filters_sorts_and_pages(signed_in: Visitor, alice: Account) -> None:
    listing = signed_in.get("/runs").text
    for run_id in (alice.playground_run_id, alice.running_run_id, alice.markup_run_id):
        assert f"/runs/{run_id}" in listing
    active = signed_in.get("/runs", status="active").text
    assert f"/runs/{alice.running_run_id}" in active
    assert f"/runs/{alice.playground_run_id}" not in active
    by_agent = signed_in.get("/runs", agent_id=alice.agent_id).text
    assert f"/runs/{alice.markup_run_id}" not in by_agent
    high = signed_in.get("/runs", risk_level="high").text
    assert f"/runs/{alice.playground_run_id}" in high
    assert f"/runs/{alice.markup_run_id}" not in high
    assert signed_in.get("/runs", purpose="eval").text.count("/runs/0") == 0
    assert "of 4 runs" in signed_in.get("/runs", since="24h").text
    for _ in range(26):
        alice.session.call("playground/register_loan_application_review_agent_instance",
                           {"agent_id": alice.agent_id})
    first = signed_in.get("/runs", sort="started_at").text
    assert "1\u201325 of 30 runs" in first and "offset=25" in first
    assert "26\u201330 of 30 runs" in signed_in.get("/runs", sort="started_at", offset=25).text


def test_run_page_shows_tree_timeline_cost_risk_quality_and_alerts(
    signed_in: Visitor, alice: Account
) -> None:
    text = signed_in.get(f"/runs/{alice.playground_run_id}").text
    assert "Spans and timeline" in text
    assert text.count('<svg class="bar"') >= 1 and 'class="fill-complete"' in text
    assert "Cost by model" in text and "claude" in text.lower()
    assert "Risk score" in text and "against thresholds medium" in text
    assert "decision_quality" in text
    assert "Affordability" in text
    children = signed_in.get(
        f"/runs/{alice.running_run_id}/spans",
        parent=alice.running_root_span_id, fragment=1,
    ).text
    # The root's one child has no children: a leaf row, without an expander.
    assert children.count('<div class="span leaf"') == 1 and 'class="fill-complete"' in children
    assert '<details class="span"' not in children


def test_span_detail_redacts_and_a_reveal_is_recorded(
    signed_in: Visitor, alice: Account, gov: Governance
) -> None:
    path = f"/runs/{alice.markup_run_id}/spans/{alice.markup_span_id}"
    text = signed_in.get(path, fragment=1).text
    assert "[redacted string: pii]" in text and "AB123456C" not in text
    assert "payload: valid" in text and "personal_identifiers" in text
    revealed = signed_in.act(f"{path}/reveal", {"pointer": "/payload/secret"})
    reveals = gov.store.query("sensitive_reveals")
    assert [(r["owner_id"], r["pointer"], r["token_id"]) for r in reveals] == [
        (alice.markup_span_id, "/payload/secret", alice.token_id)
    ]
    # POST-redirect-GET: the answer sends the browser to a page naming the reveal, not the value.
    assert revealed.status_code == 303
    location = revealed.headers["Location"]
    assert location == f"{path}?reveal={reveals[0]['id']}"
    assert "AB123456C" not in location
    # Reloading that page shows the value again and records nothing more.
    for _ in range(2):
        shown = signed_in.get(location.split("?")[0], reveal=reveals[0]["id"])
        assert shown.status_code == 200 and "AB123456C" in shown.text
    assert gov.store.count("sensitive_reveals") == 1
    assert "AB123456C" not in signed_in.get(path).text
    assert signed_in.act(f"{path}/reveal", {"pointer": "/payload/note"}).status_code == 422


def test_a_recorded_reveal_is_shown_only_to_its_caller_and_only_for_a_while(
    signed_in: Visitor, alice: Account, gov: Governance, client: falcon.testing.TestClient,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = f"/runs/{alice.markup_run_id}/spans/{alice.markup_span_id}"
    signed_in.act(f"{path}/reveal", {"pointer": "/payload/secret"})
    reveal_id = gov.store.query("sensitive_reveals")[0]["id"]
    # Another token of the same account, in another browser, gets the page redacted.
    other = alice.session.call("api_tokens/create", {"token_scope": "account"})["token"]
    colleague = Visitor(client)
    assert colleague.sign_in(other).status_code == 303
    page = colleague.get(path, reveal=reveal_id)
    assert page.status_code == 200 and "AB123456C" not in page.text
    # Once the reveal is older than the console shows it for, the value is redacted again.
    monkeypatch.setattr(console_pages, "REVEAL_SHOWN_FOR", timedelta(0))
    assert "AB123456C" not in signed_in.get(path, reveal=reveal_id).text
    assert "AB123456C" not in signed_in.get(path, reveal="nonsense").text
    assert gov.store.count("sensitive_reveals") == 1


def test_a_span_of_another_run_is_not_found_under_this_run(
    signed_in: Visitor, alice: Account
) -> None:
    path = f"/runs/{alice.playground_run_id}/spans/{alice.markup_span_id}"
    assert signed_in.get(path).status_code == 404


def test_live_fragment_follows_arriving_spans(signed_in: Visitor, alice: Account) -> None:
    live = f"/runs/{alice.running_run_id}/live"
    before = signed_in.get(live).text
    assert 'data-live-url' in before and 'data-total="2"' in before
    alice.session.call("agent_spans/create", {
        "agent_instance_id": alice.running_run_id, "schema_name": "tool", "status": "complete",
        "payload": {},
    })
    assert 'data-total="3"' in signed_in.get(live).text
    assert "data-live-url" not in signed_in.get(f"/runs/{alice.playground_run_id}/live").text


def test_terminate_a_running_run_with_a_reason(signed_in: Visitor, alice: Account) -> None:
    result = signed_in.act(f"/runs/{alice.running_run_id}/terminate", {"reason": "Looping <b>"})
    assert result.status_code == 303
    page = signed_in.get(f"/runs/{alice.running_run_id}").text
    assert "terminated" in page and "Looping &lt;b&gt;" in page
    run = alice.session.details("agent_instances/show", agent_instance_id=alice.running_run_id)
    assert run["status"] == "terminated" and run["span_counts"]["active"] == 0
    missing = signed_in.act(f"/runs/{alice.playground_run_id}/terminate", {"reason": ""})
    assert missing.status_code == 422


def test_alerts_filter_and_clear(signed_in: Visitor, alice: Account) -> None:
    raised = signed_in.get("/alerts").text
    assert "Affordability" in raised and "slow_run" in raised
    assert "slow_run" not in signed_in.get("/alerts", severity="warning").text
    result = signed_in.act("/alerts/clear", {"agent_instance_id": alice.running_run_id,
                                             "name": "affordability_concern",
                                             "next": "/alerts?status=cleared"})
    assert result.status_code == 303 and result.headers["location"] == "/alerts?status=cleared"
    assert f"/runs/{alice.running_run_id}" in signed_in.get("/alerts", status="cleared").text
    assert f"/runs/{alice.running_run_id}\"" not in signed_in.get("/alerts").text
    again = signed_in.act("/alerts/clear", {"agent_instance_id": alice.running_run_id,
                                            "name": "affordability_concern"})
    assert again.status_code == 409


def test_settings_tokens_are_shown_once_and_can_be_suspended_and_revoked(
    signed_in: Visitor, alice: Account, gov: Governance
) -> None:
    page = signed_in.get("/settings").text
    assert "Default" in page and "category_weights" not in page
    assert "personal_identifiers" in page and "thresholds medium" in page
    created = signed_in.act("/settings/tokens", {"description": "ci", "token_scope": "account"})
    assert created.status_code == 200
    secret = re.search(r'value="(pf_[^"]+)"', created.text)
    assert secret is not None
    assert gov.authenticate(secret.group(1)).account_id == alice.session.account_id
    assert secret.group(1) not in signed_in.get("/settings").text
    token_id = gov.store.query("api_tokens")[-1]["id"]
    assert signed_in.act(f"/settings/tokens/{token_id}/suspend", {}).status_code == 303
    assert gov.store.get("api_tokens", token_id)["status"] == "suspended"  # type: ignore[index]
    assert signed_in.act(f"/settings/tokens/{token_id}/revoke", {}).status_code == 303
    assert gov.store.get("api_tokens", token_id)["status"] == "revoked"  # type: ignore[index]
    assert signed_in.act(f"/settings/tokens/{token_id}/explode", {}).status_code == 404


def test_the_api_is_unchanged_beside_the_console(
    client: falcon.testing.TestClient, alice: Account
) -> None:
    result = client.simulate_get("/api/v1/ping",
                                 headers={"Authorization": f"Bearer {alice.token}"})
    assert result.status_code == 200 and result.json["status"] == "success"
    assert client.simulate_get("/api/v1/nothing").json["code"] == "not_found"
    assert client.simulate_get("/static/console/console.js").status_code == 200


def test_the_span_tree_loads_a_level_a_page_at_a_time(signed_in: Visitor, alice: Account) -> None:
    run = alice.session.call("playground/register_loan_application_review_agent_instance",
                             {"agent_id": alice.agent_id})["details"]["id"]
    for index in range(105):
        alice.session.call("agent_spans/create", {
            "agent_instance_id": run, "schema_name": "tool", "status": "complete",
            "payload": {"index": index},
        })
    page = signed_in.get(f"/runs/{run}").text
    assert page.count('<div class="span leaf"') == 100
    # 105 spans and the risk_critical alert's span they raise.
    more = re.search(r'<a class="more d0" href="([^"]+)" data-more>More spans \(6 left\)', page)
    assert more is not None
    rest = signed_in.get(more.group(1).replace("&amp;", "&")).text
    assert rest.count('<div class="span leaf"') == 6 and "More spans" not in rest


def test_a_form_over_the_limit_is_refused_unread(signed_in: Visitor, alice: Account) -> None:
    result = signed_in.post(f"/runs/{alice.running_run_id}/terminate",
                            {"reason": "x" * 70_000, "csrf_token": signed_in.csrf()})
    assert result.status_code == 413
    run = alice.session.details("agent_instances/show", agent_instance_id=alice.running_run_id)
    assert run["status"] == "active"


def test_sensitive_quality_values_show_redacted(signed_in: Visitor, alice: Account) -> None:
    alice.session.call("agent_instances/record_quality", {
        "agent_instance_id": alice.running_run_id, "name": "decision_quality",
        "sensitive_encoding": True,
        "payload": {"score": 4, "note": {"$sensitive": "string", "value": "QV-SECRET-1"}},
    })
    page = signed_in.get(f"/runs/{alice.running_run_id}").text
    assert "decision_quality" in page and "[redacted string]" in page
    assert "QV-SECRET-1" not in page
