"""Recording decoded OpenTelemetry spans through the core's operations.

:func:`ingest` is what both the OTLP endpoint and the in-process exporter call. It writes
only through :meth:`Governance.call <governance_core.service.Governance.call>` (agents,
environments, ``agent_instances/register``, ``agent_spans/create``, ``record_quality``,
``agent_instances/finish``), with idempotency keys derived from the OTel ids, inside one
store transaction for the whole export: either the export's accepted spans are all stored,
or (on an error that is not a refusal of one span) none is.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final

import attrs

from governance_core.errors import GovernanceError, TemporarilyUnavailable
from governance_core.otel.idle import end_idle_runs
from governance_core.otel.mapping import (
    MappingSettings,
    RunTarget,
    TraceGroup,
    agent_version_member,
    derived_span_id,
    group_spans,
    is_root,
    quality_records,
    run_status,
    span_members,
    timestamp,
)
from governance_core.otel.model import Rejection, Span
from governance_core.service import Governance

if TYPE_CHECKING:
    from governance_core.context import Principal

__all__ = ["IngestResult", "ingest"]

_PAGE: Final = {"pagination": {"offset": 0, "page_size": 100}}
_ENVIRONMENT_PURPOSES: Final = {
    "prod": "production", "production": "production", "live": "production",
    "staging": "staging", "stage": "staging", "preprod": "staging",
    "dev": "development", "development": "development", "local": "development",
    "test": "testing", "testing": "testing", "qa": "testing", "ci": "testing",
}


@attrs.frozen
class IngestResult:
    """What an export stored: how many spans, in which runs, and the spans refused."""

    accepted: int
    rejected: tuple[Rejection, ...]
    run_ids: tuple[str, ...]


def ingest(
    governance: Governance,
    principal: Principal,
    spans: Iterable[Span],
    settings: MappingSettings | None = None,
) -> IngestResult:
    """Record ``spans`` (one export) as runs of ``principal``'s account.

    A span whose data the core refuses is reported in ``rejected`` and the rest are stored;
    ``temporarily_unavailable`` and unexpected errors roll the whole export back. Then, when
    ``settings.root_wait`` is set, the account's trace runs idle that long are ended
    (:func:`governance_core.otel.idle.end_idle_runs`).
    """
    settings = settings or MappingSettings()
    groups, rejected = group_spans(spans)
    recorder = _Recorder(governance, principal, settings)
    with governance.transaction():
        for group in groups:
            recorder.record(group)
    if settings.root_wait is not None:
        # After the export's own transaction: ending another run never undoes the export,
        # and a busy store leaves it to the next export (the export itself is stored).
        with contextlib.suppress(TemporarilyUnavailable):
            end_idle_runs(
                governance, idle_after=settings.root_wait, account_id=principal.account_id
            )
    return IngestResult(
        accepted=recorder.accepted,
        rejected=(*rejected, *recorder.rejected),
        run_ids=tuple(recorder.run_ids),
    )


def _key(*parts: str) -> str:
    return "otel-" + "-".join(parts)


class _Recorder:
    """One export's writes; lookups of agents and environments are shared across its runs."""

    def __init__(
        self, governance: Governance, principal: Principal, settings: MappingSettings
    ) -> None:
        self.governance = governance
        self.principal = principal
        self.settings = settings
        # Version and environment lookups read as the account: an ingestion token may not
        # list them, and they are read here for its own agent only, never shown to it.
        self.reader = governance.as_account(principal.account_id).principal
        self.accepted = 0
        self.rejected: list[Rejection] = []
        self.run_ids: list[str] = []
        self._agents: dict[str, str] = {}
        self._environments: dict[str, str] = {}
        self._declared: dict[str, frozenset[str]] = {}

    def call(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.governance.call(operation, params, principal=self.principal)

    def read(self, operation: str, params: dict[str, Any]) -> dict[str, Any]:
        return self.governance.call(operation, params, principal=self.reader)

    def record(self, group: TraceGroup) -> None:
        try:
            with self.governance.transaction():
                run = self.run_for(group)
        except TemporarilyUnavailable:
            raise
        except GovernanceError as error:
            # What the failed block created was rolled back with it: forget it.
            self._agents.clear()
            self._environments.clear()
            self.rejected += [
                Rejection(span.trace_id, span.span_id, f"the run was refused: {error.message}")
                for span in group.spans
            ]
            return
        self.run_ids.append(run["id"])
        declared = self.declared_types(run)
        for span in group.spans:
            self.record_span(run["id"], span, declared)
        root = next((span for span in group.spans if is_root(span)), None)
        if root is not None and run["status"] in ("pending", "active"):
            self.call("agent_instances/finish", {
                "agent_instance_id": run["id"], "status": run_status(root),
                "timestamp": timestamp(root.end_time_unix_nano),
                "idempotency_key": _key("finish", run["id"]),
            })

    def declared_types(self, run: dict[str, Any]) -> frozenset[str]:
        """The span types the run's schema version declares (read once per export)."""
        schema_version_id = run.get("agent_schema_version_id")
        if not schema_version_id:
            return frozenset()
        if schema_version_id not in self._declared:
            details = self.read("agent_schema_versions/show", {
                "agent_schema_version_id": schema_version_id,
            })["details"]
            self._declared[schema_version_id] = frozenset(details.get("span_type_schemas") or ())
        return self._declared[schema_version_id]

    def record_span(self, run_id: str, span: Span, declared: frozenset[str]) -> None:
        span_id = derived_span_id(run_id, span.trace_id, span.span_id)
        parent_id = (
            None if is_root(span) else derived_span_id(run_id, span.trace_id, span.parent_span_id)
        )
        members = span_members(
            span, span_id=span_id, parent_id=parent_id, settings=self.settings, declared=declared,
        )
        try:
            # A span and its evaluations stand or fall together: the inner block is a
            # savepoint of the export's transaction.
            with self.governance.transaction():
                self.call("agent_spans/create", {
                    **members, "agent_instance_id": run_id, "idempotency_key": _key(span_id),
                })
                for index, (name, payload) in enumerate(quality_records(span, span_id)):
                    self.call("agent_instances/record_quality", {
                        "agent_instance_id": run_id, "name": name, "payload": payload,
                        "idempotency_key": _key(span_id, "quality", str(index)),
                    })
        except TemporarilyUnavailable:
            raise
        except GovernanceError as error:
            self.rejected.append(Rejection(span.trace_id, span.span_id, _describe(error)))
            return
        self.accepted += 1

    # -- the run a trace is recorded in ----------------------------------------------------
    def run_for(self, group: TraceGroup) -> dict[str, Any]:
        """The trace's run for the group's agent, registered on first sight."""
        agent_id = self.agent_id(group.target)
        found = self.call("agent_instances/list", {
            **_PAGE, "agent_id": agent_id, "external_identifier": group.trace_id,
        })["summaries"]
        if found:
            run: dict[str, Any] = found[0]
            return run
        register: dict[str, Any] = {
            "external_identifier": group.trace_id,
            **agent_version_member(group.target, not self.version_known(agent_id, group)),
        }
        if not self.principal.is_ingestion:
            register["agent_id"] = agent_id
            if group.target.environment is not None:
                register["environment_id"] = self.environment_id(group.target.environment)
        details: dict[str, Any] = self.call("agent_instances/register", register)["details"]
        return details

    def agent_id(self, target: RunTarget) -> str:
        """The token's agent, or the agent named by the resource (created on first sight)."""
        if self.principal.is_ingestion:
            assert self.principal.agent_id is not None
            return self.principal.agent_id
        if target.agent not in self._agents:
            found = self.read("agents/list", {**_PAGE, "external_identifier": target.agent})
            if found["summaries"]:
                self._agents[target.agent] = found["summaries"][0]["id"]
            else:
                made = self.call("agents/create", {
                    "name": target.agent, "external_identifier": target.agent,
                    "description": "Recorded from OpenTelemetry traces.",
                })
                self._agents[target.agent] = made["details"]["id"]
        return self._agents[target.agent]

    def version_known(self, agent_id: str, group: TraceGroup) -> bool:
        """Whether the agent already has the version (then its own schemas are kept)."""
        offset = 0
        while True:
            page = self.read("agent_versions/list", {
                "agent_id": agent_id, "pagination": {"offset": offset, "page_size": 100},
            })
            if any(
                version["external_identifier"] == group.target.version
                for version in page["summaries"]
            ):
                return True
            offset = page["pagination"]["next_page_offset"]
            if offset is None:
                return False

    def environment_id(self, name: str) -> str:
        """The environment whose external identifier (else name) is ``name``; made if none."""
        if name not in self._environments:
            self._environments[name] = self._find_environment(name) or self.call(
                "environments/create", {
                    "name": name, "external_identifier": name,
                    "purpose": _ENVIRONMENT_PURPOSES.get(name.lower(), "other"),
                },
            )["details"]["id"]
        return self._environments[name]

    def _find_environment(self, name: str) -> str | None:
        by_name = None
        offset: int | None = 0
        while offset is not None:
            page = self.read("environments/list", {
                "pagination": {"offset": offset, "page_size": 100},
            })
            for environment in page["summaries"]:
                if environment.get("external_identifier") == name:
                    return str(environment["id"])
                if by_name is None and environment.get("name") == name:
                    by_name = str(environment["id"])
            offset = page["pagination"]["next_page_offset"]
        return by_name


def _describe(error: GovernanceError) -> str:
    payload = error.to_payload()
    fields = payload.get("errors")
    if isinstance(fields, dict) and fields:
        named = "; ".join(
            f"{field}: {detail.get('message', detail.get('code'))}"
            for field, detail in fields.items()
            if isinstance(detail, dict)
        )
        return f"{error.code} ({named})"
    return f"{error.code}: {error.message}"
