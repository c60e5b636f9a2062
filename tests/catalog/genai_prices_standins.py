"""Stand-ins for genai-prices' model and provider objects, as the catalog's snapshot build
reads them (rates per million tokens, fees per thousand requests)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal


@dataclass
class Price:
    input_mtok: Decimal
    output_mtok: Decimal
    web_searches_kcount: Decimal | None = None
    storage_searches_kcount: Decimal | None = None
    requests_kcount: Decimal | None = None


@dataclass
class Model:
    id: str
    prices: Price


@dataclass
class Provider:
    id: str
    models: list[Model]

    def find_model(self, ref: str) -> Model | None:
        return next((m for m in self.models if m.id == ref), None)
