"""Fixtures and assertions for testing code that records runs with this library.

Installed with the package and registered through the ``pytest11`` entry point, so a test
suite gets these fixtures with no import or configuration:

``governance``
    A :class:`~governance_core.service.Governance` over a new in-memory store, with one
    account bootstrapped (see ``governance_bootstrap``). It keeps sensitive values with
    :class:`~governance_core.encryption.PlaintextForTests`: no key is needed in tests.
``governance_bootstrap``
    That account's :class:`~governance_core.service.Bootstrap`: ids and an account token.
``governance_session``
    A :class:`~governance_core.service.Session` as that token's holder: record runs with
    ``governance_session.run(...)``.
``recorded_run``
    Loads what a run recorded as a :class:`RecordedRun`: ``recorded_run(run)`` takes the
    recording :class:`~governance_core.recording.Run`, a run's details as the API answers
    them, or a run id; ``recorded_run()`` the account's newest run. Its ``assert_*`` methods
    fail with a message describing the run.

``governance_policies``
    A :class:`~governance_core.policy_testing.PolicyCheck` over ``governance_session``: load
    Cedar files (``load``), then ``assert_allows``, ``assert_denies`` and
    ``assert_needs_approval`` of actions such as ``"tool:refund"``; a failure shows the
    decision and the policies that made it. The files (or directories) named by the ini
    option ``governance_policies`` are loaded before the test.

``governance_server`` (a server over ``governance`` for agents that record through an SDK)
is the HTTP package's plugin, :mod:`governance_http.pytest_plugin`, registered by its own
entry point: the core never imports the HTTP package.

Nothing here imports the library until a fixture is used, so the plugin costs a test suite
that does not use it nothing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from governance_core.policy_testing import PolicyCheck
    from governance_core.service import Bootstrap, Governance, Session

__all__ = [
    "POLICY_FILES_OPTION",
    "RecordedRun",
    "governance",
    "governance_bootstrap",
    "governance_policies",
    "governance_session",
    "pytest_addoption",
    "recorded_run",
]

POLICY_FILES_OPTION = "governance_policies"
"""The ini option naming the Cedar files (or directories of them) ``governance_policies`` loads."""

_PAGE = {"pagination[page_size]": 100}


def _all(session: Session, operation: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    offset: int | None = 0
    while offset is not None:
        page = session.call(operation, {**params, **_PAGE, "pagination[offset]": offset})
        found.extend(page["summaries"])
        offset = page["pagination"]["next_page_offset"]
    return found


def _run_id(run: object) -> str:
    """The id of the run ``run`` stands for (see ``recorded_run``)."""
    from governance_core.ids import is_pfid
    from governance_core.recording import Run

    if isinstance(run, Run):
        return run.id
    if isinstance(run, Mapping):
        details = run.get("details")
        if isinstance(details, Mapping) and "type" not in run:
            run = details
        kind, run_id = run.get("type"), run.get("id")
        if kind != "agent_instance":
            raise ValueError(
                "recorded_run takes a run's details (a dict whose type is 'agent_instance'); "
                f"this dict's type is {kind!r}"
            )
        if not is_pfid(run_id):
            raise ValueError(f"the run's details hold no well-formed id: {run_id!r}")
        return str(run_id)
    if isinstance(run, str):
        if not is_pfid(run.strip()):
            raise ValueError(f"recorded_run takes a run id; {run!r} is not a well-formed id")
        return run.strip()
    raise TypeError(
        "recorded_run takes a Run, a run's details (a dict) or a run id (a string), "
        f"not {type(run).__name__}"
    )


class RecordedRun:
    """What one run recorded (details, spans, alerts), with assertions on it.

    ``spans`` are the run's activity spans, what its agent recorded: the spans the service
    writes for each alert event and quality record are not among them (see ``alerts`` and
    ``details["quality_payloads"]``), so no span type assertion counts them.

    Each ``assert_*`` method raises ``AssertionError`` with a message that names what was
    expected and describes what the run holds; each returns what it checked, for further
    assertions.
    """

    def __init__(
        self, details: dict[str, Any], spans: list[dict[str, Any]], alerts: list[dict[str, Any]]
    ) -> None:
        self.details = details
        self.spans = spans
        self.alerts = alerts

    @classmethod
    def load(cls, session: Session, run_id: str) -> RecordedRun:
        """Read run ``run_id`` through ``session``: its details, activity spans and alerts."""
        details = session.details("agent_instances/show", {"agent_instance_id": run_id})
        spans = _all(session, "agent_spans/list", {
            "agent_instance_id": run_id, "purpose": "activity", "sorting": "started_at",
        })
        alerts = _all(session, "alerts/list", {"agent_instance_id": run_id})
        return cls(details, spans, alerts)

    @property
    def id(self) -> str:
        """The run's (agent instance's) id."""
        run_id: str = self.details["id"]
        return run_id

    @property
    def status(self) -> str:
        """The run's status."""
        status: str = self.details["status"]
        return status

    @property
    def risk_level(self) -> str | None:
        """The run's risk level (low, medium, high, critical); None when none was assessed.

        A run is assessed when a span type it used declares a ``data_risk``.
        """
        level: str | None = (self.details["risk_score"] or {}).get("risk_level")
        return level

    @property
    def total_cost(self) -> Decimal | None:
        """The run's total cost in USD, or None when it is not known.

        It is not known when no span reported token usage, or no model used has a price.
        """
        cost = (self.details["cost_breakdown"] or {}).get("total_cost")
        return None if cost is None else Decimal(str(cost))

    def _cost_unknown(self) -> str:
        if self.details["cost_breakdown"] is None:
            return "no span reported token usage"
        return "no model the run used has a known price"

    def describe(self) -> str:
        """The run in a few lines, as failure messages show it."""
        by_type: dict[str, Counter[str]] = {}
        for span in self.spans:
            by_type.setdefault(span["schema_name"], Counter())[span["status"]] += 1
        lines = [
            f"run {self.id}: {self.status}, risk {self.risk_level or 'not assessed'} "
            f"(score {(self.details['risk_score'] or {}).get('total_score', 0)}), "
            "cost " + (self._cost_unknown() if self.total_cost is None
                       else f"${self.total_cost}"),
            "  spans: " + (", ".join(
                f"{name} x{sum(counts.values())} ("
                + ", ".join(f"{status} {n}" for status, n in sorted(counts.items())) + ")"
                for name, counts in sorted(by_type.items())
            ) or "none"),
            "  alerts: " + (", ".join(
                f"{alert['name']} ({alert['severity']}, {alert['status']})"
                for alert in self.alerts
            ) or "none"),
        ]
        return "\n".join(lines)

    def _fail(self, message: str) -> AssertionError:
        return AssertionError(f"{message}\n{self.describe()}")

    def spans_of_type(self, schema_name: str, *, status: str | None = None) -> list[dict[str, Any]]:
        """The run's spans of type ``schema_name`` (and ``status``, when given), oldest first."""
        return [
            span for span in self.spans
            if span["schema_name"] == schema_name and status in (None, span["status"])
        ]

    def assert_spans(
        self, schema_name: str, *, count: int | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        """Assert the run has spans of a type: ``count`` of them (else at least one).

        With ``status``, only spans in that status count; the matching spans are returned.
        """
        __tracebackhide__ = True
        found = self.spans_of_type(schema_name, status=status)
        what = f"{schema_name!r} spans" + (f" with status {status!r}" if status else "")
        if count is None and not found:
            raise self._fail(f"expected {what}, found none")
        if count is not None and len(found) != count:
            raise self._fail(f"expected {count} {what}, found {len(found)}")
        return found

    def assert_no_spans(self, schema_name: str, *, status: str | None = None) -> None:
        """Assert the run has no span of that type (in that status, when given)."""
        __tracebackhide__ = True
        self.assert_spans(schema_name, count=0, status=status)

    def assert_status(self, expected: str) -> None:
        """Assert the run's status."""
        __tracebackhide__ = True
        if self.status != expected:
            raise self._fail(f"expected the run to be {expected!r}, it is {self.status!r}")

    def assert_cost(
        self,
        *,
        at_most: float | Decimal | None = None,
        at_least: float | Decimal | None = None,
    ) -> Decimal:
        """Assert the run's total cost (USD) is known and within the bounds given."""
        __tracebackhide__ = True
        cost = self.total_cost
        if cost is None:
            raise self._fail(f"expected a known cost, but {self._cost_unknown()}")
        if at_most is not None and cost > Decimal(str(at_most)):
            raise self._fail(f"expected a cost of at most ${at_most}, it is ${cost}")
        if at_least is not None and cost < Decimal(str(at_least)):
            raise self._fail(f"expected a cost of at least ${at_least}, it is ${cost}")
        return cost

    def assert_risk_level(
        self, expected: str | None = None, *, at_most: str | None = None
    ) -> str:
        """Assert the run's risk was assessed and is ``expected``, or no higher than ``at_most``.

        Levels rank low < medium < high < critical.
        """
        __tracebackhide__ = True
        from governance_core.rules.risk import RISK_LEVELS

        for given in (expected, at_most):
            if given is not None and given not in RISK_LEVELS:
                raise ValueError(f"a risk level is one of {', '.join(RISK_LEVELS)}: {given!r}")
        level = self.risk_level
        if level is None:
            raise self._fail(
                "expected an assessed risk level, but no span type the run used declares "
                "data_risk"
            )
        if expected is not None and level != expected:
            raise self._fail(f"expected risk level {expected!r}, it is {level!r}")
        if at_most is not None and RISK_LEVELS.index(level) > RISK_LEVELS.index(at_most):
            raise self._fail(f"expected risk level at most {at_most!r}, it is {level!r}")
        return level

    def assert_alerts(
        self, *names: str, severity: str | None = None, status: str | None = None
    ) -> list[dict[str, Any]]:
        """Assert the run raised exactly the alerts ``names`` (in any order; none when empty).

        ``severity`` and ``status`` narrow which of the run's alerts are compared.
        """
        __tracebackhide__ = True
        alerts = [
            alert for alert in self.alerts
            if severity in (None, alert["severity"]) and status in (None, alert["status"])
        ]
        found = sorted(alert["name"] for alert in alerts)
        if found != sorted(names):
            narrowed = "".join(
                f" {label} {value!r}"
                for label, value in (("of severity", severity), ("in status", status))
                if value is not None
            )
            wanted = ", ".join(sorted(names)) or "none"
            raise self._fail(
                f"expected alerts{narrowed}: {wanted}; found {', '.join(found) or 'none'}"
            )
        return alerts


@pytest.fixture
def _governance_made() -> Iterator[tuple[Governance, Bootstrap]]:
    from governance_core.context import Config
    from governance_core.encryption import PlaintextForTests
    from governance_core.service import Governance
    from governance_core.storage.memory import MemoryStore

    # A test store holds no real data: its sensitive values are kept without a key, by choice.
    made = Governance(MemoryStore(), config=Config(cipher=PlaintextForTests()))
    setup = made.bootstrap(account_name="Test account", admin_email="admin@example.test")
    yield made, setup
    made.close()


@pytest.fixture
def governance(_governance_made: tuple[Governance, Bootstrap]) -> Governance:
    """A facade over a new in-memory store with one account bootstrapped."""
    return _governance_made[0]


@pytest.fixture
def governance_bootstrap(_governance_made: tuple[Governance, Bootstrap]) -> Bootstrap:
    """The bootstrapped account of ``governance``: its ids and account token."""
    return _governance_made[1]


@pytest.fixture
def governance_session(governance: Governance, governance_bootstrap: Bootstrap) -> Session:
    """A session as the bootstrapped account token's holder."""
    return governance.session(governance_bootstrap.token)


@pytest.fixture
def recorded_run(governance_session: Session) -> Callable[..., RecordedRun]:
    """Load what a run recorded: ``recorded_run(run)``, or the newest run when none is given.

    ``run`` is a recording :class:`~governance_core.recording.Run`, a run's details as the API
    answers them (a mapping whose ``type`` is ``agent_instance``, or the ``{status, details}``
    answer holding one), or a run id. Any other type is a ``TypeError``; a mapping that is not
    a run's details, or a string that is not a well-formed id, a ``ValueError``.
    """

    def load(run: object = None) -> RecordedRun:
        __tracebackhide__ = True
        if run is None:
            newest = governance_session.call(
                "agent_instances/list", {"sorting": "-inserted_at", "pagination[page_size]": 1}
            )["summaries"]
            if not newest:
                raise AssertionError("no run was recorded in the test account")
            run = newest[0]
        return RecordedRun.load(governance_session, _run_id(run))

    return load


def pytest_addoption(parser: pytest.Parser) -> None:
    """Declare the ini option ``governance_policies``."""
    parser.addini(
        POLICY_FILES_OPTION, type="paths", default=[],
        help="Cedar policy files, or directories of them, that the governance_policies"
        " fixture loads (paths relative to the ini file)",
    )


@pytest.fixture
def governance_policies(
    request: pytest.FixtureRequest, governance_session: Session
) -> PolicyCheck:
    """Policies loaded into the test account, with assertions on what they decide.

    The files of the ini option ``governance_policies`` are loaded first, in enforce mode.
    """
    from governance_core.policy_testing import PolicyCheck

    check = PolicyCheck(governance_session)
    files = request.config.getini(POLICY_FILES_OPTION)
    if files:
        check.load(*files)
    return check
