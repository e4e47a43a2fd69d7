"""Data risk: declarations, rulesets and the risk score of a run (decisions 9).

Everything here is a pure function of plain values. A span type (or an alert or quality
schema) declares a ``data_risk`` object; a risk profile holds a :class:`Ruleset`; the risk score
of an instance is computed from the per-type span counts of the run, never from the spans
themselves, so it costs the same at 10 or 100,000 spans and does not depend on their order.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from decimal import Decimal
from types import MappingProxyType
from typing import Any, Final

import attrs

from governance_core.errors import FieldErrors, InvalidValue

__all__ = [
    "ACTIONS",
    "ACTION_VALUES",
    "CATEGORY_VALUES",
    "CLASSIFICATIONS",
    "DATA_CATEGORIES",
    "DATA_RISK_MEMBERS",
    "DEFAULT_RULESET",
    "MAX_RULESET_NUMBER",
    "RISK_LEVELS",
    "Ruleset",
    "is_assessable",
    "normalize_data_risk",
    "parse_ruleset",
    "risk_level",
    "score_run",
    "type_score",
]

DATA_CATEGORIES: Final[tuple[str, ...]] = (
    "personal_identifiers",
    "contact_information",
    "financial_information",
    "health_and_medical",
    "criminal_justice",
    "authentication_and_secrets",
    "organisational_confidential",
    "minors_data",
    "location_and_tracking",
    "behavioural_and_inferred",
    "gdpr_racial_or_ethnic_origin",
    "gdpr_political_opinions",
    "gdpr_religious_or_philosophical_beliefs",
    "gdpr_trade_union_membership",
    "gdpr_genetic_data",
    "gdpr_biometric_for_identification",
    "gdpr_sex_life_or_sexual_orientation",
)
"""The 17 data categories, in the interface's canonical order."""

ACTIONS: Final[tuple[str, ...]] = (
    "create_data",
    "read_data",
    "update_data",
    "destroy_data",
    "financial_transactions",
    "external_communication",
)
"""The six actions of an action profile, in the interface's canonical order."""

CLASSIFICATIONS: Final[tuple[str, ...]] = (
    "unknown",
    "public",
    "internal",
    "confidential",
    "restricted",
    "secret",
)
"""Classification levels from lowest to highest; ``unknown`` ranks lowest."""

RISK_LEVELS: Final[tuple[str, ...]] = ("low", "medium", "high", "critical")
"""Risk levels from lowest to highest."""

ACTION_VALUES: Final[tuple[str, ...]] = ("unknown", "allowed", "disallowed")
"""Values an action of an action profile may take."""

CATEGORY_VALUES: Final[tuple[str, ...]] = ("unknown", "included", "excluded")
"""Values a data category flag may take."""

DATA_RISK_MEMBERS: Final[tuple[str, ...]] = (
    "action_profile",
    "params_data_categories",
    "result_data_categories",
)
"""The three members of a ``data_risk`` object."""

MAX_RULESET_NUMBER: Final[Decimal] = Decimal(1_000_000_000)
"""Largest weight, multiplier or threshold a ruleset accepts; keeps scores far from overflow."""

_CATEGORY_MEMBERS: Final = ("params_data_categories", "result_data_categories")
_CLASSIFICATION: Final = "classification"
_THRESHOLDS: Final = ("medium", "high", "critical")
_RULESET_MEMBERS: Final = ("category_weights", "action_multipliers", "thresholds")
_CLASSIFICATION_RANK: Final = {name: rank for rank, name in enumerate(CLASSIFICATIONS)}
_ZERO: Final = Decimal(0)


def _choices(values: Iterable[str]) -> str:
    return ", ".join(values)


# --------------------------------------------------------------------------- data_risk


