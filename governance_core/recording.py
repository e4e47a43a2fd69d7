"""Recording runs from inside an agent, without building request bodies.

::

    with session.run(agent_id=agent_id, agent_version="1.4.0", schema=schema) as run:
        with run.span("llm", payload={"prompt": prompt}) as span:
            span.result = {"text": call_model(prompt)}

        @run.traced("tool")
        def lookup(customer_id: str) -> dict[str, Any]: ...

A run is registered and started on entering its block and finished on leaving it
(``complete``, or ``failed`` when the block raises). A span is created ``active`` on entering
its block, nested under the span whose block encloses it (tracked per thread and per asyncio
task), and finished ``complete``, or ``failed`` with the exception recorded in its
``result_payload`` (the exception propagates). Every call goes through the caller's
``call(operation, params)`` (a :class:`~governance_core.service.Session` is one), so scopes,
validation and transactions are the same as over HTTP.

A run terminated from outside (``agent_instances/terminate``) raises :class:`RunTerminated`
at its next span, and on leaving its block if it ended there.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Mapping
from contextvars import ContextVar, Token
from datetime import date, datetime
from types import TracebackType
from typing import Any, ParamSpec, Protocol, TypeVar

from governance_core.errors import InvalidAction

__all__ = ["Caller", "Run", "RunTerminated", "SpanRecorder"]

P = ParamSpec("P")
R = TypeVar("R")


class Caller(Protocol):
    """What a run records through: an account's operations, called by name."""

    def call(
        self, operation: str, params: Mapping[str, Any] | None = None, **members: Any
    ) -> dict[str, Any]:
        """Run ``operation`` with ``params``; its envelope."""
        ...


_current_span: ContextVar[SpanRecorder | None] = ContextVar("current_span", default=None)


class RunTerminated(Exception):
    """The run was terminated from outside; the agent should stop its work."""

    def __init__(self, run_id: str, reason: str | None) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(f"run {run_id} was terminated: {reason or 'no reason given'}")


def _as_json(value: Any) -> Any:
    """Return ``value`` as JSON data: containers converted, anything else by its ``repr``."""
    if value is None or isinstance(value, (str, bool, int, float)):
        return value
    if isinstance(value, Mapping):
        return {str(key): _as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_as_json(item) for item in value]
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return repr(value)


def _object(value: Any) -> dict[str, Any]:
    """Return a payload object: a mapping as JSON, anything else under ``value``."""
    converted = _as_json(value)
    return converted if isinstance(converted, dict) else {"value": converted}


