"""The wire dialect, named once per stack and checked across the stages that need it.

A stack says ``codec: openai_chat`` (and, for a codec configured by its stack, such as the
schema-driven one, ``codec_settings: {...}``). Every stage whose class declares a
``dialect_option`` (encode and normalize take ``codec``, pre_send_check takes ``rules``) gets
it from there. A stage that names a dialect itself must agree with the stack's, and stages
must agree with each other when the stack names none, so ``encode: {codec: anthropic}`` over
``normalize: {codec: openai_chat}`` fails at assembly, naming the file and the stages.
"""

from __future__ import annotations

from typing import Any

from metis.errors import StackError
from metis.pipeline.registry import StageRegistry
from metis.stacks.deferred import declared
from metis.wire.codec import rules_name

__all__ = ["apply_dialect", "rules_name"]


def apply_dialect(
    data: dict[str, Any], source: str, registry: StageRegistry
) -> list[dict[str, Any]]:
    """The stack's stage entries (``{name, options}`` dicts) with the dialect filled in."""
    codec = data.get("codec")
    settings = data.get("codec_settings")
    if codec is not None and not isinstance(codec, str):
        raise StackError(f"{source}: codec: expected a codec name, got {codec!r}")
    if settings is not None and not isinstance(settings, dict):
        raise StackError(f"{source}: codec_settings: expected a mapping")
    entries: list[dict[str, Any]] = [dict(e) for e in data["stages"]]
    named: list[tuple[str, str]] = []  # (stage, the dialect it names)
    for entry in entries:
        option = _dialect_option(entry["name"], registry)
        if option is None:
            continue
        options = dict(entry.get("options") or {})
        wanted = _wanted(option, codec, settings)
        if wanted is not None:
            for key, value in wanted.items():
                options.setdefault(key, value)
        entry["options"] = options
        dialect = _dialect(entry["name"], options, registry)
        if dialect is not None:  # a missing one is reported when the stage is built
            named.append((entry["name"], dialect))
    _check_agreement(named, codec and rules_name(codec, settings), source)
    return entries


def _dialect_option(stage: str, registry: StageRegistry) -> str | None:
    found = declared(stage, registry)
    if found is not None:
        return found.dialect_option
    try:
        return registry.get(stage).dialect_option
    except StackError:
        return None  # an unknown stage is reported when the pipeline is built


def _dialect(stage: str, options: dict[str, Any], registry: StageRegistry) -> str | None:
    found = declared(stage, registry)
    if found is not None:
        return found.dialect(options) if found.dialect is not None else None
    return registry.get(stage).dialect(options)


def _wanted(
    option: str, codec: str | None, settings: dict[str, Any] | None
) -> dict[str, Any] | None:
    if codec is None:
        return None
    if option == "rules":
        return {"rules": rules_name(codec, settings)}
    return {option: codec, **({"settings": settings} if settings else {})}


def _check_agreement(named: list[tuple[str, str]], stack_dialect: str | None, source: str) -> None:
    dialects = {dialect for _, dialect in named}
    if stack_dialect is not None:
        dialects.add(stack_dialect)
    if len(dialects) <= 1:
        return
    said = ", ".join(f"{stage} says {dialect}" for stage, dialect in named)
    if stack_dialect is not None:
        said = f"the stack's codec says {stack_dialect}, " + said
    raise StackError(
        f"{source}: the stages disagree on the wire dialect ({said}); name it once as "
        "the stack's codec: and drop it from the stages"
    )
