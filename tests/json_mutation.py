"""Places in a JSON value and the value with one place changed: what the property searches
over recorded replies and client requests mutate (tests/wire/test_decoders_fuzzed.py,
tests/gateway/test_gateway_fuzz.py)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any


def paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in a JSON value, the value itself first."""
    yield at
    if isinstance(value, dict):
        for key, item in value.items():
            yield from paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from paths(item, (*at, index))


def changed(value: Any, at: tuple[Any, ...], new: Any, *, remove: bool = False) -> Any:
    """``value`` with ``new`` at ``at`` (or what is there removed)."""
    if not at:
        return new
    out = copy.deepcopy(value)
    parent = out
    for key in at[:-1]:
        parent = parent[key]
    if remove:
        del parent[at[-1]]
    else:
        parent[at[-1]] = new
    return out
