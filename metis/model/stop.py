"""Why a reply ended, apart from the response's classes (a stack's settings name the kinds
without loading the canonical model)."""

from __future__ import annotations

from enum import StrEnum


class StopKind(StrEnum):
    """Why a reply ended, normalized: docs/contract.md §3. ``provider_specific`` for anything
    else; nothing unknown is called ``end_turn``."""

    END_TURN = "end_turn"
    MAX_TOKENS = "max_tokens"
    STOP_SEQUENCE = "stop_sequence"
    TOOL_USE = "tool_use"
    CONTENT_FILTER = "content_filter"
    REFUSAL = "refusal"
    PAUSE_TURN = "pause_turn"
    CANCELLED = "cancelled"
    ERROR = "error"
    PROVIDER_SPECIFIC = "provider_specific"