def normalize_data_risk(value: object) -> dict[str, dict[str, str]] | None:
    """Validate a ``data_risk`` declaration and return it with every key present.

    ``None`` stays ``None`` (the type declares nothing). Otherwise ``value`` must be an object
    whose members are ``action_profile`` (actions: unknown, allowed, disallowed),
    ``params_data_categories`` and ``result_data_categories`` (categories: unknown, included,
    excluded; ``classification``: one of :data:`CLASSIFICATIONS`). Omitted keys, and keys or
    members given as ``null``, are ``unknown``. Keys come back in canonical order.

    Raises :class:`~governance_core.errors.ValidationErrors` naming each bad entry relative
    to the data_risk object (``action_profile -> read_data``), every bad entry reported, with
    unknown keys as ``invalid_value``; callers nest it under their own field. A ``value`` that is
    not an object at all raises :class:`~governance_core.errors.InvalidValue`.
    """
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise InvalidValue(
            "data_risk must be an object with members " + _choices(DATA_RISK_MEMBERS)
        )
    errors = FieldErrors()
    for key in value:
        if key not in DATA_RISK_MEMBERS:
            errors.invalid(
                str(key), f"unknown data_risk member; expected {_choices(DATA_RISK_MEMBERS)}"
            )
    action_keys = {action: ACTION_VALUES for action in ACTIONS}
    category_keys: dict[str, tuple[str, ...]] = {c: CATEGORY_VALUES for c in DATA_CATEGORIES}
    category_keys[_CLASSIFICATION] = CLASSIFICATIONS
    result = {
        "action_profile": _normalize_member(
            value.get("action_profile"), "action_profile", action_keys, errors
        ),
    }
    for member in _CATEGORY_MEMBERS:
        result[member] = _normalize_member(value.get(member), member, category_keys, errors)
    errors.raise_if_any()
    return result


def _normalize_member(
    value: object,
    member: str,
    allowed: Mapping[str, tuple[str, ...]],
    errors: FieldErrors,
) -> dict[str, str]:
    normalized = dict.fromkeys(allowed, "unknown")
    if value is None:
        return normalized
    if not isinstance(value, Mapping):
        errors.invalid(member, "must be an object with keys " + _choices(allowed))
        return normalized
    for key, entry in value.items():
        if key not in allowed:
            errors.invalid((member, str(key)), f"unknown key; expected one of {_choices(allowed)}")
        elif entry is None:
            continue
        elif entry not in allowed[key]:
            errors.invalid(
                (member, key), f"{entry!r} is not allowed; expected one of {_choices(allowed[key])}"
            )
        else:
            normalized[key] = entry
    return normalized


def is_assessable(data_risk: Mapping[str, Any] | None) -> bool:
    """Whether a data_risk declares anything: any value other than ``unknown``."""
    if not data_risk:
        return False
    for member in DATA_RISK_MEMBERS:
        entries = data_risk.get(member)
        if (type(entries) is dict or isinstance(entries, Mapping)) and any(
            v != "unknown" for v in entries.values()
        ):
            return True
    return False


def _entries(data_risk: Mapping[str, Any], member: str) -> Mapping[str, Any]:
    entries = data_risk.get(member)
    return entries if type(entries) is dict or isinstance(entries, Mapping) else {}


def _included_categories(data_risk: Mapping[str, Any] | None) -> set[str]:
    if not data_risk:
        return set()
    return {
        category
        for member in _CATEGORY_MEMBERS
        for category in DATA_CATEGORIES
        if _entries(data_risk, member).get(category) == "included"
    }


def _allowed_actions(data_risk: Mapping[str, Any] | None) -> set[str]:
    if not data_risk:
        return set()
    profile = _entries(data_risk, "action_profile")
    return {action for action in ACTIONS if profile.get(action) == "allowed"}


def _classification_rank(data_risk: Mapping[str, Any] | None) -> int:
    if not data_risk:
        return 0
    ranks = [0]
    for member in _CATEGORY_MEMBERS:
        level = _entries(data_risk, member).get(_CLASSIFICATION)
        if isinstance(level, str):
            ranks.append(_CLASSIFICATION_RANK.get(level, 0))
    return max(ranks)


# --------------------------------------------------------------------------- rulesets


