"""The model catalog: per-model limits, capabilities and prices (docs/catalog.md).

::

    from metis.catalog import default_catalog
    info = default_catalog().get("anthropic", "claude-sonnet-4-5")
    info.max_output_tokens, info.takes("image"), info.prices

Each name is imported from its module on first use: an adapter reads the catalog when its
first call names a model, not when it is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["Catalog", "cache_path", "default_catalog", "read_snapshot"], "metis.catalog.catalog"
    ),
    **dict.fromkeys(
        ["ModelInfo", "ModelPrices", "PriceTier", "ReasoningForm"], "metis.catalog.model_info"
    ),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'metis.catalog' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})


if TYPE_CHECKING:
    from metis.catalog.catalog import Catalog as Catalog
    from metis.catalog.catalog import cache_path as cache_path
    from metis.catalog.catalog import default_catalog as default_catalog
    from metis.catalog.catalog import read_snapshot as read_snapshot
    from metis.catalog.model_info import ModelInfo as ModelInfo
    from metis.catalog.model_info import ModelPrices as ModelPrices
    from metis.catalog.model_info import PriceTier as PriceTier
    from metis.catalog.model_info import ReasoningForm as ReasoningForm
