"""Images whose bytes say they are a PNG but whose pixels are not all there: OpenAI and
Anthropic decode an inline image and refuse one they cannot (vicentereig/dspy.rb's
openai_multimodal and anthropic_multimodal cassettes, a 16 by 16 PNG of a few bytes: 400
"You uploaded an unsupported image. Please make sure your image is valid." and "Could not
process image"). Other formats, bytes that are not a PNG at all, PNGs whose chunks run past
their end (tests' stand-ins) and PNGs over a megabyte are not looked into."""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterator
from typing import Any

from metis.testing.emulator.rules import Refused

_PNG = b"\x89PNG\r\n\x1a\n"
_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}
"""Samples per pixel by PNG colour type (grey, RGB, palette, grey and alpha, RGBA)."""
_LARGEST = 1 << 20
"""Larger images (as base64) are not decoded: the emulator answers them as it did."""


def broken_png(data: Any) -> bool:
    """Whether base64 ``data`` is a PNG whose compressed pixels are cut short or unreadable."""
    if not isinstance(data, str) or not data.startswith("iVBORw0KGgo") or len(data) > _LARGEST:
        return False
    try:
        raw = base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return False
    header, pixels = b"", bytearray()
    at = len(_PNG)
    while at + 8 <= len(raw):
        (size,), kind = struct.unpack(">I", raw[at : at + 4]), raw[at + 4 : at + 8]
        if at + 12 + size > len(raw):
            return False  # a stand-in cut off inside its chunks: not looked into
        header = raw[at + 8 : at + 8 + size] if kind == b"IHDR" else header
        pixels += raw[at + 8 : at + 8 + size] if kind == b"IDAT" else b""
        at += 12 + size
    if len(header) != 13 or not pixels or header[12] != 0:  # interlaced ones are not counted
        return False
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    expected = int(height) * (1 + (int(width) * _CHANNELS.get(colour, 4) * int(depth) + 7) // 8)
    try:
        return len(zlib.decompressobj().decompress(bytes(pixels), expected)) < expected
    except zlib.error:
        return True


def check_chat(body: dict[str, Any], call: Any) -> None:
    for url in _chat_urls(body.get("messages")):
        if url.startswith("data:image/png;base64,") and broken_png(url.split(",", 1)[1]):
            raise Refused(
                "You uploaded an unsupported image. Please make sure your image is valid.",
                code="image_parse_error",
            )


def check_anthropic(body: dict[str, Any], call: Any) -> None:
    for block in _blocks(body.get("messages")):
        source = block.get("source") if block.get("type") == "image" else None
        if isinstance(source, dict) and broken_png(source.get("data")):
            raise Refused("Could not process image")


def _blocks(messages: Any) -> Iterator[dict[str, Any]]:
    for message in messages if isinstance(messages, list) else ():
        content = message.get("content") if isinstance(message, dict) else None
        for block in content if isinstance(content, list) else ():
            if isinstance(block, dict):
                yield block
                if isinstance(block.get("content"), list):  # a tool result's images
                    yield from (b for b in block["content"] if isinstance(b, dict))


def _chat_urls(messages: Any) -> Iterator[str]:
    for block in _blocks(messages):
        image = block.get("image_url") if block.get("type") == "image_url" else None
        url = image.get("url") if isinstance(image, dict) else image
        if isinstance(url, str):
            yield url
