"""Testing Cedar policies: load them into a governance, decide actions, assert the outcome.

:class:`PolicyCheck` works over any :class:`~governance_core.service.Session`; the pytest
plugin's ``governance_policies`` fixture is one over the in-memory ``governance``, with the
files of the ``governance_policies`` ini option already loaded::

    def test_refunds(governance_policies):
        governance_policies.load("policies/refunds.cedar")
        governance_policies.assert_allows("tool:refund", args={"amount": 40})
        governance_policies.assert_needs_approval("tool:refund", args={"amount": 250})
        governance_policies.assert_denies("tool:wipe_disk", by="refunds")

An action is ``"tool:<name>"``, ``"model:<name>"`` or ``"span:<span type>"``. Each decision
is the real one (``decisions/decide``, from the run's stored figures); without ``run=`` it is
taken for a new run of its own. A failed assertion shows the decision: its outcome, warnings
and every deciding policy, by id, name, version, mode and effect, with its message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from governance_core.errors import NotFound
from governance_core.policies.guard import decide
from governance_core.service import Session

__all__ = ["ACTION_KINDS", "PolicyCheck", "PolicyFileError", "parse_action"]

ACTION_KINDS = {
    "tool": "tool_call", "tool_call": "tool_call",
    "model": "model_call", "model_call": "model_call",
    "span": "span",
}
"""The kinds an action string may name, and the decide request's kind of each."""

_OUTCOME_WORDS = {
    "allow": "allowed", "deny": "denied", "pending_approval": "held for approval",
}


class PolicyFileError(ValueError):
    """A policy file the engine refuses; the message names the file and each problem's line."""


def parse_action(action: str) -> tuple[str, str]:
    """``"tool:refund"`` as ``("tool_call", "refund")``; a ``ValueError`` naming the forms."""
    kind, separator, name = action.partition(":")
    if not separator or kind.strip() not in ACTION_KINDS or not name.strip():
        raise ValueError(
            "an action is 'tool:<name>', 'model:<name>' or 'span:<span type>',"
            f" not {action!r}"
        )
    return ACTION_KINDS[kind.strip()], name.strip()


def _cedar_files(path: Path) -> list[Path]:
    if path.is_dir():
        found = sorted(path.rglob("*.cedar"))
        if not found:
            raise PolicyFileError(f"{path}: the directory holds no .cedar file")
        return found
    if not path.is_file():
        raise PolicyFileError(f"{path}: no such file or directory")
    return [path]


