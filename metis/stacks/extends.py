"""Stack inheritance: a stack file that ``extends:`` another and says only how it differs.

::

    name: groq
    extends: openai_compatible          # a built-in stack, or a path relative to this file
    endpoint: {base_url: https://api.groq.com/openai}
    auth: {env: GROQ_API_KEY}
    capabilities: {max_context_tokens: 131072}
    stages:                             # edits, by stage name (a list replaces them all)
      remove: [strict_schema]
      options: {tool_ids: {prefix: call_}}          # merged into the stage's options
      replace: {thinking_filter: {thinking_filter: {keep: never}}}
      insert_after: {encode: [{wire_fields: {drop: [seed]}}]}
      insert_before: {retry: [my_stage]}

Mappings (``endpoint``, ``auth``, ``headers``, ``capabilities``, ``token_estimate``) merge key
by key, and a key set to ``null`` is removed; anything else replaces the parent's value.
Chains are followed to the root; a cycle is a ConfigError. docs/stacks.md has the details.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from metis.core.suggest import did_you_mean
from metis.errors import ConfigError

MERGED = ("endpoint", "auth", "headers", "capabilities", "token_estimate")
VERBS = ("remove", "replace", "options", "insert_before", "insert_after")

Reader = Callable[[str, str], tuple[dict[str, Any], str]]
"""Reads a parent: (name or path, the child's source) -> (its data, its source)."""


RootHook = Callable[[dict[str, Any], str], tuple[dict[str, Any], dict[str, str]]]
"""Completes the root of a chain before the children's edits: (data, source) -> (data, the
file that set each stage)."""


def resolve(
    data: dict[str, Any], source: str, read: Reader, root_hook: RootHook | None = None
) -> tuple[dict[str, Any], dict[str, str]]:
    """``data`` with its ``extends`` chain applied, and for each stage the file that set it.
    ``root_hook`` completes the root first (the skeleton's stages added to it)."""
    chain = [(data, source)]
    seen = [source]
    while "extends" in chain[-1][0]:
        child, child_source = chain[-1]
        parent = child["extends"]
        if not isinstance(parent, str) or not parent:
            raise ConfigError(f"{child_source}: extends: expected a stack name or a file path")
        try:
            parent_data, parent_source = read(parent, child_source)
        except ConfigError as exc:
            if type(exc) is not ConfigError or str(exc).startswith(child_source):
                raise
            raise ConfigError(f"{child_source}: extends: {exc}") from None
        if parent_source in seen:
            cycle = " -> ".join([*seen, parent_source])
            raise ConfigError(f"{child_source}: extends makes a cycle: {cycle}")
        seen.append(parent_source)
        chain.append((parent_data, parent_source))
    root, root_source = chain[-1]
    merged = {k: v for k, v in root.items() if k != "extends"}
    origin = {_entry_name(e, root_source): root_source for e in _stage_list(merged, root_source)}
    if root_hook is not None:
        merged, origin = root_hook(merged, root_source)
    for child, child_source in reversed(chain[:-1]):
        merged = _merge(merged, child, child_source, origin)
    return merged, origin


def _merge(
    base: dict[str, Any], child: dict[str, Any], source: str, origin: dict[str, str]
) -> dict[str, Any]:
    out = dict(base)
    for key, value in child.items():
        if key == "extends":
            continue
        if key == "stages":
            out["stages"] = _edit_stages(base.get("stages") or [], value, source, origin)
        elif key in MERGED and isinstance(value, dict) and isinstance(out.get(key), dict):
            combined = {**out[key], **value}
            out[key] = {k: v for k, v in combined.items() if v is not None}
        else:
            out[key] = value
    return out


def _edit_stages(stages: list[Any], edits: Any, source: str, origin: dict[str, str]) -> list[Any]:
    if isinstance(edits, list):  # the child lists its own stages: all of them are its
        origin.clear()
        origin.update({_entry_name(e, source): source for e in edits})
        return list(edits)
    if not isinstance(edits, dict):
        raise ConfigError(f"{source}: stages: expected a list of stages or a mapping of edits")
    unknown = sorted(set(edits) - set(VERBS))
    if unknown:
        raise ConfigError(
            f"{source}: stages: unknown edit {', '.join(unknown)}; expected one of: "
            + ", ".join(VERBS)
            + did_you_mean(unknown[0], VERBS)
        )
    out = list(stages)
    for name in _names(edits.get("remove"), source, "remove"):
        del out[_find(out, name, source, "remove")]
        origin.pop(name, None)
    for name, entry in _mapping(edits.get("replace"), source, "replace").items():
        at = _find(out, name, source, "replace")
        origin.pop(name, None)
        out[at] = entry
        origin[_entry_name(entry, source)] = source
    for name, options in _mapping(edits.get("options"), source, "options").items():
        at = _find(out, name, source, "options")
        if not isinstance(options, dict):
            raise ConfigError(f"{source}: stages.options.{name}: expected a mapping of options")
        current = out[at] if isinstance(out[at], dict) else {out[at]: {}}
        out[at] = {name: {**(current[name] or {}), **options}}
        origin[name] = source
    for verb, offset in (("insert_before", 0), ("insert_after", 1)):
        for anchor, entries in _mapping(edits.get(verb), source, verb).items():
            added = entries if isinstance(entries, list) else [entries]
            at = _find(out, anchor, source, verb) + offset
            out[at:at] = added
            origin.update({_entry_name(e, source): source for e in added})
    return out


def _stage_list(data: dict[str, Any], source: str) -> list[Any]:
    stages = data.get("stages")
    if stages is None:
        raise ConfigError(f"{source}: stages: expected the list of stages (the root of a chain)")
    if not isinstance(stages, list):
        raise ConfigError(f"{source}: stages: edits need a stack to extend; expected a list")
    return stages


def _entry_name(entry: Any, source: str) -> str:
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict) and len(entry) == 1:
        return str(next(iter(entry)))
    raise ConfigError(
        f"{source}: stages: expected a stage name or a one-key mapping, got {entry!r}"
    )


def _find(stages: list[Any], name: str, source: str, verb: str) -> int:
    for i, entry in enumerate(stages):
        if _entry_name(entry, source) == name:
            return i
    names = ", ".join(_entry_name(e, source) for e in stages)
    raise ConfigError(
        f"{source}: stages.{verb}: no stage {name!r} to edit; the stages are: {names}"
    )


def _names(value: Any, source: str, verb: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    raise ConfigError(f"{source}: stages.{verb}: expected a stage name or a list of names")


def _mapping(value: Any, source: str, verb: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{source}: stages.{verb}: expected a mapping keyed by stage name")
    return value