def _freeze_weights(value: Mapping[str, Decimal | None]) -> Mapping[str, Decimal | None]:
    return MappingProxyType({key: value.get(key) for key in DATA_CATEGORIES})


def _freeze_multipliers(value: Mapping[str, Decimal | None]) -> Mapping[str, Decimal | None]:
    return MappingProxyType({key: value.get(key) for key in ACTIONS})


@attrs.frozen
class Ruleset:
    """How a risk profile turns data-risk declarations into scores and levels.

    ``category_weights`` maps every data category and ``action_multipliers`` every action to a
    non-negative Decimal or ``None`` (counts 0); keys left out of the mappings given to the
    constructor are ``None``. ``0 < medium_threshold < high_threshold < critical_threshold``.
    Build one from untrusted input with :func:`parse_ruleset`.
    """

    category_weights: Mapping[str, Decimal | None] = attrs.field(converter=_freeze_weights)
    action_multipliers: Mapping[str, Decimal | None] = attrs.field(
        converter=_freeze_multipliers
    )
    medium_threshold: Decimal
    high_threshold: Decimal
    critical_threshold: Decimal

    def to_json(self) -> dict[str, Any]:
        """Return the ruleset in the interface's JSON form, every key present, Decimal numbers."""
        return {
            "category_weights": dict(self.category_weights),
            "action_multipliers": dict(self.action_multipliers),
            "thresholds": {
                "medium": self.medium_threshold,
                "high": self.high_threshold,
                "critical": self.critical_threshold,
            },
        }


def parse_ruleset(value: object) -> Ruleset:
    """Validate a ruleset given as JSON and return it as a :class:`Ruleset`.

    Rules (decisions 9, and where it is silent):

    - ``value`` is an object with exactly the members ``category_weights``,
      ``action_multipliers`` and ``thresholds``; each is required and must be an object. An
      unknown member or key is ``invalid_value`` (a typo would otherwise silently score 0).
    - A weight or multiplier is a number ``>= 0`` or ``null``; ``null`` and a key left out
      both count 0. Booleans and strings are not numbers.
    - ``thresholds`` needs ``medium``, ``high`` and ``critical``, each a number with
      ``0 < medium < high < critical``; an ordering fault is reported on the larger of the
      two thresholds (``thresholds -> high`` when high <= medium).
    - Every number is at most :data:`MAX_RULESET_NUMBER`; floats are read through their
      shortest decimal text, so ``1.1`` is ``Decimal("1.1")``.

    A :class:`Ruleset` passes through unchanged. Errors are raised together as
    :class:`~governance_core.errors.ValidationErrors` with paths relative to the ruleset
    (``category_weights -> health_and_medical``, ``thresholds -> high``); a ``value`` that is
    not an object raises :class:`~governance_core.errors.InvalidValue`.
    """
    if isinstance(value, Ruleset):
        return value
    if not isinstance(value, Mapping):
        raise InvalidValue("ruleset must be an object with members " + _choices(_RULESET_MEMBERS))
    errors = FieldErrors()
    for key in value:
        if key not in _RULESET_MEMBERS:
            errors.invalid(
                str(key), f"unknown ruleset member; expected {_choices(_RULESET_MEMBERS)}"
            )
    weights = _parse_number_map(value, "category_weights", DATA_CATEGORIES, errors)
    multipliers = _parse_number_map(value, "action_multipliers", ACTIONS, errors)
    thresholds = _parse_thresholds(value, errors)
    errors.raise_if_any()
    return Ruleset(
        category_weights=weights,
        action_multipliers=multipliers,
        medium_threshold=thresholds["medium"],
        high_threshold=thresholds["high"],
        critical_threshold=thresholds["critical"],
    )


def _parse_number(value: object) -> Decimal | str:
    """Return the value as a Decimal, or a message saying why it is not acceptable."""
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return "must be a number"
    if isinstance(value, float):
        if not math.isfinite(value):
            return "must be a finite number"
        number = Decimal(repr(value))
    else:
        number = Decimal(value)
    if not number.is_finite():
        return "must be a finite number"
    if number > MAX_RULESET_NUMBER:
        return f"must be at most {MAX_RULESET_NUMBER}"
    return number


