"""The model catalog: per-model limits, capabilities and prices (docs/catalog.md).

::

    from metis.catalog import default_catalog
    info = default_catalog().get("anthropic", "claude-sonnet-4-5")
    info.max_output_tokens, info.takes("image"), info.prices

Each name is imported from its module on first use: an adapter reads the catalog when its
first call names a model, not when it is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from metis.core.lazy_exports import lazy_exports

_EXPORTS: dict[str, str] = {
    **dict.fromkeys(
        ["Catalog", "cache_path", "default_catalog", "read_snapshot"], "metis.catalog.catalog"
    ),
    **dict.fromkeys(
        ["ModelInfo", "ModelPrices", "PriceTier", "ReasoningForm"], "metis.catalog.model_info"
    ),
}

__all__ = sorted(_EXPORTS)


_load, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
if not TYPE_CHECKING:  # to a type checker only the names imported below exist
    __getattr__ = _load


if TYPE_CHECKING:
    from metis.catalog.catalog import Catalog as Catalog
    from metis.catalog.catalog import cache_path as cache_path
    from metis.catalog.catalog import default_catalog as default_catalog
    from metis.catalog.catalog import read_snapshot as read_snapshot
    from metis.catalog.model_info import ModelInfo as ModelInfo
    from metis.catalog.model_info import ModelPrices as ModelPrices
    from metis.catalog.model_info import PriceTier as PriceTier
    from metis.catalog.model_info import ReasoningForm as ReasoningForm
