"""Finding a canonical ``provider:model`` id in the catalog, whatever names its provider.

The part before ``:`` is a stack name (``openai_responses``, whose stack names its catalog
provider) or a catalog provider id itself (``google``, ``amazon-bedrock``).
"""

from __future__ import annotations

import functools
import logging

from metis.catalog.catalog import default_catalog
from metis.catalog.model_info import ModelInfo
from metis.errors import ConfigError

log = logging.getLogger("metis")
_warned: set[tuple[str, str]] = set()


def find_model(catalog_provider: str, wire_model: str) -> ModelInfo | None:
    """The catalog entry for ``wire_model`` at ``catalog_provider``, if there is one."""
    return default_catalog().get(catalog_provider, wire_model)


def lookup(model: str) -> ModelInfo | None:
    """The entry for a canonical id such as ``anthropic:claude-sonnet-4-5``."""
    prefix, sep, name = model.partition(":")
    if not sep:
        return None
    provider = stack_catalog_provider(prefix) or prefix
    return find_model(provider, name)


@functools.cache
def stack_catalog_provider(stack: str) -> str | None:
    """The catalog provider a built-in stack names, or None (not a built-in stack, or one
    whose models the catalog does not know)."""
    from metis.stacks.loader import builtin_stacks, load_stack

    if stack not in builtin_stacks():
        return None
    try:
        return load_stack(stack).catalog
    except ConfigError:
        return None


def warn_uncatalogued(catalog_provider: str, wire_model: str, source: str) -> None:
    """One WARN per (provider, model) per process: the model's limits are the stack's guess."""
    if (catalog_provider, wire_model) in _warned:
        return
    _warned.add((catalog_provider, wire_model))
    log.warning(
        "model %r is not in the model catalog for %s: using the capabilities %s declares",
        wire_model,
        catalog_provider,
        source,
        extra={
            "event": "metis.uncatalogued_model",
            "catalog_provider": catalog_provider,
            "model": wire_model,
        },
    )
