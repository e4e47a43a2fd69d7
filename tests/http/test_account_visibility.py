"""An account is shown only to callers holding a credential in it: an email is no proof.

The exact sequence found: account B invites the email of A's admin, accepts its own invite,
and the new token must not see A's id or name in ``GET /account``, in the new admin user's
``switchable_account_summaries``, or anywhere else it reads; nor may A see B.
"""

from __future__ import annotations

import json

import falcon.testing

from governance_core.service import Governance
from tests.http.support import Api


def test_an_invite_to_another_accounts_email_reveals_nothing(
    gov: Governance, client: falcon.testing.TestClient
) -> None:
    a = gov.bootstrap(account_name="Acme Secret Name", admin_email="admin@acme.test")
    b = gov.bootstrap(account_name="Globex", admin_email="boss@globex.test")
    api_b = Api(client, b.token)
    invite = api_b.ok("POST", "/admin_user_invite", json={"email": "admin@acme.test"})
    accepted = api_b.ok(
        "POST", "/admin_user_invite/accept", json={"token": invite["details"]["token"]},
        token=None,
    )
    planted = Api(client, accepted["token"])
    reads = [
        planted.ok("GET", "/account"),
        planted.ok("GET", f"/admin_user/{accepted['details']['id']}"),
        planted.ok("GET", f"/account/{b.account_id}"),
        accepted,
    ]
    for read in reads:
        text = json.dumps(read)
        assert a.account_id not in text and "Acme Secret Name" not in text, read
    listed = planted.ok("GET", "/account")["summaries"]
    assert [row["id"] for row in listed] == [b.account_id]
    assert planted.get(f"/account/{a.account_id}").status_code == 404
    api_a = Api(client, a.token)
    for read in (
        api_a.ok("GET", "/account"), api_a.ok("GET", f"/admin_user/{a.admin_user_id}"),
    ):
        assert b.account_id not in json.dumps(read) and "Globex" not in json.dumps(read)


def test_accounts_the_operator_made_for_one_email_still_link(
    gov: Governance, client: falcon.testing.TestClient
) -> None:
    first = gov.bootstrap(account_name="Acme", admin_email="admin@acme.test")
    second = gov.bootstrap(account_name="Acme Labs", admin_email="admin@acme.test")
    listed = Api(client, first.token).ok("GET", "/account")["summaries"]
    assert {row["id"] for row in listed} == {first.account_id, second.account_id}
