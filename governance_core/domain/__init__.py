"""Rules that span resource families, on typed models.

- :mod:`~governance_core.domain.runs`: the run and what a span write moves on it;
- :mod:`~governance_core.domain.spans`: span create and finish, one call each;
- :mod:`~governance_core.domain.alerts`: raising and clearing a run's alerts;
- :mod:`~governance_core.domain.risk`: the risk of runs and spans, the ``risk_critical`` alert;
- :mod:`~governance_core.domain.insights`: what a run read adds (quality summaries, cost, risk);
- :mod:`~governance_core.domain.sensitive_values` and
  :mod:`~governance_core.domain.supplied_ids`.

Handlers in :mod:`governance_core.operations` call them; nothing here imports an operation
module.
"""

__all__: list[str] = []
