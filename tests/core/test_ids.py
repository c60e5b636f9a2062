"""Ids (metis/core/ids.py): python-ulid's ULIDs, written ten bits at a time as python-ulid
writes them a character at a time."""

from __future__ import annotations

import os

import pytest
from ulid import ULID

from metis.core import ids


@pytest.mark.parametrize("raw", [b"\0" * 16, b"\xff" * 16, bytes(range(16)), os.urandom(16)])
def test_an_id_is_written_as_python_ulid_writes_it(raw: bytes) -> None:
    ulid = ULID.from_bytes(raw)
    assert ids._text(ulid) == str(ulid)


def test_many_ids_are_written_as_python_ulid_writes_them() -> None:
    for _ in range(2000):
        ulid = ULID.from_bytes(os.urandom(16))
        assert ids._text(ulid) == str(ulid)


def test_new_ids_are_ulids_in_order_with_their_prefixes() -> None:
    made = [ids.new_request_id() for _ in range(200)]
    assert all(m.startswith("req_") and str(ULID.from_str(m[4:])) == m[4:] for m in made)
    assert made == sorted(made) and len(set(made)) == len(made)  # monotonic within a millisecond
    tool, plain = ids.new_tool_id(), ids.new_ulid()
    assert tool.startswith(ids.TOOL_ID_PREFIX) and len(tool) == len(ids.TOOL_ID_PREFIX) + 26
    assert str(ULID.from_str(plain)) == plain
