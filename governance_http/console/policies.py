"""The policies pages: list, view, create and edit Cedar text, switch a policy's mode, back-test.

Every read and write goes through ``policies/*`` as the signed-in caller. A text the engine
refuses comes back in its form as typed, with each of the engine's messages and the line it
names (``policies/validate``), the lines at fault marked in a numbered listing of the text.
A back-test (``policies/test``) judges the runs of the last days by the saved text (the
policy's page) or by the text being edited (the form), and writes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from governance_core.errors import ValidationErrors
from governance_core.policies.schema import CEDAR_SCHEMA
from governance_http.console.governance import OUTCOME_LABELS
from governance_http.console.pages import Action, FormPage, Page
from governance_http.console.web import Console, Visit

__all__ = ["MODE_LABELS", "policy_routes"]

MODE_LABELS: Mapping[str, str] = {
    "enforce": "decides: a matching forbid denies the action or holds it for approval",
    "observe": "decides and records what it would have said, never blocks",
    "disabled": "is not evaluated",
}
"""What each mode does, as the mode switch says it."""
SCOPES = ("environment_ids", "agent_ids")
BACKTEST_SHOWN = 20
"""How many of the runs and spans a back-test would have stopped the page lists."""


def _choices(visit: Visit) -> dict[str, Any]:
    return {
        "environments": visit.names("environments/list"), "agents": visit.names("agents/list"),
        "modes": MODE_LABELS, "outcome_labels": OUTCOME_LABELS,
    }


def policies_page(visit: Visit) -> None:
    """Every policy of the account: name, mode, scope, version, last change."""
    visit.render("policies.html", policies=list(visit.scan("policies/list", sorting="name")),
                 **_choices(visit))


def _backtest(visit: Visit, days: str | None, **draft: Any) -> dict[str, Any]:
    """The back-test of ``draft`` over the last ``days`` days, or the problems named in it.

    ``report`` is what ``policies/test`` answers; ``problems`` its field errors.
    """
    try:
        report = visit.call("policies/test", **draft, days=days, limit=BACKTEST_SHOWN)
    except ValidationErrors as error:
        return {"problems": {name: problem.message for name, problem in error.errors.items()}}
    return {"report": report, "problems": {}}


def policy_page(visit: Visit, policy_id: str) -> None:
    """One policy: its facts, its text with line numbers, the mode switch and the back-test.

    ``backtest_days`` back-tests the saved text over that many days.
    """
    policy = visit.call("policies/show", policy_id=policy_id)["details"]
    days = visit.query("backtest_days")
    backtest = None
    if days is not None:
        backtest = _backtest(visit, days, policy_id=policy_id, source=policy["source"])
    visit.render("policy.html", policy=policy, lines=policy["source"].split("\n"),
                 backtest=backtest, backtest_days=days or "7", **_choices(visit))


def _form(
    visit: Visit,
    policy: dict[str, Any] | None,
    form: dict[str, Any],
    *,
    status: int = 200,
    problems: Mapping[str, str] | None = None,
    source_problems: list[dict[str, Any]] | None = None,
    checked: bool = False,
    backtest: dict[str, Any] | None = None,
) -> None:
    """The create or edit form, filled with ``form``, with the problems found in it."""
    at_fault: dict[int, list[str]] = {}
    for problem in source_problems or ():
        if problem.get("line"):
            at_fault.setdefault(problem["line"], []).append(problem["message"])
    visit.render(
        "policy_form.html", status, policy=policy, form=form, problems=problems or {},
        source_problems=source_problems or [], at_fault=at_fault, checked=checked,
        lines=form["source"].split("\n"), schema=CEDAR_SCHEMA, backtest=backtest,
        backtest_days=visit.form.get("backtest_days") or "7", **_choices(visit),
    )


def _stored_form(policy: Mapping[str, Any]) -> dict[str, Any]:
    scope = policy.get("scope") or {}
    return {
        "name": policy["name"], "description": policy.get("description") or "",
        "mode": policy["mode"], "source": policy["source"],
        "scope": {member: list(scope.get(member) or []) for member in SCOPES},
    }


def _posted_form(visit: Visit, policy: Mapping[str, Any] | None) -> dict[str, Any]:
    """The form as posted; a scope list holding the stored ids keeps their stored order."""
    stored = (policy or {}).get("scope") or {}
    scope = {}
    for member in SCOPES:
        ticked = [value for value in visit.form_values.get(member, []) if value]
        kept = list(stored.get(member) or [])
        scope[member] = kept if sorted(kept) == sorted(ticked) else ticked
    # Browsers send a text box's line breaks as CRLF; the text is kept as typed, with LF.
    return {
        "name": visit.form.get("name", ""),
        "description": visit.form.get("description", "").replace("\r\n", "\n"),
        "mode": visit.form.get("mode", "enforce"),
        "source": visit.form.get("source", "").replace("\r\n", "\n"),
        "scope": scope,
    }


def new_policy_page(visit: Visit) -> None:
    """An empty policy form (enforce mode, every run in scope)."""
    _form(visit, None, {"name": "", "description": "", "mode": "enforce", "source": "",
                        "scope": {member: [] for member in SCOPES}})


def edit_policy_page(visit: Visit, policy_id: str) -> None:
    """The policy's form, filled with what is stored."""
    policy = visit.call("policies/show", policy_id=policy_id)["details"]
    _form(visit, policy, _stored_form(policy))


