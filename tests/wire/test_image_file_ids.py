"""An image given by a provider's file id (docs/contract.md §9), on each stack's wire: the
shapes of anthropic's ``ImageBlockParam`` with ``FileImageSourceParam``, openai's
``ResponseInputImageParam`` (``file_id``), google-genai's ``FileData`` and botocore's Converse
``ImageSource.s3Location``; Chat Completions' ``image_url`` part has no file id. A file id goes
only to the provider that issued it: elsewhere it is refused in the turn being sent and dropped
with the WARN from an older one."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import CapabilityError
from metis.histories.anthropic import from_anthropic, to_anthropic
from metis.histories.openai_chat import to_openai_chat
from metis.model import CanonicalRequest, ImageBlock, Message
from metis.model.media import FileIdSource
from metis.model.media_fit import unreadable
from metis.stacks.loader import load_stack
from metis.wire import anthropic
from metis.wire.bedrock_converse import codec as converse
from metis.wire.codec import get_codec
from metis.wire.openai_chat import codec as chat
from metis.wire.openai_responses import OpenAIResponsesCodec

from ..helpers import FULL_CAPABILITIES, recording_call

CHART = ImageBlock.from_file_id("file_011CNha8iCJcU1wXNR6q4V8w", provider="anthropic")
OPENAI_CHART = ImageBlock.from_file_id("file-6F2ksmvXxt4VdoqmHRw6kL", provider="openai")


def _ask(*blocks: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model="x:m", messages=[Message.user("What is in it?", *blocks)], max_output_tokens=64
    )


def _older(*blocks: Any) -> CanonicalRequest:
    messages = [Message.user("Look.", *blocks), Message.assistant("Seen."), Message.user("Well?")]
    return CanonicalRequest(model="x:m", messages=messages, max_output_tokens=64)


def test_an_image_by_file_id_is_a_file_source_and_reads_its_type_from_the_id() -> None:
    assert CHART.source == FileIdSource(file_id=CHART.source.file_id, provider="anthropic")  # type: ignore[union-attr]
    assert CHART.media_type() is None
    s3 = ImageBlock.from_file_id("s3://bucket/charts/q3.png", provider="bedrock")
    assert s3.media_type() == "image/png"
    as_dict = {"type": "image", "source": {"type": "file", "file_id": "f", "provider": "gemini"}}
    assert ImageBlock.model_validate(as_dict).source == FileIdSource(file_id="f", provider="gemini")
    with pytest.raises(ValueError, match="not an image type"):
        ImageBlock.from_file_id("file-1", provider="openai", media_type="application/pdf")


def test_anthropic_sends_a_file_source_with_the_files_beta() -> None:
    call = recording_call("anthropic", "anthropic:claude-sonnet-4-5")
    body = anthropic.encode(_ask(CHART), call)
    assert body["messages"][0]["content"][1] == {
        "type": "image",
        "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
    }
    assert anthropic.codec.headers_for(body) == {"anthropic-beta": "files-api-2025-04-14"}  # type: ignore[attr-defined]


def test_responses_sends_an_input_image_by_file_id() -> None:
    call = recording_call("openai_responses", "openai_responses:gpt-5")
    body = OpenAIResponsesCodec().encode(_ask(OPENAI_CHART), call)
    assert body["input"][0]["content"][1] == {
        "type": "input_image",
        "file_id": "file-6F2ksmvXxt4VdoqmHRw6kL",
        "detail": "auto",
    }


def test_gemini_sends_a_file_data_part() -> None:
    (encode,) = [s for s in load_stack("gemini").stages if s.name == "encode"]
    codec = get_codec("schema", encode.options["settings"])
    uri = "https://generativelanguage.googleapis.com/v1beta/files/abc123"
    image = ImageBlock.from_file_id(uri, provider="gemini", media_type="image/png")
    body = codec.encode(_ask(image), recording_call("gemini", "gemini:gemini-2.5-flash"))
    assert body["contents"][0]["parts"][1] == {
        "fileData": {"mimeType": "image/png", "fileUri": uri}
    }


def test_converse_sends_an_s3_location() -> None:
    image = ImageBlock.from_file_id("s3://my-bucket/charts/q3.jpg", provider="bedrock")
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5")
    body = converse.encode(_ask(image), call)
    assert body["messages"][0]["content"][1] == {
        "image": {
            "format": "jpeg",
            "source": {"s3Location": {"uri": "s3://my-bucket/charts/q3.jpg"}},
        }
    }


def test_chat_completions_takes_no_image_by_file_id() -> None:
    with pytest.raises(CapabilityError, match="not by file id"):
        chat.encode(_ask(OPENAI_CHART), recording_call("openai", "openai:gpt-4o"))
    call = recording_call("openai", "openai:gpt-4o")
    body = chat.encode(_older(OPENAI_CHART), call)
    assert body["messages"][0]["content"] == "Look."
    assert [d[0] for d in call.dropped] == ["image"]
    assert "use the openai_responses stack" in str(call.dropped)


def test_another_providers_image_file_id_is_unreadable_with_what_to_do() -> None:
    assert unreadable(CHART, FULL_CAPABILITIES, "anthropic") is None
    assert unreadable(OPENAI_CHART, FULL_CAPABILITIES, "openai_responses") is None  # one store
    reason = unreadable(CHART, FULL_CAPABILITIES, "gemini")
    assert reason is not None and "issued by anthropic, and names no file on gemini" in reason
    assert "upload the file to gemini's Files API, or give it inline" in reason


def test_the_anthropic_history_reads_and_writes_an_image_by_file_id() -> None:
    raw = [
        {
            "role": "user",
            "content": [{"type": "image", "source": {"type": "file", "file_id": "file_01A"}}],
        }
    ]
    (message,) = from_anthropic(raw)
    assert message.content == [ImageBlock.from_file_id("file_01A", provider="anthropic")]
    assert to_anthropic([message])["messages"] == raw
    elsewhere = Message.user("x", OPENAI_CHART)
    assert to_anthropic([elsewhere])["messages"][0]["content"] == [{"type": "text", "text": "x"}]
    assert to_openai_chat([elsewhere])[0]["content"] == "x"
