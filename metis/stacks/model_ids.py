"""Model ids as applications write them: ``stack:model``, where the stack is a built-in name
(``anthropic:claude-sonnet-4-5``) or a stack file's path (``custom/my.yaml:claude-sonnet-4-5``),
and only the model part is the provider's name for the model."""

from __future__ import annotations

import functools
import re
from pathlib import Path

from metis.stacks.loader import StackSpec


@functools.cache
def _stack_file() -> re.Pattern[str]:
    return re.compile(r"(.+?\.ya?ml):(.+)", re.DOTALL)


def split_model_id(model: str) -> tuple[str, str] | None:
    """``(stack, model name)`` of ``stack:name``, or None when ``model`` names no stack.

    A stack file's path is cut after its ``.yaml``/``.yml`` (a path may hold a colon, a
    Windows drive's); otherwise the stack is everything before the first colon, because model
    names hold colons of their own (``ollama:qwen3:8b``, Bedrock's ``...-v1:0``).
    """
    found = _stack_file().fullmatch(model)
    if found:
        return found.group(1), found.group(2)
    stack, sep, name = model.partition(":")
    return (stack, name) if sep and stack and name else None


def is_stack_path(stack: str) -> bool:
    return stack.endswith((".yaml", ".yml"))


def own_stack_names(stack: StackSpec) -> frozenset[str]:
    """The names a model id may give ``stack`` by: its own and those of the built-in stacks it
    extends (``anthropic:claude-...`` is right for a stack over ``anthropic``)."""
    extended = {
        source.rsplit("/", 1)[-1].removesuffix(".yaml")
        for source in stack.stage_sources.values()
        if source.startswith("metis/stacks/builtin/")
    }
    return frozenset({stack.name, *extended})


def names_stack_file(prefix: str, stack: StackSpec) -> bool:
    """Whether ``prefix`` is the path of the file ``stack`` was loaded from."""
    if not is_stack_path(prefix) or not is_stack_path(stack.source):
        return False
    return prefix == stack.source or Path(prefix).resolve() == Path(stack.source).resolve()


def wire_name(model: str, stack: StackSpec, own_names: frozenset[str]) -> str:
    """The provider's name for ``model`` sent through ``stack``: the name after the stack
    (one of ``own_names`` or its file's path); any other id is the name itself."""
    split = split_model_id(model)
    if split is not None and (split[0] in own_names or names_stack_file(split[0], stack)):
        return split[1]
    return model
