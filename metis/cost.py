"""USD cost from token counts and a versioned price table (seed 000 §7, DESIGN.md 6).

Adapters report tokens only. Cost is computed here, after the fact, from a price table that
carries a ``pricing_version``, so stored usage can be repriced under any later table::

    from metis.cost import cost_of
    cost = cost_of(response.model, response.usage)      # the packaged metis/pricing.yaml
    print(cost.usd, cost.pricing_version)

    new = PriceTable.load("prices-2027.yaml")
    costs = new.reprice([(model, usage) for model, usage in stored])

Money is :class:`decimal.Decimal` throughout (rates are read from YAML through their decimal
text, never through binary floats), and every amount is rounded half-up to 1e-8 USD.

The formula is seed 000 §7.1's, over :class:`TokenUsage`, whose ``input_tokens`` counts only
uncached input::

    usd = (input * input_rate + output * output_rate
           + cached_input * cached_input_rate + cache_creation * cache_creation_rate) / 1e6
"""

from __future__ import annotations

import functools
import typing
from collections.abc import Iterable, Sequence
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
)
from pydantic_core import PydanticCustomError

from metis.errors import ConfigError, redact
from metis.model.response import TokenUsage

MILLION = Decimal(1_000_000)
QUANTUM = Decimal("1e-8")
PACKAGED_TABLE = "metis/pricing.yaml"


def _rate(value: Any) -> Any:
    """A rate from YAML: an int, a float (read through its shortest repr) or decimal text."""
    rate: Decimal | None = None
    if isinstance(value, int | float | str | Decimal) and not isinstance(value, bool):
        try:
            rate = Decimal(repr(value)) if isinstance(value, float) else Decimal(value)
        except InvalidOperation:
            rate = None
    if rate is None or not rate.is_finite():
        raise PydanticCustomError("rate_type", _RATE_ERROR.format("a number"), _got(value))
    if rate < 0:
        raise PydanticCustomError("rate_range", _RATE_ERROR.format("a number >= 0"), _got(value))
    return rate


_RATE_ERROR = "expected {} (USD per million tokens), got {{got}}"


def _got(value: Any) -> dict[str, str]:
    return {"got": _show(value)}


Rate = Annotated[Decimal, BeforeValidator(_rate)]


