"""Pure rules: state tables, risk, cost, templates, sensitive values, available actions."""

__all__: list[str] = []
