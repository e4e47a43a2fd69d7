"""Pure rules: state tables, risk, cost, templates, sensitive values, available actions."""
