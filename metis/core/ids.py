"""Identifiers: request ids and canonical tool-use ids are ULIDs (docs/contract.md §6)."""

from __future__ import annotations

import hashlib
from functools import lru_cache

from ulid import ULID

TOOL_ID_PREFIX = "tu_"


def new_ulid() -> str:
    return str(ULID())


def new_request_id() -> str:
    return f"req_{ULID()}"


def new_tool_id() -> str:
    return f"{TOOL_ID_PREFIX}{ULID()}"


@lru_cache(maxsize=8192)  # a conversation's calls derive the same ids again
def derive_provider_tool_id(canonical_id: str, prefix: str, max_length: int = 40) -> str:
    """A provider id for a canonical id this provider has never seen, the same on every call.

    ``tu_<ulid>`` keeps its ULID (``toolu_<ulid>``, ``call_<ulid>``) when that fits the limit;
    any other id is hashed, so the result only holds ``[A-Za-z0-9_]`` (plus the prefix) and fits
    the provider's length limit. A too-long id is hashed rather than cut, so two ids that share
    a long prefix still get different provider ids.
    """
    body = canonical_id[len(TOOL_ID_PREFIX) :]
    if not (
        canonical_id.startswith(TOOL_ID_PREFIX)
        and body.isascii()
        and body.isalnum()
        and len(prefix) + len(body) <= max_length
    ):
        body = hashlib.sha256(canonical_id.encode()).hexdigest()[:26]
    return (prefix + body)[:max_length]