class PolicyCheck:
    """Policies loaded into ``session``'s account, and assertions on what they decide.

    ``agent_name`` names the agent whose runs the checks decide for (made on first use).
    """

    def __init__(self, session: Session, *, agent_name: str = "Policy test agent") -> None:
        self.session = session
        self.agent_name = agent_name
        self.policies: dict[str, dict[str, Any]] = {}
        """Every policy loaded, by id (its details as created)."""
        self._agent_id: str | None = None

    # -- loading ---------------------------------------------------------------------------
    def load(
        self,
        *paths: str | Path,
        mode: str = "enforce",
        scope: Mapping[str, Sequence[str]] | None = None,
    ) -> list[dict[str, Any]]:
        """Create a policy from each ``.cedar`` file (a directory: each file under it).

        A policy is named after its file (without ``.cedar``). A file the engine refuses
        raises :class:`PolicyFileError` listing ``file:line: message`` for each problem, and
        nothing is created. Answers the policies' details.
        """
        files = [found for path in paths for found in _cedar_files(Path(path))]
        sources = [(file.stem, file.read_text(encoding="utf-8"), str(file)) for file in files]
        return self._create(sources, mode, scope)

    def load_text(
        self,
        source: str,
        *,
        name: str = "policy",
        mode: str = "enforce",
        scope: Mapping[str, Sequence[str]] | None = None,
    ) -> dict[str, Any]:
        """Create one policy from Cedar text; its details (see :meth:`load`)."""
        return self._create([(name, source, name)], mode, scope)[0]

    def _create(
        self,
        sources: Iterable[tuple[str, str, str]],
        mode: str,
        scope: Mapping[str, Sequence[str]] | None,
    ) -> list[dict[str, Any]]:
        listed = list(sources)
        problems: list[str] = []
        for _name, source, where in listed:
            checked = self.session.call("policies/validate", {"source": source})
            problems += [
                f"{where}:{problem['line'] or 1}: {problem['message']}"
                for problem in checked["problems"]
            ]
        if problems:
            raise PolicyFileError("the engine refuses these policies:\n" + "\n".join(problems))
        created = []
        for name, source, _where in listed:
            body: dict[str, Any] = {"name": name, "source": source, "mode": mode}
            if scope is not None:
                body["scope"] = {key: list(value) for key, value in scope.items()}
            details = self.session.details("policies/create", body)
            self.policies[details["id"]] = details
            created.append(details)
        return created

    # -- runs ------------------------------------------------------------------------------
    @property
    def agent_id(self) -> str:
        """The id of the agent whose runs are decided for."""
        if self._agent_id is None:
            self._agent_id = self.session.details("agents/create", {"name": self.agent_name})["id"]
        return self._agent_id

    def run(
        self,
        *,
        span_types: Sequence[Mapping[str, Any]] = (),
        environment_id: str | None = None,
        agent_id: str | None = None,
    ) -> str:
        """A new started run (of the check's agent, or ``agent_id``); its id.

        ``span_types`` are its schema's span type entries (``name``, ``data_risk``, ...): the
        spans :meth:`span` records and the ``span_type`` an action declares are among them.
        """
        entries = [dict(entry) for entry in span_types]
        # Runs with the same span types share one schema version.
        digest = hashlib.sha256(json.dumps(entries, sort_keys=True).encode()).hexdigest()
        body: dict[str, Any] = {
            "agent_id": agent_id or self.agent_id,
            "agent_version": {"external_identifier": "policy-test"},
            "agent_schema_version": {
                "external_identifier": f"policy-test-{digest[:16]}",
                "span_type_schemas": entries,
            },
        }
        if environment_id is not None:
            body["environment_id"] = environment_id
        run_id: str = self.session.details("agent_instances/register", body)["id"]
        self.session.call("agent_instances/start", {"agent_instance_id": run_id})
        return run_id

    def span(self, run: str, span_type: str, payload: Mapping[str, Any] | None = None) -> None:
        """Record a complete span of ``span_type`` on ``run`` (its figures then count)."""
        self.session.call("agent_spans/create", {
            "agent_instance_id": run, "schema_name": span_type, "status": "complete",
            "payload": dict(payload or {}),
        })

    # -- deciding --------------------------------------------------------------------------
    def decide(
        self,
        action: str,
        *,
        run: str | None = None,
        args: Mapping[str, Any] | None = None,
        span_type: str | None = None,
    ) -> dict[str, Any]:
        """The decision for ``action`` (see the module) in ``run``, else in a new run."""
        kind, name = parse_action(action)
        return decide(
            self.session, run or self.run(), kind, name, args, span_type=span_type
        )

    def assert_allows(
        self,
        action: str,
        *,
        run: str | None = None,
        args: Mapping[str, Any] | None = None,
        span_type: str | None = None,
    ) -> dict[str, Any]:
        """Assert the policies allow ``action``; the decision."""
        __tracebackhide__ = True
        return self._expect("allow", action, run, args, span_type, ())

    def assert_denies(
        self,
        action: str,
        *,
        run: str | None = None,
        args: Mapping[str, Any] | None = None,
        span_type: str | None = None,
        by: str | Sequence[str] = (),
    ) -> dict[str, Any]:
        """Assert the policies deny ``action``; the decision.

        ``by`` names the policies (names or ids) expected among those that deny it.
        """
        __tracebackhide__ = True
        return self._expect("deny", action, run, args, span_type, by)

    def assert_needs_approval(
        self,
        action: str,
        *,
        run: str | None = None,
        args: Mapping[str, Any] | None = None,
        span_type: str | None = None,
        by: str | Sequence[str] = (),
    ) -> dict[str, Any]:
        """Assert the policies hold ``action`` for a person's approval; the decision.

        ``by`` names the policies (names or ids) expected among those that hold it.
        """
        __tracebackhide__ = True
        return self._expect("pending_approval", action, run, args, span_type, by)

    def _expect(
        self,
        outcome: str,
        action: str,
        run: str | None,
        args: Mapping[str, Any] | None,
        span_type: str | None,
        by: str | Sequence[str],
    ) -> dict[str, Any]:
        __tracebackhide__ = True
        decision = self.decide(action, run=run, args=args, span_type=span_type)
        asked = action + ("" if not args else " " + json.dumps(dict(args), sort_keys=True))
        if decision["outcome"] != outcome:
            raise AssertionError(
                f"expected {asked} to be {_OUTCOME_WORDS[outcome]}; it was"
                f" {_OUTCOME_WORDS[decision['outcome']]}\n{self.describe(decision)}"
            )
        wanted = [by] if isinstance(by, str) else list(by)
        deciding = [r for r in decision["reasons"] if r["mode"] == "enforce"]
        for expected in wanted:
            if not any(expected in (r["policy_id"], self._name(r["policy_id"]))
                       for r in deciding):
                raise AssertionError(
                    f"expected policy {expected!r} among those that decided {asked}\n"
                    f"{self.describe(decision)}"
                )
        return decision

    def _name(self, policy_id: str) -> str | None:
        known = self.policies.get(policy_id)
        if known is None:
            try:
                known = self.session.details("policies/show", {"policy_id": policy_id})
            except NotFound:
                return None
            self.policies[policy_id] = known
        name: str = known["name"]
        return name

    def describe(self, decision: Mapping[str, Any]) -> str:
        """A decision in a few lines: outcome, warnings and each deciding policy."""
        head = f"  decision {decision['id']} in run {decision['agent_instance_id']}:"
        head += f" {decision['outcome']}"
        if decision.get("approval_id"):
            head += f" (approval {decision['approval_id']})"
        if decision.get("observed_outcome"):
            head += f", observe mode would say {decision['observed_outcome']}"
        lines = [head]
        reasons = decision.get("reasons") or []
        if not reasons:
            lines.append("  deciding policies: none (no forbid matched)")
        else:
            lines.append("  deciding policies:")
            for reason in reasons:
                name = self._name(reason["policy_id"])
                lines.append(
                    f"    {reason['policy_id']} {name!r} v{reason['policy_version']}"
                    f" ({reason['mode']}, {reason['effect']}): {reason['message']}"
                )
        warnings = decision.get("warnings") or []
        lines.append("  warnings: " + ("; ".join(warnings) if warnings else "none"))
        return "\n".join(lines)
