"""Identifiers: request ids and canonical tool-use ids are ULIDs (docs/contract.md §6)."""

from __future__ import annotations

import hashlib
import os
import threading
import time
from functools import lru_cache

TOOL_ID_PREFIX = "tu_"

_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_PAIRS = [first + second for first in _CROCKFORD for second in _CROCKFORD]  # 10 bits each
_SHIFTS = range(120, -1, -10)
_MAX_RANDOM = (1 << 80) - 1
_lock = threading.Lock()
_last = [0, 0]  # the last ULID's milliseconds and random part


def new_ulid() -> str:
    """A ULID (https://github.com/ulid/spec): 48 bits of Unix milliseconds, then 80 random
    bits, as 26 Crockford base32 characters. Within one millisecond each is the one before
    plus one, so the ids sort in the order they were made (fresh random bits past the top)."""
    ms = time.time_ns() // 1_000_000
    with _lock:
        if ms == _last[0] and _last[1] < _MAX_RANDOM:
            random = _last[1] + 1
        else:
            random = int.from_bytes(os.urandom(10), "big")
        _last[0], _last[1] = ms, random
    return ulid_text((ms << 80) | random)


def ulid_text(value: int) -> str:
    """The 26 characters of a 128-bit ULID: its 130 bits (two leading zeros), 10 at a time."""
    pairs = _PAIRS
    return "".join([pairs[(value >> shift) & 1023] for shift in _SHIFTS])


def new_request_id() -> str:
    return f"req_{new_ulid()}"


def new_tool_id() -> str:
    return f"{TOOL_ID_PREFIX}{new_ulid()}"


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
