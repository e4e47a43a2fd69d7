"""Rules that span resource families, on typed models.

:mod:`~governance_core.domain.runs` (the run and its spans),
:mod:`~governance_core.domain.sensitive_values` and :mod:`~governance_core.domain.supplied_ids`.
Handlers in :mod:`governance_core.operations` call them; nothing here imports an operation
module.
"""

__all__: list[str] = []
