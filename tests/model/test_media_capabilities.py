"""File blocks meet the routed model's capabilities (docs/contract.md §9): in the turn being
sent, a document, audio or video block the model cannot read (or another provider's file id)
is a CapabilityError before any IO; in an older turn it is dropped whole with one WARN and
listed in the call's warnings. The catalog narrows each stack's declaration per model."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.catalog.capabilities import model_capabilities
from metis.catalog.model_info import ModelInfo
from metis.errors import CapabilityError
from metis.model import (
    AdapterCapabilities,
    AudioBlock,
    Base64ImageSource,
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    TextDelta,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from metis.model.media_fit import current_turn_start, fit_media, same_files, unreadable
from metis.pipeline.call import Call
from metis.stages.policy.capability_check import CapabilityCheck

from ..helpers import FULL_CAPABILITIES, bound, make_call

pytestmark = pytest.mark.backend_independent  # a request stage over a fake inner

PDF = DocumentBlock.from_bytes(b"%PDF-1.7 one page", "application/pdf", title="report")
WAV = AudioBlock.from_bytes(b"RIFF....WAVE", "audio/wav")
MP4 = VideoBlock.from_url("https://example.com/clip.mp4")
READS_ALL = FULL_CAPABILITIES.model_copy(
    update={
        "accepted_document_media_types": ["application/pdf", "text/plain"],
        "accepted_audio_media_types": ["audio/wav", "audio/mpeg"],
        "accepted_video_media_types": ["video/mp4"],
    }
)
TEXT_ONLY = FULL_CAPABILITIES


def _request(*messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-x", messages=list(messages), max_output_tokens=9
    )


def _history(*older: Any) -> CanonicalRequest:
    """``older`` in a turn before the last assistant message, then a plain question."""
    return _request(
        Message.user("read this", *older), Message.assistant("Done."), Message.user("And?")
    )


async def _run(request: CanonicalRequest, caps: AdapterCapabilities, call: Call) -> list[Any]:
    seen: list[Any] = []

    async def inner(req: CanonicalRequest, call: Call) -> Any:
        seen.append(req)
        yield TextDelta(0, "ok")

    stage = bound(CapabilityCheck(), capabilities=caps)
    _ = [e async for e in stage(request, call, inner)]
    return seen


@pytest.mark.anyio
@pytest.mark.parametrize("block", [PDF, WAV, MP4], ids=["document", "audio", "video"])
async def test_a_file_the_model_cannot_read_in_the_turn_sent_is_refused_before_io(
    block: Any,
) -> None:
    request = _request(Message.user("what is in it?", block))
    assert await _run(request, READS_ALL, make_call())  # a model that reads it: sent as is
    with pytest.raises(CapabilityError) as info:
        await _run(request, TEXT_ONLY, make_call())
    article = "an" if block.type == "audio" else "a"  # "a audio" it said
    assert f"messages[0].content[1]: {article} {block.type} it cannot read" in info.value.message
    assert f"takes no {block.type} input" in info.value.message


@pytest.mark.anyio
async def test_the_same_block_in_an_older_turn_is_dropped_with_one_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = _history(PDF, WAV, MP4)
    call = make_call(session_id="s-media-older")
    with caplog.at_level(logging.WARNING, logger="metis"):
        (sent,) = await _run(request, TEXT_ONLY, call)
    assert sent.messages[0].content == [TextBlock(text="read this")]
    assert sent.messages[1:] == request.messages[1:]
    assert [(w.block_type, w.message_id) for w in call.warnings] == [
        ("document", "messages[0]"),
        ("audio", "messages[0]"),
        ("video", "messages[0]"),
    ]
    assert all("takes no" in w.reason for w in call.warnings)
    records = [r for r in caplog.records if getattr(r, "event", "") == "metis.lossy_projection"]
    assert len(records) == 3
    # the next call of the session lists the drops again, marked repeated, and logs nothing
    again = Call(
        request_id="req_2",
        provider="anthropic",
        model="anthropic:claude-x",
        wire_model="claude-x",
        session_id="s-media-older",
    )
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="metis"):
        await _run(request, TEXT_ONLY, again)
    assert [w.repeated for w in again.warnings] == [True, True, True]
    assert not [r for r in caplog.records if getattr(r, "event", "") == "metis.lossy_projection"]


@pytest.mark.anyio
async def test_files_inside_tool_results_follow_the_same_rule() -> None:
    result = ToolResultBlock(tool_use_id="tu_1", content=[TextBlock(text="scan:"), PDF])
    loop = [
        Message.user("scan it"),
        Message.assistant(ToolUseBlock(id="tu_1", name="scan")),
        Message.tool(result),
    ]
    with pytest.raises(CapabilityError, match=r"messages\[2\]\.content\[0\]\.content\[1\]"):
        await _run(_request(*loop), TEXT_ONLY, make_call())
    call = make_call()
    (sent,) = await _run(
        _request(*loop, Message.assistant("ok"), Message.user("?")), TEXT_ONLY, call
    )
    assert sent.messages[2].content[0].content == [TextBlock(text="scan:")]
    assert [w.block_type for w in call.warnings] == ["document"]
    assert "in a tool result" in call.warnings[0].reason


@pytest.mark.anyio
async def test_a_media_type_the_model_does_not_take_is_named() -> None:
    docx = DocumentBlock.from_bytes(
        b"PK..", "application/vnd.openxmlformats-officedocument.wordprocessingml.document"
    )
    with pytest.raises(CapabilityError) as info:
        await _run(_request(Message.user("summarise", docx)), READS_ALL, make_call())
    assert "takes no application/vnd.openxmlformats" in info.value.message
    assert "it takes application/pdf, text/plain" in info.value.message
    # aliases of one media type are the same type
    mp3 = AudioBlock.from_bytes(b"ID3", "audio/mp3")
    assert await _run(_request(Message.user("listen", mp3)), READS_ALL, make_call())


@pytest.mark.anyio
async def test_a_file_id_goes_only_to_the_provider_that_issued_it() -> None:
    from_anthropic = DocumentBlock.from_file_id("file_011CNha8", provider="anthropic")
    request = _request(Message.user("read", from_anthropic))
    assert await _run(request, READS_ALL, make_call(provider="anthropic"))
    with pytest.raises(CapabilityError, match="issued by anthropic, and names no file on openai"):
        await _run(request, READS_ALL, make_call(provider="openai", model="openai:gpt-x"))
    call = make_call(provider="openai", model="openai:gpt-x")
    (sent,) = await _run(_history(from_anthropic), READS_ALL, call)
    assert sent.messages[0].content == [TextBlock(text="read this")]
    assert call.warnings[0].block_type == "document"
    assert "upload the file to openai's Files API, or give it inline" in call.warnings[0].reason
    # OpenAI's two APIs share one Files API; Azure's is another
    assert same_files("openai", "openai_responses") and same_files("openai_responses", "openai")
    assert not same_files("openai", "azure") and not same_files("anthropic", "bedrock_anthropic")


def test_unreadable_says_nothing_of_a_readable_block_and_media_type_is_guessed() -> None:
    assert unreadable(PDF, READS_ALL, "anthropic") is None
    no_extension = DocumentBlock.from_url("https://example.com/download?id=7")
    assert unreadable(no_extension, READS_ALL, "anthropic") is None  # the provider decides
    html = DocumentBlock.from_url("https://example.com/page.html")
    assert "text/html" in str(unreadable(html, READS_ALL, "anthropic"))


def test_the_turn_sent_starts_after_the_last_assistant_message() -> None:
    assert current_turn_start([Message.user("a")]) == 0
    messages = [Message.user("a"), Message.assistant("b"), Message.user("c"), Message.user("d")]
    assert current_turn_start(messages) == 2
    assert current_turn_start([*messages, Message.assistant("e")]) == 5


def test_fit_media_returns_the_request_itself_when_nothing_changes() -> None:
    request = _history(PDF)
    fitted, problems = fit_media(request, READS_ALL, "anthropic", lambda *a: None)
    assert fitted is request and problems == []


def _info(*modalities: str) -> ModelInfo:
    return ModelInfo(provider="x", id="m", input_modalities=modalities)


def test_the_catalog_narrows_file_inputs_per_model() -> None:
    declared = READS_ALL
    text_model = model_capabilities(declared, _info("text"))
    assert text_model.accepted_document_media_types == ["text/plain"]
    assert text_model.accepted_audio_media_types == []
    assert text_model.accepted_video_media_types == []
    # a vision model reads PDFs as page images even where the catalog lists no "pdf"
    vision = model_capabilities(declared, _info("text", "image"))
    assert vision.accepted_document_media_types == ["application/pdf", "text/plain"]
    everything = model_capabilities(declared, _info("text", "pdf", "audio", "video"))
    assert everything.accepted_audio_media_types == ["audio/wav", "audio/mpeg"]
    assert everything.accepted_video_media_types == ["video/mp4"]
    # an unknown catalog entry keeps the stack's declaration
    unknown = ModelInfo(provider="x", id="m", input_modalities=None)
    assert model_capabilities(declared, unknown) == declared


@pytest.mark.anyio
async def test_an_image_in_an_older_turn_of_a_model_that_sees_none_is_dropped_too() -> None:
    png = ImageBlock(source=Base64ImageSource(media_type="image/png", data="iVBO"))
    blind = TEXT_ONLY.model_copy(update={"supports_images": False})
    call = make_call()
    (sent,) = await _run(_history(png), blind, call)
    assert sent.messages[0].content == [TextBlock(text="read this")]
    assert [(w.block_type, w.reason) for w in call.warnings] == [
        ("image", "the model takes no image input")
    ]
    with pytest.raises(CapabilityError, match="images"):  # in the turn sent: refused
        await _run(_request(Message.user("look", png)), blind, make_call())
    bmp = ImageBlock(source=Base64ImageSource(media_type="image/bmp", data="Qk0="))
    picky = READS_ALL.model_copy(update={"accepted_image_media_types": ["image/png"]})
    call = make_call()
    await _run(_history(png, bmp), picky, call)
    assert [w.reason for w in call.warnings] == ["the model takes no image/bmp images"]


class _TaggedDocument(DocumentBlock):
    """An application's own document block: the walks tell blocks apart by ``type``, so a
    subclass is fitted as its base is."""

    tag: str = "mine"


@pytest.mark.anyio
async def test_a_subclassed_file_block_is_fitted_and_refused_as_its_base() -> None:
    tagged = _TaggedDocument(**PDF.model_dump())
    call = make_call()
    (sent,) = await _run(_history(tagged), TEXT_ONLY, call)
    assert sent.messages[0].content == [TextBlock(text="read this")]
    assert [w.block_type for w in call.warnings] == ["document"]
    with pytest.raises(CapabilityError, match="a document it cannot read"):
        await _run(_request(Message.user("what is in it?", tagged)), TEXT_ONLY, make_call())


@pytest.mark.anyio
async def test_an_image_file_id_goes_only_to_the_provider_that_issued_it() -> None:
    image = ImageBlock.from_file_id("file_011CNha8", provider="anthropic")
    request = _request(Message.user("look", image))
    assert await _run(request, READS_ALL, make_call(provider="anthropic"))
    with pytest.raises(CapabilityError, match="an image it cannot read: its file id was issued"):
        await _run(request, READS_ALL, make_call(provider="gemini", model="gemini:g"))
    call = make_call(provider="gemini", model="gemini:g")
    (sent,) = await _run(_history(image), READS_ALL, call)
    assert sent.messages[0].content == [TextBlock(text="read this")]
    assert call.warnings[0].block_type == "image"
    assert "upload the file to gemini's Files API, or give it inline" in call.warnings[0].reason