class Run:
    """One run of an agent being recorded; use it as a context manager.

    The keyword arguments are those of ``agent_instances/register``: ``agent_version`` is an
    external identifier (also used as its name) or the version object; ``schema`` is the
    ``agent_schema_version`` object (``span_type_schemas``, ``quality_schemas``,
    ``alert_schemas``, each a list of entries or a map by name).
    """

    def __init__(
        self,
        session: Caller,
        *,
        agent_version: str | Mapping[str, Any],
        agent_id: str | None = None,
        environment_id: str | None = None,
        schema: Mapping[str, Any] | None = None,
        purpose: str = "live",
        external_identifier: str | None = None,
    ) -> None:
        version = (
            {"name": agent_version, "external_identifier": agent_version}
            if isinstance(agent_version, str) else dict(agent_version)
        )
        members: dict[str, Any] = {"agent_version": version, "purpose": purpose}
        optional = {
            "agent_id": agent_id, "environment_id": environment_id,
            "agent_schema_version": None if schema is None else dict(schema),
            "external_identifier": external_identifier,
        }
        members.update({name: value for name, value in optional.items() if value is not None})
        self.session = session
        self._registration = members
        self._id: str | None = None
        self.finished = False
        self.termination_reason: str | None = None
        self.terminated = False

    @property
    def id(self) -> str:
        """The run's ``AgentInstance_Id`` (once its block is entered)."""
        if self._id is None:
            raise RuntimeError("the run is registered on entering its with block")
        return self._id

    def __enter__(self) -> Run:
        registered = self.session.call("agent_instances/register", self._registration)
        self._id = registered["details"]["id"]
        self.session.call("agent_instances/start", {"agent_instance_id": self._id})
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.finished or _terminates(error, self):
            return
        try:
            self.finish("complete" if error is None else "failed")
        except InvalidAction:
            # Finished from outside while the block ran: only a termination is news.
            details = self.details()
            if details["status"] == "terminated" and error is None:
                raise RunTerminated(self.id, details.get("termination_reason")) from None

    def finish(self, status: str = "complete") -> dict[str, Any]:
        """Finish the run now (``complete``, ``failed`` or ``cancelled``); its details."""
        envelope = self.session.call(
            "agent_instances/finish", {"agent_instance_id": self.id, "status": status}
        )
        self.finished = True
        details: dict[str, Any] = envelope["details"]
        return details

    def details(self) -> dict[str, Any]:
        """Fetch the run's current details (span counts, quality payloads, status, ...)."""
        details: dict[str, Any] = self.session.call(
            "agent_instances/show", {"agent_instance_id": self.id}
        )["details"]
        return details

    def span(self, schema_name: str, payload: Any = None) -> SpanRecorder:
        """Return a span of type ``schema_name``, to record in a ``with`` block."""
        return SpanRecorder(self, schema_name, _object({} if payload is None else payload))

    def traced(self, schema_name: str) -> Callable[[Callable[P, R]], Callable[P, R]]:
        """Record every call of the decorated function (sync or async) as a span.

        The span's payload holds the call's ``args`` and ``kwargs``; its result the value
        returned, under ``return``.
        """

        def decorate(function: Callable[P, R]) -> Callable[P, R]:
            if inspect.iscoroutinefunction(function):

                @functools.wraps(function)
                async def traced_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                    with self.span(schema_name, _call_payload(args, kwargs)) as span:
                        returned = await function(*args, **kwargs)
                        span.result = {"return": _as_json(returned)}
                        return returned

                return traced_async  # type: ignore[return-value]

            @functools.wraps(function)
            def traced_sync(*args: P.args, **kwargs: P.kwargs) -> R:
                with self.span(schema_name, _call_payload(args, kwargs)) as span:
                    returned = function(*args, **kwargs)
                    span.result = {"return": _as_json(returned)}
                    return returned

            return traced_sync

        return decorate

    def record_quality(self, name: str, payload: Mapping[str, Any] | None) -> dict[str, Any]:
        """Record (``None``: remove) the run's quality payload ``name``; the run's details."""
        details: dict[str, Any] = self.session.call(
            "agent_instances/record_quality",
            {"agent_instance_id": self.id, "name": name,
             "payload": None if payload is None else _as_json(payload)},
        )["details"]
        return details

    def raise_alert(
        self, name: str, severity: str, payload: Mapping[str, Any] | None = None
    ) -> dict[str, Any]:
        """Raise the alert ``name`` on the run; the alert's details."""
        details: dict[str, Any] = self.session.call(
            "alerts/raise",
            {"agent_instance_id": self.id, "name": name, "severity": severity,
             "payload": _as_json(payload or {})},
        )["details"]
        return details

    def clear_alert(self, name: str) -> dict[str, Any]:
        """Clear the run's raised alert ``name``; the alert's details."""
        details: dict[str, Any] = self.session.call(
            "alerts/clear", {"agent_instance_id": self.id, "name": name}
        )["details"]
        return details

    def _notice(self, envelope: Mapping[str, Any]) -> None:
        """Take note of a termination announced by a span write's ``control``."""
        order = envelope.get("control") or {}
        if order.get("terminate"):
            self.terminated = True
            self.termination_reason = order.get("reason")


def _terminates(error: BaseException | None, run: Run) -> bool:
    """Whether ``error`` reports the termination of ``run`` (not of another run)."""
    return isinstance(error, RunTerminated) and error.run_id == run._id


def _call_payload(args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    return {"args": _as_json(args), "kwargs": _as_json(kwargs)}


class SpanRecorder:
    """A span being recorded; set :attr:`result` inside its block to store a result payload."""

    def __init__(self, run: Run, schema_name: str, payload: dict[str, Any]) -> None:
        self.run = run
        self.schema_name = schema_name
        self.payload = payload
        self.result: Any = None
        self.id: str | None = None
        self._token: Token[SpanRecorder | None] | None = None

    def __enter__(self) -> SpanRecorder:
        run = self.run
        if run.terminated:
            raise RunTerminated(run.id, run.termination_reason)
        enclosing = _current_span.get()
        members: dict[str, Any] = {
            "agent_instance_id": run.id, "schema_name": self.schema_name, "status": "active",
            "payload": self.payload,
        }
        if enclosing is not None and enclosing.run is run and enclosing.id is not None:
            members["parent_span_id"] = enclosing.id
        envelope = run.session.call("agent_spans/create", members)
        self.id = envelope["details"]["id"]
        run._notice(envelope)
        if run.terminated:
            self._finish("cancelled", None)
            raise RunTerminated(run.id, run.termination_reason)
        self._token = _current_span.set(self)
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._token is not None:
            _current_span.reset(self._token)
        result = None if self.result is None else _object(self.result)
        if error is None:
            self._finish("complete", result)
        elif _terminates(error, self.run):
            self._finish("cancelled", result)
        else:
            failure = {"type": type(error).__name__, "message": str(error)}
            self._finish("failed", {**(result or {}), "error": failure})

    def _finish(self, status: str, result: dict[str, Any] | None) -> None:
        members: dict[str, Any] = {"agent_span_id": self.id, "status": status}
        if result is not None:
            members["result_payload"] = result
        self.run._notice(self.run.session.call("agent_spans/finish", members))
