"""Opening the store a command names, and reading it through core operations only.

Which accounts a command covers follows one rule: ``--account ID`` names one; without it, a
command covers every account of the store, and a command that works in one account as a whole
(``demo`` records into one, ``export`` writes one) takes the store's only account, or is
refused with the list of accounts to choose from.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from governance_core.errors import NotFound
from governance_core.service import Governance, Session
from governance_http.cli.output import CommandError
from governance_http.settings import file_path, open_governance

__all__ = [
    "PAGE_SIZE",
    "account_sessions",
    "all_accounts",
    "find_run",
    "one_account",
    "open_store",
    "pages",
]

PAGE_SIZE = 100


def open_store(db: str, *, create: bool = False, hint: str = "") -> Governance:
    """Open ``db``; a file that does not exist is refused unless ``create`` is true.

    A mistyped path would otherwise become a new, empty store.
    """
    path = file_path(db)
    if path is not None and not create and not path.exists():
        raise CommandError(
            f"no store at {path}: create one with `governance init --db {db}`{hint}"
        )
    return open_governance(db)


def pages(
    call: Any, operation: str, params: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Every page of list ``operation`` run through ``call`` (a Session's or Governance's)."""
    offset: int | None = 0
    while offset is not None:
        page: dict[str, Any] = call(
            operation,
            {**(params or {}), "pagination[page_size]": PAGE_SIZE, "pagination[offset]": offset},
        )
        yield page
        offset = page["pagination"]["next_page_offset"]


def all_accounts(gov: Governance) -> list[dict[str, Any]]:
    """Every account in the store, oldest first."""
    return [
        account
        for page in pages(gov.call, "operator/list_accounts", {"sorting": "inserted_at"})
        for account in page["summaries"]
    ]


def account_sessions(gov: Governance, account_id: str | None) -> list[Session]:
    """Sessions over account ``account_id``, or over every account when it is None."""
    if account_id is not None:
        return [gov.as_account(account_id)]
    return [gov.as_account(account["id"]) for account in all_accounts(gov)]


def one_account(
    gov: Governance, account_id: str | None, *, purpose: str, alternative: str = ""
) -> Session:
    """A session over account ``account_id``, or over the store's only account.

    Without ``account_id`` a store holding several accounts (or none) is refused; the message
    says what naming one is for (``purpose``, such as "to export"), any ``alternative``, and
    lists each account's id and name.
    """
    if account_id is not None:
        return gov.as_account(account_id)
    accounts = all_accounts(gov)
    if len(accounts) == 1:
        return gov.as_account(accounts[0]["id"])
    if not accounts:
        raise CommandError("the store holds no account: create one with `governance init`")
    listed = "".join(f"\n  {account['id']}  {account['name']}" for account in accounts)
    raise CommandError(
        f"the store holds {len(accounts)} accounts; name the one {purpose} with --account ID"
        f"{alternative}:{listed}"
    )


def find_run(
    gov: Governance, run_id: str, account_id: str | None
) -> tuple[Session, dict[str, Any]]:
    """The session of the account holding run ``run_id`` and the run's details."""
    for session in account_sessions(gov, account_id):
        try:
            run = session.details("agent_instances/show", {"agent_instance_id": run_id})
        except NotFound:
            continue
        return session, run
    raise CommandError(f"no run {run_id} in this store")
