"""operator/list_accounts: every account in the store, for code holding the store only."""

from __future__ import annotations

from governance_core.errors import NotPermitted
from governance_core.service import Bootstrap, Governance
from tests.core.accounts_world import fails


def test_it_lists_every_account_without_a_caller(
    gov: Governance, boot: Bootstrap, other: Bootstrap
) -> None:
    page = gov.call("operator/list_accounts", {"sorting": "-name", "pagination[page_size]": 1})
    assert [a["name"] for a in page["summaries"]] == ["Globex"]
    assert page["pagination"]["item_count"] == 2
    everything = gov.call("operator/list_accounts", {"sorting": "name"})["summaries"]
    assert [(a["id"], a["type"]) for a in everything] == [
        (boot.account_id, "account"), (other.account_id, "account")]


def test_no_token_may_call_it(gov: Governance, boot: Bootstrap) -> None:
    principal = gov.authenticate(boot.token)
    error = fails(gov.call, "operator/list_accounts", {}, principal=principal)
    assert isinstance(error, NotPermitted)
    bulk = gov.call("bulk", {"items": [{"_type": "operator/list_accounts",
                                        "idempotency_key": "list-every-account"}]},
                    token=boot.token)
    assert bulk["outputs"]["list-every-account"]["code"] == "not_permitted"
