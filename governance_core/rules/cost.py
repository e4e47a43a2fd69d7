"""Token usage and cost (decisions 10): reading usage from span payloads, pricing it.

:func:`extract_usage` reads the token counts, model and provider of one activity span.
Aggregates are kept per (model, provider) as :class:`TokenGroup`; :func:`cost_breakdown`
prices them with a :class:`PricingCatalogue` into the instance's ``cost_breakdown`` object.
The catalogue is a snapshot of LiteLLM's public price list shipped as package data
(``governance_core/data/model_prices.json``, refreshed by ``scripts/update_pricing.py``),
so pricing works offline; an override table prices private or renamed models.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Iterable, Mapping
from decimal import Decimal
from importlib import resources
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import attrs

from governance_core.errors import FieldErrors, InvalidValue

__all__ = [
    "MAX_TOKEN_COUNT",
    "UNKNOWN_MODEL",
    "ModelPrice",
    "PricingCatalogue",
    "TokenGroup",
    "Usage",
    "cost_breakdown",
    "extract_usage",
    "load_catalogue",
    "resolved_provider",
]

MAX_TOKEN_COUNT: Final = 2**53 - 1
"""Largest token count read from a payload; larger ones are ignored (JSON-safe integers)."""

MAX_NAME_LENGTH: Final = 256
"""Longest model or provider name read from a payload; longer strings are ignored."""

UNKNOWN_MODEL: Final = "unknown"
"""The group name of usage whose span named no model."""

_SNAPSHOT: Final = "data/model_prices.json"
_ZERO: Final = Decimal(0)


# --------------------------------------------------------------------------- usage


@attrs.frozen
class TokenGroup:
    """Token totals of one (model, provider) pair, as kept in an instance's aggregates."""

    model_name: str
    provider: str | None
    input: int = 0
    output: int = 0
    cache_read: int = 0


@attrs.frozen
class Usage:
    """The token usage of one span.

    ``input`` counts uncached input tokens and ``cache_read`` the cached ones, whichever form
    the span reported. ``model`` and ``provider`` are None when the span names none.
    """

    model: str | None
    provider: str | None
    input: int
    output: int
    cache_read: int

    def token_group(self) -> TokenGroup:
        """Return this usage as a group, named :data:`UNKNOWN_MODEL` when no model was given."""
        return TokenGroup(
            model_name=self.model or UNKNOWN_MODEL,
            provider=self.provider,
            input=self.input,
            output=self.output,
            cache_read=self.cache_read,
        )


def _ways(parts: tuple[str, ...]) -> tuple[tuple[str, ...], ...]:
    """Every way to follow a dotted path whose dots may be literal in keys or nesting.

    In lookup order: the longest key first at each level, so ``a.b.c`` is followed as the key
    ``a.b.c``, then ``a.b`` and ``c``, then ``a`` and ``b.c``, then ``a``, ``b`` and ``c``.
    """
    if not parts:
        return ((),)
    return tuple(
        (".".join(parts[:cut]), *rest)
        for cut in range(len(parts), 0, -1)
        for rest in _ways(parts[cut:])
    )


_Ways = tuple[tuple[str, ...], ...]


def _routes(dotted: str) -> _Ways:
    return _ways(tuple(dotted.split(".")))


def _first_keys(*routes: _Ways) -> frozenset[str]:
    """Every top-level key one of ``routes`` starts with: a payload holding none is passed over."""
    return frozenset(way[0] for ways in routes for way in ways)


@attrs.frozen
class _Form:
    """A form of token counts (decisions 10), each path's ways worked out once."""

    input: _Ways
    output: _Ways
    cache_read: _Ways
    input_includes_cached: bool
    first_keys: frozenset[str]

    @classmethod
    def of(cls, input: str, output: str, cache_read: str, *, input_includes_cached: bool) -> _Form:
        """The form whose counts stand at three dotted paths."""
        ways = (_routes(input), _routes(output), _routes(cache_read))
        return cls(*ways, input_includes_cached, _first_keys(*ways))