def _parse_number_map(
    ruleset: Mapping[str, Any], member: str, keys: tuple[str, ...], errors: FieldErrors
) -> dict[str, Decimal | None]:
    result: dict[str, Decimal | None] = dict.fromkeys(keys)
    value = ruleset.get(member)
    if value is None:
        errors.required(member, f"{member} is required (an object; missing keys count 0)")
        return result
    if not isinstance(value, Mapping):
        errors.invalid(member, "must be an object with keys " + _choices(keys))
        return result
    for key, entry in value.items():
        if key not in keys:
            errors.invalid((member, str(key)), f"unknown key; expected one of {_choices(keys)}")
            continue
        if entry is None:
            continue
        number = _parse_number(entry)
        if isinstance(number, str):
            errors.invalid((member, key), f"{number} >= 0, or null")
        elif number < 0:
            errors.invalid((member, key), "must be >= 0, or null")
        else:
            result[key] = number
    return result


def _parse_thresholds(ruleset: Mapping[str, Any], errors: FieldErrors) -> dict[str, Decimal]:
    placeholder = {"medium": Decimal(1), "high": Decimal(2), "critical": Decimal(3)}
    value = ruleset.get("thresholds")
    if value is None:
        errors.required("thresholds", "thresholds is required (medium, high, critical)")
        return placeholder
    if not isinstance(value, Mapping):
        errors.invalid("thresholds", "must be an object with keys medium, high, critical")
        return placeholder
    for key in value:
        if key not in _THRESHOLDS:
            errors.invalid(("thresholds", str(key)), "unknown key; expected medium, high, critical")
    parsed: dict[str, Decimal] = {}
    for key in _THRESHOLDS:
        if value.get(key) is None:
            errors.required(("thresholds", key), f"thresholds.{key} is required")
            continue
        number = _parse_number(value[key])
        if isinstance(number, str):
            errors.invalid(("thresholds", key), f"{number} > 0")
        elif number <= 0:
            errors.invalid(("thresholds", key), "must be > 0")
        else:
            parsed[key] = number
    for lower, upper in (("medium", "high"), ("high", "critical")):
        if lower in parsed and upper in parsed and parsed[upper] <= parsed[lower]:
            errors.invalid(("thresholds", upper), f"must be greater than thresholds.{lower}")
    return {**placeholder, **parsed}


DEFAULT_RULESET: Final[Ruleset] = Ruleset(
    category_weights={
        # Decisions 9's worked example: identifiers name a person outright.
        "personal_identifiers": Decimal(8),
        # Decisions 9's worked example: reachable, but rarely harmful alone.
        "contact_information": Decimal(4),
        # Account and card data enable fraud directly.
        "financial_information": Decimal(8),
        # GDPR article 9 special category; harm from disclosure is severe and lasting.
        "health_and_medical": Decimal(10),
        # GDPR article 10 data; disclosure causes stigma and legal exposure.
        "criminal_justice": Decimal(10),
        # Credentials and keys open every other category at once.
        "authentication_and_secrets": Decimal(10),
        # Trade secrets and internal plans: business harm, not harm to people.
        "organisational_confidential": Decimal(5),
        # Children get extra protection in GDPR (article 8) and COPPA.
        "minors_data": Decimal(10),
        # Movements reveal home, work and habits; enables stalking.
        "location_and_tracking": Decimal(6),
        # Profiles and inferences: sensitive in aggregate, indirect alone.
        "behavioural_and_inferred": Decimal(4),
        # The remaining rows are GDPR article 9 special categories: the highest weight.
        "gdpr_racial_or_ethnic_origin": Decimal(10),
        "gdpr_political_opinions": Decimal(10),
        "gdpr_religious_or_philosophical_beliefs": Decimal(10),
        "gdpr_trade_union_membership": Decimal(10),
        "gdpr_genetic_data": Decimal(10),
        "gdpr_biometric_for_identification": Decimal(10),
        "gdpr_sex_life_or_sexual_orientation": Decimal(10),
    },
    action_multipliers={
        # Writing new records spreads the data to one more place.
        "create_data": Decimal("1.5"),
        # The baseline, and decisions 9's worked example.
        "read_data": Decimal("1.0"),
        # Changing records can corrupt them; reversible with backups.
        "update_data": Decimal("1.5"),
        # Deleting is irreversible.
        "destroy_data": Decimal("3.0"),
        # Moving money is irreversible and directly harmful.
        "financial_transactions": Decimal("4.0"),
        # Data leaving the organisation cannot be called back.
        "external_communication": Decimal("3.0"),
    },
    # The run total reaches medium after a couple of reads of identifying data, high after a
    # dozen or so, critical (which raises an alert) after dozens of sensitive operations.
    medium_threshold=Decimal(20),
    high_threshold=Decimal(100),
    critical_threshold=Decimal(500),
)
"""The ruleset of every account's default risk profile."""


