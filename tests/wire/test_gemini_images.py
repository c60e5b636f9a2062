"""An image a Gemini image model makes (an ``inlineData`` part with an ``image/...`` type in the
reply) is an image block, streamed and whole, at its place among the text; its thought signature
(Gemini 3 image models sign their pictures) is kept in ``provider_raw`` and goes back on the
part in the next turn, to the same model only. Other inline media (a speech model's audio) stay
opaque (tests/wire/test_opaque_readers.py)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.errors import ProtocolError
from metis.model import CanonicalRequest, Message, MessageComplete, Role, TextBlock
from metis.model.content import Base64ImageSource, ImageBlock
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import Codec, get_codec

from ..helpers import make_call

MODEL = "gemini:gemini-3-pro-image-preview"
PICTURE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAE" + "hQGAhKmMIQ=="
SIGNATURE = "Q2F0UGljdHVyZVNpZ25hdHVyZQ=="
IMAGE_PART = {
    "inlineData": {"mimeType": "image/png", "data": PICTURE},
    "thoughtSignature": SIGNATURE,
}


def _codec() -> Codec:
    (encode,) = [s for s in load_stack("gemini").stages if s.name == "encode"]
    return get_codec("schema", encode.options["settings"])


def _chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    if finish:
        candidate["finishReason"] = finish
    usage = {"promptTokenCount": 9, "candidatesTokenCount": 1290}
    return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "m"}


def _read(streamed: bool, *chunks: dict[str, Any]) -> MessageComplete:
    builder = MessageBuilder("gemini", MODEL)
    if streamed:
        parser = _codec().stream_parser(builder)
        events = [event for chunk in chunks for event in parser.feed(chunk)]
        events += parser.end()
    else:
        (body,) = chunks
        events = list(_codec().parse_body(body, builder))
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    final = events[-1]
    assert isinstance(final, MessageComplete)
    return final


STREAM = [
    _chunk({"text": "Here is a cat "}),
    _chunk({"text": "in a hat."}),
    _chunk(IMAGE_PART),
    _chunk({"text": "Enjoy!"}, finish="STOP"),
]
WHOLE = _chunk({"text": "Here is a cat in a hat."}, IMAGE_PART, {"text": "Enjoy!"}, finish="STOP")


@pytest.mark.parametrize("streamed", [True, False], ids=["streamed", "whole"])
def test_an_image_the_model_made_is_an_image_block_with_its_signature(
    streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    final = _read(streamed, *(STREAM if streamed else [WHOLE]))
    assert [b.type for b in final.final_content] == ["text", "image", "text"]
    image = final.final_content[1]
    assert isinstance(image, ImageBlock)
    assert image.source == Base64ImageSource(media_type="image/png", data=PICTURE)
    assert image.provider_raw is not None
    assert image.provider_raw.provider == "gemini" and image.provider_raw.model == MODEL
    assert image.provider_raw.data == {"thoughtSignature": SIGNATURE}
    assert final.stop_reason.raw == "STOP" and final.usage.output_tokens == 1290
    assert not caplog.records


def _sent_back(content: list[Any], model: str) -> list[dict[str, Any]]:
    request = CanonicalRequest(
        model=model,
        messages=[
            Message.user("Draw a cat in a hat."),
            Message(role=Role.ASSISTANT, content=content),
            Message.user("Make the hat red."),
        ],
        max_output_tokens=256,
    )
    body = _codec().encode(request, make_call(provider="gemini", model=model))
    parts: list[dict[str, Any]] = body["contents"][1]["parts"]
    return parts


def test_the_image_goes_back_to_the_same_model_as_it_came_signed() -> None:
    final = _read(False, WHOLE)
    assert _sent_back(list(final.final_content), MODEL) == [
        {"text": "Here is a cat in a hat."},
        IMAGE_PART,
        {"text": "Enjoy!"},
    ]


def test_another_model_gets_the_image_without_the_signature() -> None:
    final = _read(False, WHOLE)
    parts = _sent_back(list(final.final_content), "gemini:gemini-2.5-flash-image")
    assert parts[1] == {"inlineData": {"mimeType": "image/png", "data": PICTURE}}
    assert all("thoughtSignature" not in part for part in parts)


def test_an_unsigned_image_reads_with_no_provider_fields() -> None:
    final = _read(False, _chunk({"inlineData": {"mimeType": "image/jpeg", "data": PICTURE}}))
    (image,) = final.final_content
    assert isinstance(image, ImageBlock) and image.source.media_type == "image/jpeg"  # type: ignore[union-attr]
    assert image.provider_raw is not None and image.provider_raw.data == {}
    assert not [b for b in final.final_content if isinstance(b, TextBlock)]


def test_an_image_part_whose_data_is_not_text_is_a_protocol_error_naming_it() -> None:
    bad = _chunk({"inlineData": {"mimeType": "image/png", "data": 7}}, finish="STOP")
    with pytest.raises(ProtocolError, match="image data"):
        _read(False, bad)
