"""Finding a model in the catalog by its catalog provider, and the one warning for a model the
catalog does not know. A canonical ``stack:model`` id is looked up by :mod:`metis.stacks.catalog`,
which knows the stacks."""

from __future__ import annotations

import logging

from metis.catalog.catalog import default_catalog
from metis.catalog.model_info import ModelInfo
from metis.core.suggest import closest

log = logging.getLogger("metis")
_warned: set[tuple[str, str]] = set()


def find_model(catalog_provider: str, wire_model: str) -> ModelInfo | None:
    """The catalog entry for ``wire_model`` at ``catalog_provider``, if there is one."""
    return default_catalog().get(catalog_provider, wire_model)


def warn_uncatalogued(catalog_provider: str, wire_model: str, source: str) -> None:
    """One WARN per (provider, model) per process: the model's limits are the stack's guess.
    It names the catalog's closest models, in case the name is misspelt. None for a model
    whose entry was skipped as malformed: its WARN said so already."""
    if (catalog_provider, wire_model) in _warned:
        return
    _warned.add((catalog_provider, wire_model))
    if default_catalog().malformed(catalog_provider, wire_model):
        return
    close = closest(wire_model, default_catalog().ids(catalog_provider), n=3, cutoff=0.7)
    log.warning(
        "model %r is not in the model catalog for %s%s: using the capabilities %s declares",
        wire_model,
        catalog_provider,
        f" (closest: {', '.join(close)})" if close else "",
        source,
        extra={
            "event": "metis.uncatalogued_model",
            "catalog_provider": catalog_provider,
            "model": wire_model,
            "closest": close,
        },
    )