class ModelPrice(BaseModel):
    """One model's rates, USD per million tokens, as the table gives them.

    Price with :attr:`cached_input_rate` and :attr:`cache_creation_rate`, which apply the
    defaults (the input rate) to rates the table leaves out.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    input: Rate
    output: Rate
    cached_input: Rate | None = None
    cache_creation: Rate | None = None
    aliases: list[str] = Field(default_factory=list)

    _model: str = PrivateAttr(default="")

    @property
    def model(self) -> str:
        """The canonical id this entry is listed under in its table."""
        return self._model

    @property
    def cached_input_rate(self) -> Decimal:
        """Cache reads; the input rate when the table gives none."""
        return self.input if self.cached_input is None else self.cached_input

    @property
    def cache_creation_rate(self) -> Decimal:
        """Cache writes; the input rate when the table gives none."""
        return self.input if self.cache_creation is None else self.cache_creation


class Cost(BaseModel):
    """What one call cost: the total, its four parts and the table it was priced under."""

    model_config = ConfigDict(frozen=True)

    model: str
    """The price table entry used (its canonical id)."""
    usd: Decimal
    input_usd: Decimal
    output_usd: Decimal
    cached_input_usd: Decimal
    cache_creation_usd: Decimal
    pricing_version: str
    estimated: bool = False
    """Copied from the usage: the token counts were estimated, so is the cost."""

    @property
    def breakdown(self) -> dict[str, Decimal]:
        """USD per TokenUsage field."""
        return {
            "input_tokens": self.input_usd,
            "output_tokens": self.output_usd,
            "cached_input_tokens": self.cached_input_usd,
            "cache_creation_input_tokens": self.cache_creation_usd,
        }


class PriceTable(BaseModel):
    """A versioned price table: ``pricing_version``, ``currency: USD`` and ``models``.

    :meth:`price` finds a model by canonical id (``anthropic:claude-sonnet-4-5``), then by
    alias, then by the name after the ``provider:`` prefix among that provider's entries (so
    ``anthropic:claude-sonnet-4-5-20250929`` finds the entry aliased to the dated name); a
    name with no prefix matches when exactly one provider has it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    pricing_version: str = Field(min_length=1)
    currency: Literal["USD"] = "USD"
    models: dict[str, ModelPrice]
    source: str = "<inline>"

    _index: dict[str, str] = PrivateAttr(default_factory=dict)

    # Loading -------------------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | Path | None = None) -> PriceTable:
        """The table in ``path``, or the packaged ``metis/pricing.yaml``."""
        if path is None:
            text = (resources.files("metis") / "pricing.yaml").read_text(encoding="utf-8")
            source = PACKAGED_TABLE
        else:
            source = str(path)
            try:
                text = Path(path).read_text(encoding="utf-8")
            except OSError as exc:
                raise ConfigError(f"cannot read price table {source}: {exc.strerror}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"{source}: not valid YAML: {exc}") from None
        return cls.from_dict(data, source)

    @classmethod
    def from_dict(cls, data: Any, source: str = "<inline>") -> PriceTable:
        if not isinstance(data, dict):
            raise ConfigError(
                f"{source}: expected a mapping with pricing_version, currency and models, "
                f"got {_show(data)}"
            )
        if "source" in data:
            raise ConfigError(
                f"{source}: source: unknown key; expected one of: pricing_version, currency, models"
            )
        try:
            return cls.model_validate({**data, "source": source})
        except ValidationError as exc:
            raise config_error(exc, source, cls) from None

    def model_post_init(self, context: Any, /) -> None:
        for model_id, price in self.models.items():
            price._model = model_id
            self._index[model_id] = model_id
        for model_id, price in self.models.items():
            for alias in price.aliases:
                other = self._index.get(alias)
                if other is not None and other != model_id:
                    # Raised inside validation: config_error() prints it as it stands.
                    raise PydanticCustomError(
                        "config",
                        "models.{model}.aliases: '{alias}' already names {other}; expected "
                        "each alias to name one model",
                        {"model": model_id, "alias": alias, "other": other},
                    )
                self._index[alias] = model_id

    # Lookup and pricing --------------------------------------------------------------------

    def price(self, model: str) -> ModelPrice:
        """The rates for ``model``; :class:`ConfigError` naming the model and table if none."""
        return self.models[self.model_id(model)]

    def model_id(self, model: str) -> str:
        """The canonical id of the entry that prices ``model`` (found as :meth:`price` does)."""
        found = self._index.get(model)
        if found is None:
            found = self._by_wire_name(model)
        if found is None:
            raise ConfigError(
                f"no price for model {model!r} in {self.source} (pricing_version "
                f"{self.pricing_version}); add it under models: with input and output rates"
            )
        return found

    def _by_wire_name(self, model: str) -> str | None:
        provider, sep, name = model.partition(":")
        if not sep:
            provider, name = "", model
        matches = {
            model_id
            for key, model_id in self._index.items()
            if (key.partition(":")[2] if key == model_id else key) == name
            and (not sep or model_id.partition(":")[0] == provider)
        }
        if len(matches) > 1:
            raise ConfigError(
                f"model {model!r} matches several entries in {self.source}: "
                + ", ".join(sorted(matches))
                + "; expected a canonical provider:name id"
            )
        return matches.pop() if matches else None

    def cost(self, model: str, usage: TokenUsage) -> Cost:
        """Seed 000 §7.1's formula over ``usage``, at this table's rates for ``model``."""
        model_id = self.model_id(model)
        rates = self.models[model_id]
        parts = (
            Decimal(usage.input_tokens) * rates.input / MILLION,
            Decimal(usage.output_tokens) * rates.output / MILLION,
            Decimal(usage.cached_input_tokens) * rates.cached_input_rate / MILLION,
            Decimal(usage.cache_creation_input_tokens) * rates.cache_creation_rate / MILLION,
        )
        return Cost(
            model=model_id,
            usd=_money(sum(parts, Decimal(0))),
            input_usd=_money(parts[0]),
            output_usd=_money(parts[1]),
            cached_input_usd=_money(parts[2]),
            cache_creation_usd=_money(parts[3]),
            pricing_version=self.pricing_version,
            estimated=usage.estimated,
        )

    def reprice(self, records: Iterable[tuple[str, TokenUsage]]) -> list[Cost]:
        """Price stored ``(model, usage)`` pairs under this table, in order."""
        return [self.cost(model, usage) for model, usage in records]


def _money(amount: Decimal) -> Decimal:
    return amount.quantize(QUANTUM, rounding=ROUND_HALF_UP)


@functools.cache
def default_price_table() -> PriceTable:
    """The packaged table, loaded once."""
    return PriceTable.load()


def cost_of(model: str, usage: TokenUsage, table: PriceTable | None = None) -> Cost:
    """The cost of one call's ``usage`` on ``model`` (the packaged table unless given one)."""
    return (table or default_price_table()).cost(model, usage)


# Config errors that name the file, the key and what was expected ---------------------------

_EXPECTED = {
    "string_type": "expected a string",
    "float_type": "expected a number",
    "float_parsing": "expected a number",
    "decimal_type": "expected a number",
    "decimal_parsing": "expected a number",
    "int_type": "expected a whole number",
    "int_parsing": "expected a whole number",
    "int_from_float": "expected a whole number",
    "bool_type": "expected true or false",
    "bool_parsing": "expected true or false",
    "dict_type": "expected a mapping",
    "list_type": "expected a list",
    "model_type": "expected a mapping",
    "model_attributes_type": "expected a mapping",
}


def config_error(
    exc: ValidationError,
    source: str,
    schema: type[BaseModel] | None = None,
    prefix: Sequence[str | int] = (),
) -> ConfigError:
    """A ConfigError for ``exc`` of the form ``<source>: dotted.key: expected ..., got ...``.

    ``schema`` (the model that was validated) lets an unknown key's error list the keys
    allowed there; ``prefix`` is prepended to every key path.
    """
    problems = []
    for err in exc.errors():
        loc = [*prefix, *err["loc"]]
        if any(str(part) in _SECRETS for part in loc):
            err = {**err, "input": _HIDDEN}
        where = ".".join(str(part) for part in loc)
        explained = _explain(err, schema, list(err["loc"]))
        problems.append(f"{where}: {explained}" if where else explained)
    return ConfigError(redact(f"{source}: " + "; ".join(problems)))


def _explain(err: Any, schema: type[BaseModel] | None, loc: list[Any]) -> str:
    kind = err["type"]
    ctx = err.get("ctx") or {}
    if kind == "config":
        return str(err["msg"])
    if kind == "missing":
        return "required key is missing"
    if kind == "extra_forbidden":
        allowed = _allowed_keys(schema, loc[:-1])
        return "unknown key" + (f"; expected one of: {', '.join(allowed)}" if allowed else "")
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}, got {_show(err['input'])}"
    if kind in ("greater_than", "greater_than_equal", "less_than", "less_than_equal"):
        bound = next(iter(ctx.values()), "?")
        if isinstance(bound, float) and bound.is_integer():
            bound = int(bound)
        sign = {"greater_than": ">", "greater_than_equal": ">=", "less_than": "<"}.get(kind, "<=")
        return f"expected a number {sign} {bound}, got {_show(err['input'])}"
    if kind in ("string_too_short", "too_short"):
        return f"expected a non-empty value, got {_show(err['input'])}"
    if kind in _EXPECTED:
        return f"{_EXPECTED[kind]}, got {_show(err['input'])}"
    message = str(err["msg"])
    if kind == "value_error":
        message = message.removeprefix("Value error, ")
    if message.startswith("expected"):
        return message
    return f"{message[:1].lower()}{message[1:]}, got {_show(err['input'])}"


_SECRETS = frozenset({"api_key", "extra_headers"})  # values never echoed in errors
_HIDDEN = object()


def _show(value: Any) -> str:
    if value is _HIDDEN:
        return "a value not shown here"
    return "nothing" if value is None else repr(value)


def _allowed_keys(schema: type[BaseModel] | None, path: list[Any]) -> list[str]:
    """The field names of the model found by following ``path`` from ``schema``."""
    annotation: Any = schema
    for part in path:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            annotation = field.annotation if field else None
        elif typing.get_origin(annotation) is dict:
            annotation = typing.get_args(annotation)[1]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [name for name in annotation.model_fields if name not in ("source", "model")]
    return []


def _unwrap(annotation: Any) -> Any:
    """``X | None`` -> ``X``; ``Annotated[X, ...]`` -> ``X``."""
    while True:
        if typing.get_origin(annotation) is Annotated:
            annotation = typing.get_args(annotation)[0]
            continue
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if typing.get_origin(annotation) in (typing.Union, type(int | None)) and len(args) == 1:
            annotation = args[0]
            continue
        return annotation
