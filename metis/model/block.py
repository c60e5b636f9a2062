"""What every content block has: the provider's own form of it, and who produced it."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class ProviderRaw(BaseModel):
    """A provider's own representation of a block, and who produced it."""

    model_config = ConfigDict(frozen=True)

    provider: str
    model: str | None = None
    data: dict[str, Any] = Field(default_factory=dict)


class BlockBase(BaseModel):
    """The base of every content block: frozen, with an optional ``provider_raw``."""

    model_config = ConfigDict(frozen=True)

    provider_raw: ProviderRaw | None = None