# Decisions 10's forms, in the order they are looked for within one payload.
_FORMS: Final = (
    _Form.of(
        "token_usage.prompt_tokens",
        "token_usage.completion_tokens",
        "token_usage.prompt_tokens_details.cached_tokens",
        input_includes_cached=True,
    ),
    _Form.of(
        "usage.input_tokens",
        "usage.output_tokens",
        "usage.cache_read_input_tokens",
        input_includes_cached=False,
    ),
    _Form.of("tokens.input", "tokens.output", "tokens.cacheRead", input_includes_cached=False),
    _Form.of(
        "gen_ai.usage.input_tokens",
        "gen_ai.usage.output_tokens",
        "gen_ai.usage.cache_read.input_tokens",
        input_includes_cached=True,
    ),
)
_USAGE_KEYS: Final = frozenset().union(*(form.first_keys for form in _FORMS))
_MODEL_PATHS: Final = tuple(_routes(path) for path in (
    "model",
    "model_name",
    "gen_ai.request.model",
    "inputs.ai.model.id",
    "inputs.langchain.model.name",
))
_MODEL_KEYS: Final = _first_keys(*_MODEL_PATHS)
_PROVIDER_PATHS: Final = tuple(
    _routes(path) for path in ("provider", "gen_ai.provider.name", "inputs.ai.model.provider")
)
_PROVIDER_KEYS: Final = _first_keys(*_PROVIDER_PATHS)
_MISSING: Final = object()


def _follow(value: object, ways: _Ways) -> object:
    """Follow a dotted path into ``value`` the first way that leads somewhere (:func:`_ways`)."""
    for way in ways:
        found = value
        for key in way:
            if (type(found) is dict or isinstance(found, Mapping)) and key in found:
                found = found[key]
            else:
                break
        else:
            return found
    return _MISSING


def _count(value: object) -> int | None:
    """Read a token count; anything but a whole number in 0..MAX_TOKEN_COUNT is no count."""
    if type(value) is int:
        # The usual case, by exact type (a bool is no count).
        return value if 0 <= value <= MAX_TOKEN_COUNT else None
    if isinstance(value, bool):
        return None
    if isinstance(value, float):
        if not math.isfinite(value) or not value.is_integer():
            return None
        value = int(value)
    elif isinstance(value, Decimal):
        if not value.is_finite() or value != value.to_integral_value():
            return None
        value = int(value)
    if not isinstance(value, int) or not 0 <= value <= MAX_TOKEN_COUNT:
        return None
    return value


def _name(payload: object, paths: tuple[_Ways, ...], first_keys: frozenset[str]) -> str | None:
    if (type(payload) is dict or isinstance(payload, Mapping)) and payload.keys().isdisjoint(
        first_keys
    ):
        return None
    for ways in paths:
        value = _follow(payload, ways)
        if isinstance(value, str) and value.strip() and len(value) <= MAX_NAME_LENGTH:
            return value.strip()
    return None


def _counts(payload: object) -> tuple[int, int, int] | None:
    if type(payload) is not dict and not isinstance(payload, Mapping):
        return None
    keys = payload.keys()
    if keys.isdisjoint(_USAGE_KEYS):
        return None
    for form in _FORMS:
        if keys.isdisjoint(form.first_keys):
            # None of the form's paths can start in this payload.
            continue
        input_tokens = _count(_follow(payload, form.input))
        output_tokens = _count(_follow(payload, form.output))
        cache_read = _count(_follow(payload, form.cache_read))
        if input_tokens is None and output_tokens is None and cache_read is None:
            continue
        input_tokens, output_tokens, cache_read = (
            input_tokens or 0, output_tokens or 0, cache_read or 0
        )
        if form.input_includes_cached:
            input_tokens = max(input_tokens - cache_read, 0)
        return input_tokens, output_tokens, cache_read
    return None


