"""A stack's stage list put together: the skeleton added, the framing filled in, the order
checked (docs/stacks.md, the rules in :mod:`metis.pipeline.skeleton`).

A provider stack (one whose root names its ``codec``) lists its own stages; the skeleton's
missing ones are added to the root's list before any ``extends`` edit is applied, so a child
may name every stage, the skeleton's included, and :attr:`StackSpec.stage_sources` says
``skeleton`` for each stage the skeleton added. After the edits the whole list is checked
against the order rules.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metis.errors import StackError
from metis.pipeline.registry import StageRegistry
from metis.pipeline.skeleton import ZONE_NAMES, ZONES, check_order, check_required, complete

SKELETON_SOURCE = "skeleton"
"""The source :attr:`StackSpec.stage_sources` gives a stage the skeleton added."""


def zone_finder(registry: StageRegistry) -> Callable[[str], int | None]:
    """The zone of a stage by its name: a built-in's, or what a registered class declares."""

    def zone_of(name: str) -> int | None:
        if name in ZONES:
            return ZONES[name]
        try:
            declared = getattr(registry.get(name), "zone", None)
        except StackError:
            return None  # not registered (yet): where it is listed
        return ZONE_NAMES.index(declared) if declared in ZONE_NAMES else None

    return zone_of


def entry_name(entry: Any) -> str:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        return str(next(iter(entry)))
    if isinstance(entry, dict) and "name" in entry:
        return str(entry["name"])
    raise StackError(f"a stage entry must be a name or a one-key mapping, got {entry!r}")


def completed_root(
    data: dict[str, Any], source: str, registry: StageRegistry
) -> tuple[dict[str, Any], dict[str, str]]:
    """A root stack's data with the skeleton's missing stages added (a provider stack's
    only), and for each stage the file that set it."""
    stages = data.get("stages")
    if not isinstance(stages, list):
        return data, {}
    origin = {entry_name(entry): source for entry in stages}
    if not is_provider_stack(data):
        return data, origin
    named = [{"name": entry_name(entry), "entry": entry} for entry in stages]
    done, added = complete(named, zone_finder(registry), source)
    origin.update({name: SKELETON_SOURCE for name in added})
    full = [item.get("entry", item["name"]) for item in done]
    return {**data, "stages": full}, origin


def is_provider_stack(data: dict[str, Any]) -> bool:
    return isinstance(data.get("codec"), str)


def checked(
    data: dict[str, Any], entries: list[dict[str, Any]], source: str, registry: StageRegistry
) -> list[dict[str, Any]]:
    """The final entries (``{name, options}``), their order checked, the stack's framing
    handed to ``decode``."""
    names = [entry["name"] for entry in entries]
    check_order(names, zone_finder(registry), source)
    if is_provider_stack(data):
        check_required(names, source)
    framing = data.get("framing")
    if framing is None:
        return entries
    if not isinstance(framing, str):
        raise StackError(f"{source}: framing: expected a framing name, got {framing!r}")
    out = []
    for entry in entries:
        if entry["name"] == "decode":
            options = dict(entry.get("options") or {})
            given = options.setdefault("format", framing)
            if given != framing:
                raise StackError(
                    f"{source}: the stack's framing says {framing} and decode says {given}; "
                    "name it once, as the stack's framing:"
                )
            entry = {**entry, "options": options}
        out.append(entry)
    return out