# --------------------------------------------------------------------------- scoring


def type_score(data_risk: Mapping[str, Any] | None, ruleset: Ruleset) -> Decimal:
    """Score one span of a type: the category weight sum times the action multiplier sum.

    Categories count once whether included in params, result or both; ``null`` weights and
    multipliers count 0; a type without data_risk, or declaring only unknown, scores 0.
    """
    weight = sum(
        (ruleset.category_weights.get(c) or _ZERO for c in _included_categories(data_risk)),
        _ZERO,
    )
    multiplier = sum(
        (ruleset.action_multipliers.get(a) or _ZERO for a in _allowed_actions(data_risk)),
        _ZERO,
    )
    return weight * multiplier


def risk_level(score: Decimal, ruleset: Ruleset) -> str:
    """Return the level of a score: each threshold is the lowest score of its level."""
    if score >= ruleset.critical_threshold:
        return "critical"
    if score >= ruleset.high_threshold:
        return "high"
    if score >= ruleset.medium_threshold:
        return "medium"
    return "low"


def score_run(
    type_counts: Mapping[str, int],
    data_risks: Mapping[str, Mapping[str, Any] | None],
    ruleset: Ruleset,
) -> dict[str, Any]:
    """Compute the instance's ``risk_score`` object from its per-type activity span counts.

    ``type_counts`` maps span type name to how many activity spans of it ran; types with a
    count of 0 or less did not run and are ignored. ``data_risks`` maps type name to its
    normalized data_risk (a type missing there declares nothing). Numbers are Decimals.
    ``per_type`` is sorted by schema name and lists every type that ran; its ``risk_level``
    buckets the score of one invocation and is given even for types that declare nothing.
    ``risk_level`` of the run is null unless some type that ran declares something;
    ``peak_classification`` is null only when no span ran.
    """
    ran = sorted((name, count) for name, count in type_counts.items() if count > 0)
    categories: set[str] = set()
    actions: set[str] = set()
    any_assessable = False
    peak = 0
    total = _ZERO
    per_type: list[dict[str, Any]] = []
    for name, count in ran:
        data_risk = data_risks.get(name)
        categories |= _included_categories(data_risk)
        actions |= _allowed_actions(data_risk)
        any_assessable = any_assessable or is_assessable(data_risk)
        peak = max(peak, _classification_rank(data_risk))
        score = type_score(data_risk, ruleset)
        contribution = score * count
        total += contribution
        per_type.append(
            {
                "schema_name": name,
                "count": count,
                "type_score": score,
                "total_contribution": contribution,
                "risk_level": risk_level(score, ruleset),
            }
        )
    return {
        "all_data_categories": [c for c in DATA_CATEGORIES if c in categories],
        "allowed_actions": [a for a in ACTIONS if a in actions],
        "any_assessable": any_assessable,
        "critical_threshold": ruleset.critical_threshold,
        "peak_classification": CLASSIFICATIONS[peak] if ran else None,
        "risk_level": risk_level(total, ruleset) if any_assessable else None,
        "total_score": total,
        "per_type": per_type,
    }
