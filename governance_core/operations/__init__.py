"""Operation modules, one per family; importing this package registers every operation."""

from governance_core.operations import accounts, api_tokens, risk_profiles, teams

__all__ = ["accounts", "api_tokens", "risk_profiles", "teams"]
