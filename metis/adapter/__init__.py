"""The adapter users hold; the code lives in :mod:`metis.adapter.adapter` (checks, sendable,
count_tokens beside it)."""

from metis.adapter.adapter import Adapter, build_adapter

__all__ = ["Adapter", "build_adapter"]
