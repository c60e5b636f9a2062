"""The adapter users hold; the code lives in :mod:`metis.adapter.adapter` (checks, sendable,
count_tokens beside it)."""

from metis.adapter.adapter import Adapter, build_adapter
from metis.adapter.chat_model import ChatModel

__all__ = ["Adapter", "ChatModel", "build_adapter"]
