"""Risk profiles: the rulesets that turn data-risk declarations into scores."""

from __future__ import annotations

from governance_core.models.accounts import RiskProfile
from governance_core.registry import Context

__all__ = ["default_profile"]


def default_profile(ctx: Context) -> RiskProfile:
    """A new default profile for the caller's account, holding the library's default ruleset."""
    from governance_core.rules.risk import DEFAULT_RULESET

    return RiskProfile(
        id=ctx.new_id(), account_id=ctx.account_id, name="Default",
        description="The account's default risk profile", ruleset=DEFAULT_RULESET.to_json(),
        is_default=True, inserted_at=ctx.now, updated_at=ctx.now,
    )
