"""Documents and audio in stored histories (metis.histories), both formats, both ways: the
shapes of the SDKs' ``File`` / ``ChatCompletionContentPartInputAudioParam`` and Anthropic's
``DocumentBlockParam``, and a WARN for what a format cannot hold."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.histories import from_anthropic, from_openai_chat, to_anthropic, to_openai_chat
from metis.model import (
    AudioBlock,
    Base64Source,
    DocumentBlock,
    FileIdSource,
    Message,
    Role,
    TextBlock,
    TextSource,
    ToolResultBlock,
    ToolUseBlock,
    URLSource,
    VideoBlock,
)

PDF = "JVBERi0xLjcK"
CHAT_USER = {
    "role": "user",
    "content": [
        {"type": "text", "text": "Summarise both."},
        {
            "type": "file",
            "file": {"filename": "report.pdf", "file_data": f"data:application/pdf;base64,{PDF}"},
        },
        {"type": "file", "file": {"file_id": "file-6F2ksmvXxt4VdoqmHRw6kL"}},
        {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
    ],
}


def _lossy(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        str(getattr(r, "block_type", ""))
        for r in caplog.records
        if getattr(r, "event", "") == "metis.lossy_projection"
    ]


def test_chat_file_and_audio_parts_come_in() -> None:
    (message,) = from_openai_chat([CHAT_USER])
    text, report, by_id, audio = message.content
    assert text == TextBlock(text="Summarise both.")
    assert report == DocumentBlock(
        source=Base64Source(media_type="application/pdf", data=PDF), title="report.pdf"
    )
    assert by_id == DocumentBlock(
        source=FileIdSource(file_id="file-6F2ksmvXxt4VdoqmHRw6kL", provider="openai")
    )
    assert audio == AudioBlock(source=Base64Source(media_type="audio/wav", data="UklGRg=="))


def test_chat_parts_go_out_as_they_came_in() -> None:
    assert to_openai_chat(from_openai_chat([CHAT_USER])) == [CHAT_USER]


@pytest.mark.parametrize(
    ("part", "words"),
    [
        ({"type": "input_audio", "input_audio": {"data": "x", "format": "flac"}}, "wav or mp3"),
        ({"type": "file", "file": {"file_data": "data:application/pdf,JVBE"}}, "base64 data URL"),
        ({"type": "file", "file": {}}, r"file\.file_data: missing"),
        ({"type": "file"}, r"content\[0\]\.file: expected an object"),
        # a lone surrogate no string field takes: named, not pydantic's bare ValidationError
        ({"type": "file", "file": {"file_id": "\ud800"}}, r"content\[0\]\.file\.file_id"),
        ({"type": "file", "file": {"file_data": "\ud800"}}, r"content\[0\]\.file\.data"),
        ({"type": "input_audio", "input_audio": {"data": "\ud800", "format": "wav"}}, "data"),
    ],
)
def test_malformed_chat_files_are_invalid_requests_naming_where(
    part: dict[str, Any], words: str
) -> None:
    with pytest.raises(InvalidRequestError, match=words):
        from_openai_chat([{"role": "user", "content": [part]}])


def test_an_assistant_audio_reply_by_id_is_left_out_with_a_warn_not_silently(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stored = {"role": "assistant", "content": "Here it is.", "audio": {"id": "audio_abc123"}}
    with caplog.at_level(logging.WARNING, logger="metis"):
        (message,) = from_openai_chat([stored])
    assert [block.type for block in message.content] == ["text"]
    (record,) = [r for r in caplog.records if getattr(r, "event", "") == "metis.lossy_projection"]
    assert record.getMessage() == "dropped audio at messages[0].audio: an audio reply kept by id"


def test_chat_export_leaves_out_what_chat_cannot_hold_with_a_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    message = Message.user(
        "hi",
        DocumentBlock.from_file_id("file_011CNha8", provider="anthropic"),
        DocumentBlock.from_url("https://example.com/a.pdf"),
        VideoBlock.from_url("https://example.com/a.mp4"),
        AudioBlock.from_bytes(b"fLaC", "audio/flac"),
    )
    with caplog.at_level(logging.WARNING, logger="metis"):
        assert to_openai_chat([message]) == [{"role": "user", "content": "hi"}]
    assert _lossy(caplog) == ["document", "document", "video", "audio"]


def test_chat_export_of_a_tool_result_file_follows_in_a_user_message() -> None:
    history = [
        Message.user("scan"),
        Message.assistant(ToolUseBlock(id="tu_1", name="scan")),
        Message.tool(
            ToolResultBlock(
                tool_use_id="tu_1",
                content=[
                    TextBlock(text="done"),
                    DocumentBlock.from_bytes(b"%PDF", "application/pdf"),
                ],
            )
        ),
    ]
    out = to_openai_chat(history)
    assert out[2] == {
        "role": "tool",
        "tool_call_id": "tu_1",
        "content": "done\n[document 1 follows in the next message]",
    }
    assert out[3]["role"] == "user"
    assert out[3]["content"][0]["file"]["filename"] == "document.pdf"


ANTHROPIC_USER = {
    "role": "user",
    "content": [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "Q3 report",
            "context": "Unaudited.",
            "citations": {"enabled": True},
        },
        {"type": "document", "source": {"type": "url", "url": "https://example.com/paper.pdf"}},
        {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": "hi"}},
        {"type": "document", "source": {"type": "file", "file_id": "file_011CNha8"}},
        {"type": "text", "text": "Compare them."},
    ],
}


def test_anthropic_documents_come_in_and_go_out() -> None:
    (message,) = from_anthropic([ANTHROPIC_USER])
    report, paper, note, stored, _ = message.content
    assert report == DocumentBlock(
        source=Base64Source(media_type="application/pdf", data=PDF),
        title="Q3 report",
        context="Unaudited.",
        citations=True,
    )
    assert paper.source == URLSource(url="https://example.com/paper.pdf")
    assert note.source == TextSource(text="hi")
    assert stored.source == FileIdSource(file_id="file_011CNha8", provider="anthropic")
    assert to_anthropic([message]) == {"messages": [ANTHROPIC_USER]}


@pytest.mark.parametrize(
    "source",
    [
        {"type": "url", "url": "\ud800"},
        {"type": "base64", "media_type": "application/pdf", "data": "\ud800"},
        {"type": "file", "file_id": "\ud800"},
    ],
)
def test_a_malformed_anthropic_document_is_an_invalid_request_naming_where(
    source: dict[str, Any],
) -> None:
    document = {"type": "document", "source": source}
    with pytest.raises(InvalidRequestError, match=r"content\[0\]\.source\."):
        from_anthropic([{"role": "user", "content": [document]}])


def test_anthropic_documents_in_tool_results() -> None:
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [ANTHROPIC_USER["content"][0], {"type": "text", "text": "page 1"}],
    }
    history = [
        {"role": "user", "content": "read"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "toolu_1", "name": "read", "input": {}}],
        },
        {"role": "user", "content": [result]},
    ]
    messages = from_anthropic(history)
    assert messages[2].role is Role.TOOL
    (block,) = messages[2].content
    assert isinstance(block, ToolResultBlock) and isinstance(block.content, list)
    assert isinstance(block.content[0], DocumentBlock)
    exported = to_anthropic(messages)["messages"][2]["content"][0]
    assert exported["content"] == result["content"]


def test_anthropic_leaves_out_what_it_cannot_hold_with_a_warn(
    caplog: pytest.LogCaptureFixture,
) -> None:
    custom = {"type": "document", "source": {"type": "content", "content": "chunks"}}
    with caplog.at_level(logging.WARNING, logger="metis"):
        text = {"type": "text", "text": "t"}
        (message,) = from_anthropic([{"role": "user", "content": [custom, text]}])
        assert message.content == [TextBlock(text="t")]
        out = to_anthropic(
            [
                Message.user(
                    "t",
                    DocumentBlock.from_file_id("file-abc", provider="openai"),
                    AudioBlock.from_bytes(b"RIFF", "audio/wav"),
                    DocumentBlock.from_bytes(b"PK", "application/msword"),
                )
            ]
        )
    assert out == {"messages": [{"role": "user", "content": [{"type": "text", "text": "t"}]}]}
    assert _lossy(caplog) == ["document", "document", "audio", "document"]


def test_a_chat_pdf_moves_to_anthropic_form_whole() -> None:
    (message,) = from_openai_chat([CHAT_USER])
    exported = to_anthropic([message])["messages"][0]["content"]
    assert exported[1] == {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
        "title": "report.pdf",
    }
