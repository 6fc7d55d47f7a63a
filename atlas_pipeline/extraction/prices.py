"""What tokens cost: a price table per model (``seeds/llm_prices.toml`` or ``ATLAS_LLM_PRICES``), and the cost of a
request's tokens under it. A model without a price has an unknown cost — ``None``, never 0 — so a total is never
quietly too low."""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from atlas_pipeline.core.errors import AtlasError

MILLION = 1_000_000
_DATED = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{4})$")  # -2024-07-18, -0613


class PriceError(AtlasError, ValueError):
    """The price table cannot be read (a clear message naming the file and what is wrong)."""


class Price(BaseModel):
    """One model's prices per million tokens."""

    model_config = {"extra": "forbid"}

    input: float = Field(ge=0)
    cached_input: float | None = Field(None, ge=0)  # None: cached prompt tokens cost as any other
    output: float = Field(ge=0)
    batch_discount: float = Field(0.0, ge=0, le=1)

    def cost(self, prompt_tokens: int, completion_tokens: int, cached_tokens: int = 0, batch: bool = False) -> float:
        """The price of one request's tokens (``cached_tokens`` are the part of ``prompt_tokens`` read from the
        endpoint's prompt cache)."""
        cached = min(cached_tokens, prompt_tokens)
        cached_price = self.input if self.cached_input is None else self.cached_input
        total = (prompt_tokens - cached) * self.input + cached * cached_price + completion_tokens * self.output
        return total / MILLION * (1 - self.batch_discount if batch else 1)


@dataclass(frozen=True)
class PriceTable:
    currency: str
    models: dict[str, Price]
    source: str = ""

    def price_of(self, model: str) -> Price | None:
        """The model's price: its own entry, else its family's when the name is a dated snapshot of it
        (``gpt-4o-mini-2024-07-18``); another variant (``gpt-4o-audio-preview``) has no price until it is given."""
        if model in self.models:
            return self.models[model]
        family = _DATED.sub("", model)
        return self.models.get(family) if family != model else None


def load_prices(path: str | Path) -> PriceTable:
    """The table in a TOML file (``currency``, ``[models."name"]`` with input, cached_input, output, batch_discount)."""
    try:
        raw = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise PriceError(f"cannot read the LLM price table {path}: {error}") from error
    models = raw.get("models") or {}
    if not isinstance(models, dict):
        raise PriceError(f"{path}: [models] must be a table of models")
    prices = {}
    for name, entry in models.items():
        try:
            prices[name] = Price.model_validate(entry)
        except ValidationError as error:
            problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in error.errors())
            raise PriceError(f"{path}: model {name!r}: {problems}") from None
    return PriceTable(currency=str(raw.get("currency") or "USD"), models=prices, source=str(path))


def price_file(setting: str, seeds_dir: str) -> Path:
    """The price table in use: ``ATLAS_LLM_PRICES`` when set, else ``llm_prices.toml`` in the seeds folder."""
    return Path(setting) if setting else Path(seeds_dir) / "llm_prices.toml"


def money(amount: float | None, currency: str = "USD") -> str:
    """``$0.0123`` style: enough digits for a cent's fraction, ``unknown`` without a price."""
    if amount is None:
        return "unknown (no price for the model)"
    symbol = "$" if currency == "USD" else f"{currency} "
    return f"{symbol}{amount:.4f}" if amount < 1 else f"{symbol}{amount:,.2f}"
