"""What every content block has: the provider's own form of it, and who produced it."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from metis.core.empty import empty_dict
from metis.model.base import Canonical
from metis.model.cache import CacheHint


class ProviderRaw(Canonical):
    """A provider's own representation of a block, and who produced it."""

    provider: str
    model: str | None = None
    data: dict[str, Any] = Field(default_factory=empty_dict)


class BlockBase(Canonical):
    """The base of every content block: frozen, with an optional ``provider_raw`` and an
    optional cache hint."""

    provider_raw: ProviderRaw | None = None
    cache: CacheHint | None = Field(default=None, exclude_if=lambda hint: hint is None)
    """Cache the prompt up to and including this block (docs/caching.md)."""
