"""Request and tool ids: ULIDs as the spec writes them, in the order they were made."""

from __future__ import annotations

import os
import random
import time

import pytest
from ulid import ULID

from metis.core import ids
from metis.core.ids import new_request_id, new_tool_id, new_ulid, ulid_text

_SEEDED = random.Random(20)  # the same values in every test worker


@pytest.mark.parametrize(
    "value",
    [0, 1, 1023, 1 << 127, (1 << 128) - 1, *(_SEEDED.getrandbits(128) for _ in range(50))],
)
def test_the_text_is_the_reference_encoding(value: int) -> None:
    assert ulid_text(value) == str(ULID.from_bytes(value.to_bytes(16, "big")))


def test_the_time_part_is_the_clock_and_ids_made_in_one_millisecond_count_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = 1_795_000_000_123
    monkeypatch.setattr(time, "time_ns", lambda: now * 1_000_000 + 999)
    made = [ULID.from_str(new_ulid()) for _ in range(5)]
    assert {u.milliseconds for u in made} == {now}
    randoms = [int.from_bytes(u.bytes[6:], "big") for u in made]
    assert randoms == list(range(randoms[0], randoms[0] + 5))


def test_past_the_top_of_the_random_part_it_draws_fresh_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = 1_795_000_000_456
    monkeypatch.setattr(time, "time_ns", lambda: now * 1_000_000)
    monkeypatch.setattr(ids, "_last", [now, (1 << 80) - 1])
    monkeypatch.setattr(os, "urandom", lambda n: bytes(n - 1) + b"\x07")
    assert ULID.from_str(new_ulid()).bytes == now.to_bytes(6, "big") + bytes(9) + b"\x07"


def test_ids_sort_in_the_order_made_and_carry_their_prefix() -> None:
    made = [new_ulid() for _ in range(2000)]
    assert made == sorted(made) and len(set(made)) == len(made)
    assert new_request_id().startswith("req_") and len(new_request_id()) == 30
    assert new_tool_id().startswith("tu_") and len(new_tool_id()) == 29
