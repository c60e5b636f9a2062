"""File blocks on each stack's wire (docs/contract.md §9), against the shapes of the official
SDKs' request types: anthropic ``DocumentBlockParam`` (and its ``Base64PDFSourceParam``,
``URLPDFSourceParam``, ``PlainTextSourceParam``, ``FileDocumentSourceParam``) and
``ToolResultBlockParam``; openai ``ChatCompletionContentPartParam`` (``File``,
``ChatCompletionContentPartInputAudioParam``), ``ResponseInputFileParam`` and
``ResponseFunctionCallOutputItemParam``; google-genai ``Part``, ``Blob``, ``FileData`` and
``FunctionResponse.parts``; botocore's Converse ``DocumentBlock``, ``AudioBlock``,
``VideoBlock`` and ``ToolResultContentBlock``. Each is encoded streamed and whole."""

from __future__ import annotations

from typing import Any

import pytest

from metis.errors import CapabilityError
from metis.model import (
    AudioBlock,
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    Message,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
    VideoBlock,
)
from metis.stacks.loader import load_stack
from metis.wire import anthropic
from metis.wire.anthropic import bedrock as bedrock_anthropic
from metis.wire.bedrock_converse import codec as converse
from metis.wire.codec import get_codec
from metis.wire.openai_chat import codec as chat
from metis.wire.openai_responses import OpenAIResponsesCodec

from ..helpers import recording_call

PDF = "JVBERi0xLjcKJcfsj6IK"  # b"%PDF-1.7\n%\xc7\xec\x8f\xa2\n"
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEA"
MP4 = "AAAAIGZ0eXBpc29tAAACAGlzb21pc28y"
REPORT = DocumentBlock.from_bytes(
    b"%PDF-1.7\n%\xc7\xec\x8f\xa2\n",
    "application/pdf",
    title="Q3 report",
    context="Internal, unaudited.",
    citations=True,
)


def _request(*messages: Message, stream: bool = False) -> CanonicalRequest:
    return CanonicalRequest(
        model="x:m", messages=list(messages), max_output_tokens=64, stream=stream
    )


def _ask(*blocks: Any, stream: bool = False) -> CanonicalRequest:
    return _request(Message.user("What does it say?", *blocks), stream=stream)


def _older(*blocks: Any) -> CanonicalRequest:
    """``blocks`` in an earlier turn, then a new question."""
    return _request(
        Message.user("Read this.", *blocks), Message.assistant("Read."), Message.user("Well?")
    )


def _tool_loop(*parts: Any) -> CanonicalRequest:
    return _request(
        Message.user("Fetch the scan."),
        Message.assistant(ToolUseBlock(id="call_1", name="fetch")),
        Message.tool(
            ToolResultBlock(tool_use_id="call_1", content=[TextBlock(text="scan:"), *parts])
        ),
    )


STREAMED = pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])


# Anthropic Messages ------------------------------------------------------------------------


@STREAMED
def test_anthropic_documents_by_each_source(stream: bool) -> None:
    call = recording_call("anthropic", "anthropic:claude-sonnet-4-5")
    request = _ask(
        REPORT,
        DocumentBlock.from_url("https://example.com/paper.pdf"),
        DocumentBlock.from_text("Revenue rose 4%.", title="notes"),
        DocumentBlock.from_file_id("file_011CNha8iCJcU1wXNR6q4V8w", provider="anthropic"),
        stream=stream,
    )
    body = anthropic.encode(request, call)
    assert body["stream"] is stream
    assert body["messages"][0]["content"][1:] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "Q3 report",
            "context": "Internal, unaudited.",
            "citations": {"enabled": True},
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}},
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": "Revenue rose 4%."},
            "title": "notes",
        },
        {
            "type": "document",
            "source": {"type": "file", "file_id": "file_011CNha8iCJcU1wXNR6q4V8w"},
        },
    ]
    assert call.dropped == []


def test_anthropic_a_file_id_source_sends_the_files_beta_header() -> None:
    """A ``source: {type: file}`` block is the Files API's: Messages took it only with
    ``anthropic-beta: files-api-2025-04-14`` ("Input tag 'file' found using 'type' does not
    match any of the expected tags" without, anthropics/anthropic-sdk-ruby#127, #99; the
    Files API page), and requests that still send it keep working since it is GA. In the
    message or in a tool result alike; a body without one sends no beta."""
    doc = DocumentBlock.from_file_id("file_011CNha8iCJcU1wXNR6q4V8w", provider="anthropic")
    beta = {"anthropic-beta": "files-api-2025-04-14"}
    for request in (_ask(doc), _tool_loop(doc)):
        body = anthropic.encode(request, recording_call())
        assert anthropic.codec.headers_for(body) == beta  # type: ignore[attr-defined]
    plain = anthropic.encode(_ask(REPORT), recording_call())
    assert anthropic.codec.headers_for(plain) == {}  # type: ignore[attr-defined]


