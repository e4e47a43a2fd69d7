"""Runtime governance: Cedar policies decide, before an agent acts, whether it may.

- :mod:`~governance_core.policies.schema`: the request a policy sees, as a Cedar schema;
- :mod:`~governance_core.policies.engine`: checking text and evaluating sets (``cedarpy``,
  the ``policies`` extra; the package imports without it);
- :mod:`~governance_core.policies.deciding`: a decision from the run's stored aggregates,
  approvals bound by digest and used once, the ``policy_denied`` alert;
- :mod:`~governance_core.policies.guard`: :func:`decide` and :func:`guard` for embedders;
- :mod:`~governance_core.policies.agent_hooks`: the policies as an agent-hooks interceptor,
  approval resolver and record sink (the ``agent-hooks`` extra; not imported here, so the
  package imports without it);
- :mod:`~governance_core.policies.recorded`: a recorded span as the action it records, and
  the run's figures as they stood at each span;
- :mod:`~governance_core.policies.backtest`: ``backtest_policy``, what a draft policy would
  have decided over the runs already recorded (the operation ``policies/test``);
- :mod:`~governance_core.policies.detective`: ``judge_recorded`` and ``keep_recorded``, the
  live policies' decisions on spans just recorded.

The operations are ``policies/*``, ``decisions/*`` and ``approvals/*``
(:mod:`governance_core.operations`); docs/policies.md is the user's guide.
"""

from __future__ import annotations

from governance_core.policies.engine import EXTRA, engine_available
from governance_core.policies.guard import ActionDenied, ApprovalTimedOut, decide, guard

__all__ = ["EXTRA", "ActionDenied", "ApprovalTimedOut", "decide", "engine_available", "guard"]
