"""Finding a canonical ``provider:model`` id in the model catalog, whatever names its provider.

The part before ``:`` is a stack name (``openai_responses``, whose stack names its catalog
provider) or a catalog provider id itself (``google``, ``amazon-bedrock``).
"""

from __future__ import annotations

import functools
from pathlib import Path

from metis.catalog.lookup import find_model
from metis.catalog.model_info import ModelInfo
from metis.errors import ConfigError
from metis.stacks.loader import builtin_stacks, load_stack


def lookup(model: str) -> ModelInfo | None:
    """The entry for a canonical id such as ``anthropic:claude-sonnet-4-5``."""
    prefix, sep, name = model.partition(":")
    if not sep:
        return None
    provider = stack_catalog_provider(prefix) or prefix
    return find_model(provider, name)


@functools.cache
def stack_catalog_provider(stack: str) -> str | None:
    """The catalog provider a built-in stack or a stack file (``my/stack.yaml``, as a one-line
    call names it) names, or None (neither, or one whose models the catalog does not know)."""
    if stack not in builtin_stacks() and not (
        stack.endswith((".yaml", ".yml")) and Path(stack).is_file()
    ):
        return None
    try:
        return load_stack(stack).catalog
    except ConfigError:
        return None