def test_anthropic_plain_text_given_as_base64_goes_as_a_text_source() -> None:
    doc = DocumentBlock.from_bytes("café".encode(), "text/plain")
    body = anthropic.encode(_ask(doc), recording_call())
    assert body["messages"][0]["content"][1]["source"] == {
        "type": "text",
        "media_type": "text/plain",
        "data": "café",
    }


def test_anthropic_documents_and_images_in_a_tool_result() -> None:
    body = anthropic.encode(_tool_loop(REPORT), recording_call())
    (result,) = body["messages"][2]["content"]
    assert result["type"] == "tool_result"
    assert [part["type"] for part in result["content"]] == ["text", "document"]
    assert result["content"][1]["source"]["data"] == PDF


def test_anthropic_has_no_audio_refused_in_the_turn_sent_dropped_before() -> None:
    audio = AudioBlock.from_bytes(b"RIFF", "audio/wav")
    with pytest.raises(CapabilityError, match=r"audio in messages\[0\]: Anthropic takes no"):
        anthropic.encode(_ask(audio), recording_call())
    call = recording_call()
    body = anthropic.encode(_older(audio), call)
    assert body["messages"][0]["content"] == [{"type": "text", "text": "Read this."}]
    assert call.dropped_types == ["audio"]
    html_url = DocumentBlock.from_url("https://example.com/page.html")
    with pytest.raises(CapabilityError, match="fetches only PDFs by URL, not text/html"):
        anthropic.encode(_ask(html_url), recording_call())


def test_claude_on_bedrock_takes_the_same_document_block() -> None:
    call = recording_call("bedrock_anthropic", "bedrock_anthropic:anthropic.claude-sonnet-4-5")
    body = bedrock_anthropic.encode(_ask(REPORT), call)
    assert body["messages"][0]["content"][1]["type"] == "document"
    assert "model" not in body and "stream" not in body


# OpenAI Chat Completions -------------------------------------------------------------------


@STREAMED
def test_chat_pdf_and_audio_parts(stream: bool) -> None:
    call = recording_call("openai", "openai:gpt-4o-audio-preview")
    request = _ask(
        REPORT,
        DocumentBlock.from_file_id("file-6F2ksmvXxt4VdoqmHRw6kL", provider="openai"),
        AudioBlock.from_bytes(
            b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00", "audio/wav"
        ),
        AudioBlock.from_bytes(b"ID3", "audio/mpeg"),
        stream=stream,
    )
    body = chat.encode(request, call)
    assert body["stream"] is stream
    assert body["messages"][0]["content"] == [
        {"type": "text", "text": "What does it say?"},
        {"type": "text", "text": "Internal, unaudited."},  # the context: no field for it
        {
            "type": "file",
            "file": {
                "filename": "Q3 report.pdf",
                "file_data": f"data:application/pdf;base64,{PDF}",
            },
        },
        {"type": "file", "file": {"file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"}},
        {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}},
        {"type": "input_audio", "input_audio": {"data": "SUQz", "format": "mp3"}},
    ]


def test_chat_takes_no_file_by_url_and_no_video() -> None:
    by_url = DocumentBlock.from_url("https://example.com/paper.pdf")
    with pytest.raises(CapabilityError, match="not by URL"):
        chat.encode(_ask(by_url), recording_call("openai", "openai:gpt-4o"))
    call = recording_call("openai", "openai:gpt-4o")
    clip = VideoBlock.from_bytes(b"\x00\x00\x00 ftypisom", "video/mp4")
    body = chat.encode(_older(by_url, clip), call)
    assert body["messages"][0] == {"role": "user", "content": "Read this."}
    assert call.dropped_types == ["document", "video"]


def test_chat_tool_result_files_follow_in_a_user_message() -> None:
    tool, user = chat.encode(_tool_loop(REPORT), recording_call("openai", "openai:gpt-4o"))[
        "messages"
    ][2:]
    assert tool == {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "scan:\n[document 'Q3 report' follows in the next message]",
    }
    assert [part["type"] for part in user["content"]] == ["text", "file"]
    assert user["role"] == "user"


# OpenAI Responses --------------------------------------------------------------------------


