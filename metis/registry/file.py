"""The models.yaml format (docs/models-yaml.md): ``adapters:``, ``models:`` and ``routes:``,
validated when the file loads."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from metis.routing.spec import RouteSpec


class AdapterEntry(BaseModel):
    """One entry under ``adapters:``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: str = Field(min_length=1)
    api_key_env: str | None = Field(default=None, min_length=1)
    api_key: str | None = Field(default=None, repr=False)
    base_url: str | None = None
    timeout_seconds: float = Field(default=600.0, gt=0)
    max_retries: int = Field(default=2, ge=0)
    extra_headers: dict[str, str] = {}
    settings: dict[str, Any] = {}
    """The provider's own settings, of its stack's kind (docs/engine.md)."""
    options: dict[str, Any] = {}
    """Deprecated: ``settings``."""


class ModelEntry(BaseModel):
    """One entry under ``models:``; ``wire_name`` defaults to the id after ``provider:``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    adapter: str
    wire_name: str | None = Field(default=None, min_length=1)
    tier: str | None = None
    can_delegate: bool = False
    aliases: list[str] = []
    capabilities: dict[str, Any] = {}
    catalog: dict[str, Any] = {}
    """Fields of the model's catalog entry to replace (metis.catalog.ModelInfo's names)."""


class RegistryFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    adapters: dict[str, AdapterEntry] = {}
    models: dict[str, ModelEntry] = {}
    routes: dict[str, RouteSpec] = {}
    """Fallback routes over the models above (metis.routing, docs/routing.md)."""
