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


@pytest.mark.parametrize("text", ["", "x\ud800"])
def test_a_text_document_a_wire_takes_as_a_file_needs_unicode_text(text: str) -> None:
    """Gemini takes a text document as base64 data: an empty one was a bare ValidationError
    (no file is empty), one with a lone surrogate a UnicodeEncodeError."""
    from metis.model.media import DocumentBlock, TextSource
    from metis.wire.media import inline

    with pytest.raises(InvalidRequestError, match="text document"):
        inline(DocumentBlock(source=TextSource(text=text)))