@STREAMED
def test_responses_input_file_by_each_source(stream: bool) -> None:
    call = recording_call("openai_responses", "openai_responses:gpt-5")
    request = _ask(
        REPORT,
        DocumentBlock.from_url("https://www.berkshirehathaway.com/letters/2024ltr.pdf"),
        DocumentBlock.from_file_id("file-6F2ksmvXxt4VdoqmHRw6kL", provider="openai"),
        DocumentBlock.from_text("a,b\n1,2\n", media_type="text/csv", title="table"),
        stream=stream,
    )
    body = OpenAIResponsesCodec().encode(request, call)
    assert body["stream"] is stream
    (message,) = body["input"]
    assert message["content"] == [
        {"type": "input_text", "text": "What does it say?"},
        {"type": "input_text", "text": "Internal, unaudited."},
        {
            "type": "input_file",
            "filename": "Q3 report.pdf",
            "file_data": f"data:application/pdf;base64,{PDF}",
        },
        {
            "type": "input_file",
            "file_url": "https://www.berkshirehathaway.com/letters/2024ltr.pdf",
        },
        {"type": "input_file", "file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"},
        {
            "type": "input_file",
            "filename": "table.csv",
            "file_data": "data:text/csv;base64,YSxiCjEsMgo=",
        },
    ]


def test_responses_function_call_output_holds_files() -> None:
    body = OpenAIResponsesCodec().encode(_tool_loop(REPORT), recording_call("openai_responses"))
    output = body["input"][2]
    assert output["type"] == "function_call_output"
    assert [part["type"] for part in output["output"]] == ["input_text", "input_text", "input_file"]


def test_azure_responses_fetches_no_file_by_url() -> None:
    (encode,) = [s for s in load_stack("azure_responses").stages if s.name == "encode"]
    codec = get_codec("openai_responses", encode.options["settings"])
    by_url = DocumentBlock.from_url("https://example.com/paper.pdf")
    with pytest.raises(CapabilityError, match="no files by URL"):
        codec.encode(_ask(by_url), recording_call("azure_responses", "azure_responses:gpt-5"))
    assert codec.encode(_ask(REPORT), recording_call("azure_responses"))["input"]


# Gemini and Vertex --------------------------------------------------------------------------


def _gemini() -> Any:
    (encode,) = [s for s in load_stack("gemini").stages if s.name == "encode"]
    return get_codec("schema", encode.options["settings"])


@STREAMED
def test_gemini_inline_data_and_file_data_parts(stream: bool) -> None:
    call = recording_call("gemini", "gemini:gemini-2.5-flash")
    request = _ask(
        REPORT,
        DocumentBlock.from_file_id(
            "https://generativelanguage.googleapis.com/v1beta/files/abc123",
            provider="gemini",
            media_type="application/pdf",
        ),
        AudioBlock.from_bytes(b"RIFF", "audio/wav"),
        VideoBlock.from_url("https://www.youtube.com/watch?v=9hE5-98ZeCg"),
        VideoBlock.from_bytes(b"\x00\x00\x00 ftypisom", "video/mp4"),
        stream=stream,
    )
    body = _gemini().encode(request, call)
    assert body["contents"][0]["parts"] == [
        {"text": "What does it say?"},
        {"text": "Q3 report\n\nInternal, unaudited."},  # title and context: no field for them
        {"inlineData": {"mimeType": "application/pdf", "data": PDF}},
        {
            "fileData": {
                "mimeType": "application/pdf",
                "fileUri": "https://generativelanguage.googleapis.com/v1beta/files/abc123",
            }
        },
        {"inlineData": {"mimeType": "audio/wav", "data": "UklGRg=="}},
        {"fileData": {"fileUri": "https://www.youtube.com/watch?v=9hE5-98ZeCg"}},
        {"inlineData": {"mimeType": "video/mp4", "data": "AAAAIGZ0eXBpc29t"}},
    ]
    assert call.dropped == []


def test_gemini_3_takes_media_inside_the_function_response() -> None:
    call = recording_call("gemini", "gemini:gemini-3-pro-preview")
    contents = _gemini().encode(_tool_loop(REPORT), call)["contents"]
    (part,) = contents[2]["parts"]
    response = part["functionResponse"]
    assert response["response"] == {"output": "scan:\nQ3 report\n\nInternal, unaudited."}
    assert response["parts"] == [{"inlineData": {"mimeType": "application/pdf", "data": PDF}}]


def test_earlier_gemini_models_get_the_media_after_the_function_responses() -> None:
    """In the same content as the function responses, and said so. Before: "follows in the
    next message", which there was none of."""
    call = recording_call("gemini", "gemini:gemini-2.5-flash")
    contents = _gemini().encode(_tool_loop(REPORT), call)["contents"]
    assert len(contents) == 3
    response, preamble, file = contents[2]["parts"]
    assert response["functionResponse"]["response"] == {
        "output": "scan:\n[document 'Q3 report' follows after the tool results]"
    }
    assert "parts" not in response["functionResponse"]
    assert preamble == {"text": "Q3 report\n\nInternal, unaudited."}
    assert file == {"inlineData": {"mimeType": "application/pdf", "data": PDF}}
    assert call.dropped == []


# Bedrock Converse --------------------------------------------------------------------------


def _converse(request: CanonicalRequest) -> tuple[dict[str, Any], Any]:
    call = recording_call("bedrock", "bedrock:us.anthropic.claude-sonnet-4-5")
    return converse.encode(request, call), call


