"""The model catalog: per-model limits, capabilities and prices (docs/catalog.md).

::

    from metis.catalog import default_catalog
    info = default_catalog().get("anthropic", "claude-sonnet-4-5")
    info.max_output_tokens, info.takes("image"), info.prices
"""

from metis.catalog.catalog import Catalog, cache_path, default_catalog, read_snapshot
from metis.catalog.model_info import ModelInfo, ModelPrices, PriceTier, ReasoningForm

__all__ = [
    "Catalog",
    "ModelInfo",
    "ModelPrices",
    "PriceTier",
    "ReasoningForm",
    "cache_path",
    "default_catalog",
    "read_snapshot",
]
