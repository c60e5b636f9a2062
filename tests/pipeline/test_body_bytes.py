"""A request body is sent as UTF-8; text that has none (a lone UTF-16 surrogate, which a JSON
``"\\ud800"`` escape reads as) is refused as an invalid request before anything is sent."""

from __future__ import annotations

import pytest

from metis.errors import InvalidRequestError
from metis.pipeline.request import body_bytes


def test_a_body_is_its_compact_json_in_utf8() -> None:
    assert body_bytes({"text": "déjà 😀", "n": [1, 2]}) == '{"text":"déjà 😀","n":[1,2]}'.encode()


@pytest.mark.parametrize(("text", "at"), [("\ud800", 9), ("ab\udfff", 11), ("😀\ud83d", 10)])
def test_a_lone_surrogate_is_an_invalid_request(text: str, at: int) -> None:
    with pytest.raises(InvalidRequestError, match=f"lone UTF-16 surrogate .* at character {at} "):
        body_bytes({"text": text})
