"""wire_fields: declarative edits of the provider's JSON body, for OpenAI-compatible servers.

Servers that speak "OpenAI Chat Completions" differ in small ways: one names the output limit
``max_tokens``, one refuses ``stream_options`` with a 422, one wants an extra field. A stack
says so in YAML, after ``encode``, and needs no code::

    - wire_fields:
        rename: {max_completion_tokens: max_tokens, reasoning_effort: reasoning.effort}
        drop: [stream_options, parallel_tool_calls, tools.*.function.strict]
        set: {usage: {include: true}}

A path is dot-separated keys; ``*`` stands for every item of a list (or every value of a
mapping) at that level, and a number indexes a list. The edits run in the order
``rename``, ``drop``, ``set``:

- ``rename`` moves the value at one path (no ``*``) to another; the destination's parents are
  made as needed (a parent that is a scalar is replaced by a mapping; a list is never grown)
  and a value already there is replaced: the encoder's value wins. A source that is absent is
  no edit.
- ``drop`` removes what each path names; a path that matches nothing is no edit. What it
  removes is reported dropped with the call's warnings (named by the path as written) when
  the caller's settings made it: not when it is one metis fills in itself
  (:data:`FILLED_BY_METIS`), nor when it is what the encoder writes for the same request
  without the caller's settings (``WireRequest.unasked``, made only when a drop removed
  something: the Responses API's ``store``, a Chat tool's ``parameters``).
- ``set`` writes a fixed value (a copy of it, every time) at each path, making missing keys
  of mappings as it goes. ``*`` only walks the items that exist, and below a ``*`` an item
  that is not a mapping is left alone (without ``*``, parents are made as for ``rename``).
  A value already equal to the fixed one is no edit.

The incoming body is never modified: the edited body shares every part it did not change with
it, and a body no edit applies to is passed on as the very same request. Paths are parsed once,
when the stage is built, so a malformed option fails at assembly with a StackError naming it.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from typing import Any

from metis.core.digits import ascii_digits
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stage import RequestStage
from metis.stages.options import WireFieldsOptions, parse_path

Path = tuple[str, ...]
_ANY = "*"
_MISSING: Any = object()

FILLED_BY_METIS = frozenset(
    {"model", "messages", "stream", "stream_options", "toolConfig.includeServerSideToolInvocations"}
)
"""Paths the encoders fill in themselves, not from a caller's setting: dropping one loses
nothing the caller asked for (the model goes in Vertex's URL), so it is not reported."""


class WireFields(RequestStage[WireRequest]):
    name = "wire_fields"
    role = "edit"

    Options = WireFieldsOptions

    options: WireFieldsOptions

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        o = self.options
        self._edits: list[tuple[Callable[[Any], Any], str | None, Path]] = [
            *((_renamer(parse_path(s), parse_path(t)), None, ()) for s, t in o.rename.items()),
            *(
                (_dropper(parse_path(p)), None if p in FILLED_BY_METIS else p, parse_path(p))
                for p in o.drop
            ),
            *((_setter(parse_path(p), v), None, ()) for p, v in o.set.items()),
        ]

    def rewrite(self, request: WireRequest, call: Call) -> WireRequest:
        return self.apply(request, call)

    def apply(self, request: WireRequest, call: Call | None = None) -> WireRequest:
        """``request`` with its body edited; ``request`` itself when nothing changed. A
        caller's setting dropped is reported to ``call``."""
        body: Any = request.body
        unasked: Any = _MISSING
        for edit, reported, path in self._edits:
            edited = edit(body)
            if reported is not None and call is not None and edited is not body:
                if unasked is _MISSING:
                    unasked = request.unasked() if request.unasked is not None else None
                if unasked is None or _found(body, path) != _found(unasked, path):
                    call.warn_dropped(
                        reported, f"{call.provider} does not take it; its stack leaves it out"
                    )
            body = edited
        if body is request.body:
            return request
        return dataclasses.replace(request, body=body)


# Edits: each takes a body and gives back the same object when it changes nothing ---------


def _renamer(source: Path, target: Path) -> Callable[[Any], Any]:
    def edit(body: Any) -> Any:
        value = _get(body, source)
        if value is _MISSING:
            return body
        return _put(_remove(body, source), target, value, replace=True)

    return edit


def _dropper(path: Path) -> Callable[[Any], Any]:
    return lambda body: _remove(body, path)


def _setter(path: Path, value: Any) -> Callable[[Any], Any]:
    replace = _ANY not in path
    return lambda body: _put(body, path, value, replace=replace)


# Persistent updates over JSON values: copy only the containers on the changed path -------


def _is_index(key: str) -> bool:
    return ascii_digits(key)


def _child(node: Any, key: str) -> Any:
    if isinstance(node, dict):
        return node.get(key, _MISSING)
    if isinstance(node, list) and _is_index(key) and int(key) < len(node):
        return node[int(key)]
    return _MISSING


def _get(node: Any, path: Path) -> Any:
    for key in path:
        node = _child(node, key)
        if node is _MISSING:
            return _MISSING
    return node


def _found(node: Any, path: Path) -> list[Any]:
    """The values ``path`` names in ``node``, in order."""
    if not path:
        return [node]
    return [value for k in _keys(node, path[0]) for value in _found(node[k], path[1:])]


def _keys(node: Any, key: str) -> list[Any]:
    """The keys (dict) or indices (list) of ``node`` that ``key`` names and that exist."""
    if key == _ANY:
        if isinstance(node, dict):
            return list(node)
        return list(range(len(node))) if isinstance(node, list) else []
    if isinstance(node, dict):
        return [key] if key in node else []
    if isinstance(node, list) and _is_index(key) and int(key) < len(node):
        return [int(key)]
    return []


def _replace_items(node: Any, changes: dict[Any, Any]) -> Any:
    """``node`` with some items replaced; ``node`` itself when every new item is the old one."""
    changed = {k: v for k, v in changes.items() if v is not node[k]}
    if not changed:
        return node
    out = dict(node) if isinstance(node, dict) else list(node)
    for k, v in changed.items():
        out[k] = v
    return out


def _remove(node: Any, path: Path) -> Any:
    key, rest = path[0], path[1:]
    keys = _keys(node, key)
    if not keys:
        return node
    if not rest:
        if isinstance(node, dict):
            return {k: v for k, v in node.items() if k not in keys}
        drop = set(keys)
        return [v for i, v in enumerate(node) if i not in drop]
    return _replace_items(node, {k: _remove(node[k], rest) for k in keys})


def _put(node: Any, path: Path, value: Any, *, replace: bool) -> Any:
    """``node`` with ``value`` written at ``path``. A missing key is made in a mapping; a scalar
    parent is replaced by a mapping only when ``replace`` (a path without ``*``)."""
    key, rest = path[0], path[1:]
    keys = _keys(node, key)
    if not keys:
        if key == _ANY or _ANY in rest or isinstance(node, list):
            return node  # no item to write into: a wildcard or index never makes items
        if not (replace or isinstance(node, dict)):
            return node
        base = node if isinstance(node, dict) else {}
        return {**base, key: _put({}, rest, value, replace=replace) if rest else _fresh(value)}
    if not rest:
        return _replace_items(node, {k: _fresh(value) for k in keys if node[k] != value})
    return _replace_items(node, {k: _put(node[k], rest, value, replace=replace) for k in keys})


def _fresh(value: Any) -> Any:
    """A private copy of an option value, so no two bodies share a mutable part of it."""
    return copy.deepcopy(value) if isinstance(value, dict | list) else value