def extract_usage(payload: object, result_payload: object) -> Usage | None:
    """Read a span's token usage per decisions 10, or None when it reports none.

    ``result_payload`` is searched before ``payload``; within one payload the forms are tried
    in the order ``token_usage``, ``usage``, ``tokens``, OpenTelemetry ``gen_ai.usage.*``
    (dotted keys literal, nested, or mixed). The first form with at least one readable count
    wins; forms are never summed. A count that is not a whole number from 0 to
    :data:`MAX_TOKEN_COUNT` is ignored (read as 0 when another count of its form is readable).
    ``token_usage.prompt_tokens`` and ``gen_ai.usage.input_tokens`` include cached tokens, so
    the cached count is subtracted from them (floored at 0).

    The model and the provider are each looked for first in the payload where the usage was
    found, then in the other one: the Python LangChain client reports usage in
    ``result_payload`` and the model in ``payload``. Names must be non-empty strings of at
    most :data:`MAX_NAME_LENGTH` characters. This function never raises on odd payloads:
    span writes must not fail over cost.
    """
    for source, other in ((result_payload, payload), (payload, result_payload)):
        counts = _counts(source)
        if counts is None:
            continue
        return Usage(
            model=_name(source, _MODEL_PATHS, _MODEL_KEYS)
            or _name(other, _MODEL_PATHS, _MODEL_KEYS),
            provider=_name(source, _PROVIDER_PATHS, _PROVIDER_KEYS)
            or _name(other, _PROVIDER_PATHS, _PROVIDER_KEYS),
            input=counts[0],
            output=counts[1],
            cache_read=counts[2],
        )
    return None


# --------------------------------------------------------------------------- pricing


@attrs.frozen
class ModelPrice:
    """What the catalogue knows of one model; USD per token, ``None`` where unknown."""

    input_cost_per_token: Decimal | None = None
    output_cost_per_token: Decimal | None = None
    cache_read_input_token_cost: Decimal | None = None
    context_limit: int | None = None
    provider: str | None = None


def _freeze_models(models: Mapping[str, ModelPrice]) -> Mapping[str, ModelPrice]:
    return MappingProxyType(dict(models))


def _fold_names(models: Mapping[str, ModelPrice]) -> Mapping[str, str]:
    folded: dict[str, str] = {}
    for name in sorted(models):
        folded.setdefault(name.casefold(), name)
    return MappingProxyType(folded)


@attrs.frozen
class PricingCatalogue:
    """Model prices by model name, with the version of the catalogue they come from."""

    version: str
    models: Mapping[str, ModelPrice] = attrs.field(converter=_freeze_models)
    _folded: Mapping[str, str] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(self, "_folded", _fold_names(self.models))

    def lookup(self, model: str, provider: str | None = None) -> ModelPrice | None:
        """Find a model's price, or None when the catalogue does not know it.

        Candidates, in order: the name as given, ``provider/model``, and the part after the
        last ``/`` (``my-gateway/gpt-4o`` finds ``gpt-4o``). All candidates are tried
        exactly first, then ignoring case.
        """
        model = model.strip()
        candidates = [model]
        if provider:
            candidates.append(f"{provider.strip()}/{model}")
        if "/" in model:
            candidates.append(model.rsplit("/", 1)[1])
        for name in candidates:
            if name in self.models:
                return self.models[name]
        for name in candidates:
            key = self._folded.get(name.casefold())
            if key is not None:
                return self.models[key]
        return None


_PRICE_FIELDS: Final = (
    "input_cost_per_token",
    "output_cost_per_token",
    "cache_read_input_token_cost",
)
_LIMIT_FIELDS: Final = ("context_limit", "max_input_tokens", "max_tokens")
_PROVIDER_FIELDS: Final = ("provider", "litellm_provider")
_OVERRIDE_FIELDS: Final = (*_PRICE_FIELDS, *_LIMIT_FIELDS, *_PROVIDER_FIELDS, "mode")


def _price(value: object) -> Decimal | None:
    if isinstance(value, bool) or not isinstance(value, (int, float, Decimal)):
        return None
    number = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
    return number if number.is_finite() and number >= 0 else None