def _check(visit: Visit, policy: dict[str, Any] | None, form: dict[str, Any]) -> None:
    """The form again, saying whether the engine accepts its text (nothing is stored)."""
    try:
        found = visit.call("policies/validate", source=form["source"])
    except ValidationErrors as error:
        _form(visit, policy, form, status=422,
              problems={name: problem.message for name, problem in error.errors.items()})
        return
    _form(visit, policy, form, source_problems=found["problems"], checked=True)


def _save(visit: Visit, policy: dict[str, Any] | None) -> None:
    """Create or update the policy from the posted form, or show the form with its problems.

    ``intent=check`` only checks the text and ``intent=backtest`` back-tests it over the last
    ``backtest_days`` days (nothing is stored). On success the browser goes to the policy's
    page.
    """
    form = _posted_form(visit, policy)
    if visit.form.get("intent") == "check":
        _check(visit, policy, form)
        return
    if visit.form.get("intent") == "backtest":
        _form(visit, policy, form, backtest=_backtest(
            visit, visit.form.get("backtest_days"), source=form["source"], scope=form["scope"],
            policy_id=None if policy is None else policy["id"],
            mode=None if policy is not None else form["mode"],
        ))
        return
    members = {key: form[key] for key in ("name", "description", "source", "scope")}
    try:
        if policy is None:
            saved = visit.call("policies/create", **members, mode=form["mode"])
        else:
            saved = visit.call("policies/update", policy_id=policy["id"], **members)
    except ValidationErrors as error:
        problems = {name: problem.message for name, problem in error.errors.items()}
        source_problems: list[dict[str, Any]] = []
        if "source" in problems and form["source"].strip():
            source_problems = visit.call("policies/validate", source=form["source"])["problems"]
            if source_problems:
                del problems["source"]
        _form(visit, policy, form, status=422, problems=problems,
              source_problems=source_problems)
        return
    visit.flash("policy_created" if policy is None else "policy_saved")
    visit.redirect(f"/policies/{saved['details']['id']}")


def create_policy(visit: Visit) -> None:
    """Create a policy from the form (see :func:`_save`)."""
    _save(visit, None)


def update_policy(visit: Visit, policy_id: str) -> None:
    """Save the policy's form (see :func:`_save`); its version grows when something changed."""
    _save(visit, visit.call("policies/show", policy_id=policy_id)["details"])


def switch_mode(visit: Visit, policy_id: str) -> None:
    """Put the policy in the mode chosen: enforce, observe or disabled."""
    mode = visit.form.get("mode", "")
    visit.call("policies/update", policy_id=policy_id, mode=mode)
    visit.flash("policy_mode")
    visit.redirect(f"/policies/{policy_id}")


def policy_routes(console: Console) -> list[tuple[str, object]]:
    """The policies pages' paths and their resources."""
    return [
        ("/policies", Page(console, policies_page)),
        ("/policies/new", FormPage(console, new_policy_page, create_policy)),
        ("/policies/{policy_id}", Page(console, policy_page)),
        ("/policies/{policy_id}/edit", FormPage(console, edit_policy_page, update_policy)),
        ("/policies/{policy_id}/mode", Action(console, switch_mode)),
    ]