@STREAMED
def test_converse_document_audio_and_video_blocks(stream: bool) -> None:
    body, call = _converse(
        _ask(
            REPORT,
            DocumentBlock.from_text(
                "Revenue rose 4%.", media_type="text/markdown", title="notes.md"
            ),
            DocumentBlock.from_file_id("s3://my-bucket/contracts/lease.pdf", provider="bedrock"),
            AudioBlock.from_bytes(b"ID3", "audio/mpeg"),
            VideoBlock.from_bytes(b"\x00\x00\x00 ftypisom", "video/mp4"),
            stream=stream,
        )
    )
    assert body["messages"][0]["content"] == [
        {"text": "What does it say?"},
        {
            "document": {
                "format": "pdf",
                "name": "Q3 report",
                "source": {"bytes": PDF},
                "context": "Internal, unaudited.",
                "citations": {"enabled": True},
            }
        },
        {"document": {"format": "md", "name": "notes", "source": {"text": "Revenue rose 4%."}}},
        {
            "document": {
                "format": "pdf",
                "name": "document",
                "source": {"s3Location": {"uri": "s3://my-bucket/contracts/lease.pdf"}},
            }
        },
        {"audio": {"format": "mp3", "source": {"bytes": "SUQz"}}},
        {"video": {"format": "mp4", "source": {"bytes": "AAAAIGZ0eXBpc29t"}}},
    ]
    assert call.dropped == []


def test_converse_document_names_are_neutral_and_unique() -> None:
    body, _ = _converse(
        _ask(
            DocumentBlock.from_bytes(b"%PDF", "application/pdf", title="Q3: results (final).pdf"),
            DocumentBlock.from_bytes(b"%PDF", "application/pdf", title="Q3: results (final)"),
            DocumentBlock.from_bytes(b"%PDF", "application/pdf"),
        )
    )
    names = [b["document"]["name"] for b in body["messages"][0]["content"][1:]]
    assert names == ["Q3 results (final)", "Q3 results (final) (2)", "document"]


def test_converse_audio_in_a_tool_result_follows_it_and_documents_stay_in_it() -> None:
    audio = AudioBlock.from_bytes(b"ID3", "audio/mpeg")
    body, _ = _converse(_tool_loop(REPORT, audio))
    result, moved = body["messages"][2]["content"]
    assert [next(iter(part)) for part in result["toolResult"]["content"]] == [
        "text",
        "document",
        "text",
    ]
    # in the same message, and said so (before: "follows in the next message")
    said = {"text": "[audio 1 follows after this tool result]"}
    assert result["toolResult"]["content"][2] == said
    assert moved == {"audio": {"format": "mp3", "source": {"bytes": "SUQz"}}}


def test_converse_takes_no_file_by_url_nor_a_file_in_an_assistant_turn() -> None:
    with pytest.raises(CapabilityError, match="not by URL"):
        _converse(_ask(DocumentBlock.from_url("https://example.com/a.pdf")))
    picture = ImageBlock.from_url("https://example.com/cat.png")
    with pytest.raises(CapabilityError, match="cannot take the image in messages"):
        _converse(_ask(picture))  # it was left out, and the model answered without it
    body, call = _converse(
        _request(Message.user("See", picture), Message.assistant("A cat."), Message.user("ok"))
    )
    assert body["messages"][0]["content"] == [{"text": "See"}]
    assert call.dropped_types == ["image"]
    body, call = _converse(
        _request(Message.user("hi"), Message.assistant("See:", REPORT), Message.user("ok"))
    )
    assert body["messages"][1]["content"] == [{"text": "See:"}]
    assert call.dropped_types == ["document"]
    assert "assistant" in call.dropped[0][1]


def test_ollama_refuses_an_image_by_url_in_the_turn_sent_and_drops_it_from_an_older_one() -> None:
    """It was dropped from the turn sent too, with a warning: the model answered unseeing."""
    from metis.wire import ollama

    picture = ImageBlock.from_url("https://example.com/cat.png")
    with pytest.raises(CapabilityError, match=r"cannot take the image in messages.*no URL"):
        ollama.encode(_ask(picture), recording_call("ollama", "ollama:llava"))
    call = recording_call("ollama", "ollama:llava")
    body = ollama.encode(_older(picture), call)
    assert call.dropped_types == ["image"]
    assert "images" not in body["messages"][0]


def test_anthropic_takes_documents_in_user_messages_only() -> None:
    call = recording_call()
    request = _request(Message.user("hi"), Message.assistant("See:", REPORT), Message.user("ok"))
    body = anthropic.encode(request, call)
    assert body["messages"][1]["content"] == [{"type": "text", "text": "See:"}]
    assert call.dropped_types == ["document"] and "user messages" in call.dropped[0][1]