def _limit(value: object) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        return None
    return value


def _entry_price(entry: Mapping[str, Any]) -> ModelPrice:
    """Build a price from a snapshot entry, skipping values it cannot read."""
    limit = _limit(entry.get("context_limit"))
    if limit is None:
        limit = _limit(entry.get("max_input_tokens"))
    if limit is None:
        limit = _limit(entry.get("max_tokens"))
    provider = entry.get("provider", entry.get("litellm_provider"))
    return ModelPrice(
        input_cost_per_token=_price(entry.get("input_cost_per_token")),
        output_cost_per_token=_price(entry.get("output_cost_per_token")),
        cache_read_input_token_cost=_price(entry.get("cache_read_input_token_cost")),
        context_limit=limit,
        provider=provider if isinstance(provider, str) else None,
    )


@functools.lru_cache(maxsize=1)
def _snapshot() -> PricingCatalogue:
    text = resources.files("governance_core").joinpath(_SNAPSHOT).read_text(encoding="utf-8")
    data = json.loads(text, parse_float=Decimal)
    models = {
        name: _entry_price(entry)
        for name, entry in data["models"].items()
        if isinstance(entry, Mapping)
    }
    return PricingCatalogue(version=str(data["version"]), models=models)


def _apply_override(
    base: ModelPrice | None, entry: Mapping[str, Any], errors: FieldErrors, name: str
) -> ModelPrice:
    fields = attrs.asdict(base) if base is not None else attrs.asdict(ModelPrice())
    for key, value in entry.items():
        path = (name, str(key))
        if key not in _OVERRIDE_FIELDS:
            errors.invalid(path, "unknown field; expected one of " + ", ".join(_OVERRIDE_FIELDS))
        elif key == "mode":
            continue
        elif key in _PRICE_FIELDS:
            price = _price(value)
            if value is not None and price is None:
                errors.invalid(path, "must be a number >= 0 (USD per token), or null")
            fields[key] = price
        elif key in _LIMIT_FIELDS:
            limit = _limit(value)
            if value is not None and limit is None:
                errors.invalid(path, "must be a positive integer, or null")
            fields["context_limit"] = limit
        else:
            if value is not None and not isinstance(value, str):
                errors.invalid(path, "must be a string, or null")
                continue
            fields["provider"] = value
    return ModelPrice(**fields)


def load_catalogue(
    overrides: Mapping[str, Any] | str | os.PathLike[str] | None = None,
) -> PricingCatalogue:
    """Return the packaged price snapshot, with an override table applied on top.

    ``overrides`` maps a model name to fields of its price: ``input_cost_per_token``,
    ``output_cost_per_token``, ``cache_read_input_token_cost`` (USD per token, number or
    null), ``context_limit`` (or LiteLLM's ``max_input_tokens`` / ``max_tokens``) and
    ``provider`` (or ``litellm_provider``). It is a mapping or the path of a JSON file holding
    one. An override of a name the snapshot has changes only the fields it gives; a new name
    adds a model. With overrides the version reads ``<snapshot version>+overrides``. Bad
    overrides raise :class:`~governance_core.errors.ValidationErrors` naming
    ``model -> field``. The snapshot itself is read once per process.
    """
    base = _snapshot()
    if overrides is None:
        return base
    if isinstance(overrides, Mapping):
        table: object = overrides
    else:
        table = json.loads(Path(overrides).read_text(encoding="utf-8"), parse_float=Decimal)
    if not isinstance(table, Mapping):
        raise InvalidValue("the pricing override table must map model names to objects")
    errors = FieldErrors()
    models = dict(base.models)
    for name, entry in table.items():
        if not isinstance(name, str) or not isinstance(entry, Mapping):
            errors.invalid(str(name), "must map a model name to an object of price fields")
            continue
        models[name] = _apply_override(base.models.get(name), entry, errors, name)
    errors.raise_if_any()
    return PricingCatalogue(version=f"{base.version}+overrides", models=models)


