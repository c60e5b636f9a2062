"""Tools for testing code that uses metis: cassettes and replay transports
(:mod:`metis.testing.cassette`), and the provider emulator (:mod:`metis.testing.emulator`).

The emulator's everyday names are here too, loaded on first use (importing
``metis.testing.cassette`` does not start or load the emulator)::

    from metis.testing import MODELS, stand_in

    with stand_in("anthropic") as where:
        async with where.adapter("anthropic") as adapter:
            ...
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from metis.testing.emulator import FAULT_HEADER, MODELS, Emulator, StandIn, stand_in

_FROM_EMULATOR = frozenset({"FAULT_HEADER", "MODELS", "Emulator", "StandIn", "stand_in"})


if not TYPE_CHECKING:  # a type checker sees the names imported above, and no other

    def __getattr__(name: str) -> Any:
        if name in _FROM_EMULATOR:
            return getattr(importlib.import_module("metis.testing.emulator"), name)
        raise AttributeError(f"module 'metis.testing' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_FROM_EMULATOR})


__all__ = ["FAULT_HEADER", "MODELS", "Emulator", "StandIn", "stand_in"]
