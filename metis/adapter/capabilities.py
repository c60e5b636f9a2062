"""What an adapter can serve, model by model (docs/catalog.md)."""

from __future__ import annotations

from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.config import AdapterConfig
from metis.stacks.loader import StackSpec


class ModelCapabilities:
    """The stack's declaration with the configured overrides (:attr:`declared`, which a
    lifespan may refine), narrowed for each model by its catalog entry, cached per model."""

    def __init__(self, stack: StackSpec, config: AdapterConfig) -> None:
        self._stack, self._config = stack, config
        self._by_model: dict[str, AdapterCapabilities] = {}
        self._declared = config.merged_capabilities(stack.capabilities)

    @property
    def declared(self) -> AdapterCapabilities:
        return self._declared

    @declared.setter
    def declared(self, value: AdapterCapabilities) -> None:
        self._declared = value
        self._by_model.clear()

    def of(self, wire_model: str) -> AdapterCapabilities:
        """What ``wire_model`` can serve: :attr:`declared` narrowed by the model's catalog
        entry, with the configured overrides still winning. A model the catalog does not know
        keeps :attr:`declared` (with one WARN per model per process)."""
        found = self._by_model.get(wire_model)
        if found is None:
            return self._narrowed(wire_model)
        return found

    def _narrowed(self, wire_model: str) -> AdapterCapabilities:
        # The catalog (its snapshot, entry validator and name rules) loads with the first call.
        from metis.catalog.capabilities import model_capabilities, uncatalogued_capabilities
        from metis.catalog.lookup import find_model, warn_uncatalogued

        stack, found = self._stack, self._declared
        info = find_model(stack.catalog, wire_model) if stack.catalog else None
        if info is not None:
            found = self._config.merged_capabilities(model_capabilities(found, info))
        elif stack.catalog:
            warn_uncatalogued(stack.catalog, wire_model, stack.source)
            found = uncatalogued_capabilities(found, stack.catalog, wire_model)
        self._by_model[wire_model] = found
        return found