# --------------------------------------------------------------------------- breakdown


def _cost(tokens: int, price: ModelPrice | None, field: str) -> Decimal | None:
    if price is None:
        return None
    if tokens == 0:
        return _ZERO
    per_token: Decimal | None = getattr(price, field)
    if per_token is None:
        return None
    return per_token * tokens


def _sum_known(values: Iterable[Decimal | None]) -> Decimal | None:
    known = [value for value in values if value is not None]
    return sum(known, _ZERO) if known else None


def resolved_provider(
    model_name: str, provider: str | None, catalogue: PricingCatalogue
) -> str | None:
    """The provider a group is shown under: the one the span named, else the catalogue's.

    A span that names no provider (``gpt-4o`` alone) is attributed to the provider the
    catalogue lists for the model (LiteLLM's ``litellm_provider``, or an override's
    ``provider``); None when the catalogue does not know the model either.
    """
    if provider is not None:
        return provider
    price = catalogue.lookup(model_name)
    return price.provider if price is not None else None


def cost_breakdown(groups: Iterable[TokenGroup], catalogue: PricingCatalogue) -> dict[str, Any]:
    """Price token groups into the interface's ``cost_breakdown`` object.

    A group without a provider takes the catalogue's (:func:`resolved_provider`); groups
    with the same (model_name, provider) are then merged; the output has one group per
    pair, sorted by model name then provider (no provider first). Each cost is tokens times
    the catalogue's USD price per token, in Decimal (an embedding model's output price is 0,
    so embeddings cost their input tokens):

    - a model the catalogue does not know has every cost null (its tokens still count);
    - for a known model, a part with 0 tokens costs 0 even when its price is unknown, and a
      part with tokens but no price (often ``cache_read_input_token_cost``) is null: cached
      tokens are not priced as input, which would overstate some providers and understate
      none reliably;
    - a group's ``total_cost`` is the sum of its known costs, null when none is known; the
      top-level costs are the sums of the groups' known costs, null when none is known.

    ``pricing_version`` on every group names the catalogue version used. With no groups the
    totals are 0 and every cost is null.
    """
    merged: dict[tuple[str, str | None], list[int]] = {}
    for group in groups:
        provider = resolved_provider(group.model_name, group.provider, catalogue)
        totals = merged.setdefault((group.model_name, provider), [0, 0, 0])
        totals[0] += group.input
        totals[1] += group.output
        totals[2] += group.cache_read
    rows: list[dict[str, Any]] = []
    for (model_name, provider), (input_tokens, output_tokens, cache_read) in sorted(
        merged.items(), key=lambda item: (item[0][0], item[0][1] is not None, item[0][1] or "")
    ):
        price = catalogue.lookup(model_name, provider)
        input_cost = _cost(input_tokens, price, "input_cost_per_token")
        output_cost = _cost(output_tokens, price, "output_cost_per_token")
        cache_cost = _cost(cache_read, price, "cache_read_input_token_cost")
        rows.append(
            {
                "model_name": model_name,
                "provider": provider,
                "input": input_tokens,
                "output": output_tokens,
                "cache_read": cache_read,
                "input_cost": input_cost,
                "output_cost": output_cost,
                "cache_read_cost": cache_cost,
                "total_cost": _sum_known((input_cost, output_cost, cache_cost)),
                "context_limit": price.context_limit if price else None,
                "pricing_version": catalogue.version,
            }
        )
    return {
        "input": sum(row["input"] for row in rows),
        "output": sum(row["output"] for row in rows),
        "cache_read": sum(row["cache_read"] for row in rows),
        "input_cost": _sum_known(row["input_cost"] for row in rows),
        "output_cost": _sum_known(row["output_cost"] for row in rows),
        "cache_read_cost": _sum_known(row["cache_read_cost"] for row in rows),
        "total_cost": _sum_known(row["total_cost"] for row in rows),
        "groups": rows,
    }
