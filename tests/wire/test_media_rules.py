"""The file limits each provider documents, checked before sending (metis/wire/media_rules.py,
metis/wire/bedrock_converse/media.py): one violating body per rule, and the encoders' own
output passing."""

from __future__ import annotations

from typing import Any

from metis.model import CanonicalRequest, DocumentBlock, Message
from metis.wire import anthropic
from metis.wire.bedrock_converse import codec as converse
from metis.wire.rules import RULES

from ..helpers import make_call

MB = 1024 * 1024


def _b64(size: int) -> str:
    """Base64 text of ``size`` characters (the decoded file is three quarters of it)."""
    return "A" * size


def _anthropic(*content: dict[str, Any]) -> dict[str, Any]:
    return {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": [{"type": "text", "text": "?"}, *content]}],
    }


def _pdf(data: str, **extra: Any) -> dict[str, Any]:
    source = {"type": "base64", "media_type": "application/pdf", "data": data}
    return {"type": "document", "source": source, **extra}


def test_anthropic_limits() -> None:
    rules = RULES["anthropic"]
    assert rules(_anthropic(_pdf("JVBERi0x"))) == []
    assert rules(_anthropic(_pdf(_b64(33 * MB)))) == [
        "Request exceeds the maximum allowed number of bytes."  # Anthropic's 413
    ]
    mixed = _anthropic(_pdf("JVBE", citations={"enabled": True}), _pdf("JVBE"))
    assert rules(mixed) == ["Citations must be enabled on all documents or on none of them."]
    png = {"type": "base64", "media_type": "image/png", "data": _b64(5 * MB + 4)}
    assert rules(_anthropic({"type": "image", "source": png})) == [
        "messages.0.content.1.image.source.base64: image exceeds 5 MB maximum: "
        f"{5 * MB + 4} bytes > {5 * MB} bytes"
    ]
    small = {"type": "image", "source": {**png, "data": "iVBO"}}
    assert rules(_anthropic(*[small] * 101)) == [
        "messages: 101 images; a request holds at most 100"
    ]
    wrong = {"type": "base64", "media_type": "text/plain", "data": "aGk="}
    assert rules(_anthropic({"type": "document", "source": wrong})) == [
        "messages.0.content.1.document.source.base64.media_type: Input should be 'application/pdf'"
    ]
    unknown = {"type": "base64", "media_type": "application/pdf"}
    assert rules(_anthropic({"type": "document", "source": unknown})) == [
        "messages.0.content.1.document.source.base64.data: Field required"
    ]


def test_anthropic_limits_count_files_inside_tool_results() -> None:
    body = {
        "model": "claude-sonnet-4-5",
        "max_tokens": 64,
        "messages": [
            {"role": "user", "content": "go"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "f", "input": {}}],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": [_pdf(_b64(33 * MB))]}
                ],
            },
        ],
    }
    assert RULES["anthropic"](body) == ["Request exceeds the maximum allowed number of bytes."]


def test_the_encoded_request_meets_anthropic_rules() -> None:
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        messages=[Message.user("?", DocumentBlock.from_bytes(b"%PDF", "application/pdf"))],
        max_output_tokens=64,
    )
    assert RULES["anthropic"](anthropic.encode(request, make_call())) == []


def test_openai_chat_file_and_audio_parts() -> None:
    rules = RULES["openai_chat"]

    def body(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"model": "gpt-4o", "messages": [{"role": "user", "content": list(parts)}]}

    good = {
        "type": "file",
        "file": {"filename": "a.pdf", "file_data": "data:application/pdf;base64,JVBE"},
    }
    assert rules(body(good)) == []
    assert rules(body({"type": "file", "file": {"file_id": "file-abc"}})) == []
    text = {
        "type": "file",
        "file": {"filename": "a.txt", "file_data": "data:text/plain;base64,aGk="},
    }
    assert rules(body(text)) == [
        "messages.0.content.0.file.file_data: a PDF data URL (PDF files only)"
    ]
    both = {"type": "file", "file": {"file_id": "f", "file_data": "data:application/pdf;base64,J"}}
    assert "give one of file_data and file_id" in rules(body(both))[0]
    unnamed = {"type": "file", "file": {"file_data": "data:application/pdf;base64,JVBE"}}
    assert rules(body(unnamed)) == ["messages.0.content.0.file.filename: required with file_data"]
    flac = {"type": "input_audio", "input_audio": {"data": "ZkxhQw==", "format": "flac"}}
    assert rules(body(flac)) == ["messages.0.content.0.input_audio.format: wav or mp3"]


def test_openai_responses_input_file_gives_one_source() -> None:
    def body(part: dict[str, Any]) -> dict[str, Any]:
        return {"model": "gpt-5", "input": [{"type": "message", "role": "user", "content": [part]}]}

    rules = RULES["openai_responses"]
    assert rules(body({"type": "input_file", "file_id": "file-abc"})) == []
    two = {"type": "input_file", "file_id": "file-abc", "file_url": "https://x/a.pdf"}
    assert rules(body(two)) == ["input[0].content[0]: give one of file_data, file_id and file_url"]
    assert rules(body({"type": "input_file"})) == [
        "input[0].content[0]: give one of file_data, file_id and file_url"
    ]


def test_gemini_inline_limits() -> None:
    def body(*parts: dict[str, Any]) -> dict[str, Any]:
        return {"contents": [{"role": "user", "parts": [{"text": "?"}, *parts]}]}

    rules = RULES["gemini"]
    pdf = {"inlineData": {"mimeType": "application/pdf", "data": _b64(68 * MB)}}
    assert rules(body(pdf)) == ["contents[0].parts[1].inline_data: an inline PDF is at most 50 MB"]
    video = {"inlineData": {"mimeType": "video/mp4", "data": _b64(60 * MB)}}
    assert rules(body(video, video)) == [
        f"Request payload size exceeds the limit: {100 * MB} bytes."  # Gemini's words
    ]
    assert rules(body({"inlineData": {"data": "AA=="}})) == [
        "* GenerateContentRequest.contents[0].parts[1].inline_data: mime_type and data required"
    ]


def _converse_body(*blocks: dict[str, Any], role: str = "user") -> dict[str, Any]:
    return {"messages": [{"role": role, "content": list(blocks)}]}


def _document(name: str = "report", data: str = "JVBE") -> dict[str, Any]:
    return {"document": {"format": "pdf", "name": name, "source": {"bytes": data}}}


def test_converse_document_rules() -> None:
    rules = RULES["bedrock_converse"]
    text = {"text": "Summarise."}
    assert rules(_converse_body(text, _document())) == []
    assert rules(_converse_body(_document())) == [
        "messages.0: A conversation must include a text content block when it includes a "
        "document content block."
    ]
    six = [_document(f"d{i}") for i in range(6)]
    assert rules(_converse_body(text, *six)) == [
        "messages.0: You can include up to 5 documents in a message."
    ]
    for name in ("a.pdf", "two  spaces", "x" * 201):
        (problem,) = rules(_converse_body(text, _document(name)))
        assert problem.startswith(
            "messages.0.content.1.document.name: The document file name can only contain "
            "alphanumeric characters"
        )
    assert rules(_converse_body(text, _document(data=_b64(7 * MB)))) == [
        "messages.0.content.1: The document is larger than 4.5 MB."
    ]
    exe = {"document": {"format": "exe", "name": "d", "source": {"bytes": "AA=="}}}
    (problem,) = rules(_converse_body(text, exe))
    assert problem.startswith("messages.0.content.1.document.format: must be one of csv, doc")


def test_converse_image_video_and_role_rules() -> None:
    rules = RULES["bedrock_converse"]
    image = {"image": {"format": "png", "source": {"bytes": "iVBO"}}}
    assert rules(_converse_body({"text": "?"}, *[image] * 21)) == [
        "messages.0: 21 images; at most 20 per message"
    ]
    big_video = {"video": {"format": "mp4", "source": {"bytes": _b64(25 * MB)}}}
    assert rules(_converse_body({"text": "?"}, big_video)) == [
        "messages.0.content.1.video: a video as bytes is under 25 MB (as base64)"
    ]
    body = {
        "messages": [
            {"role": "user", "content": [{"text": "hi"}]},
            {"role": "assistant", "content": [{"text": "see"}, image]},
        ]
    }
    assert rules(body) == [
        "messages.1: images and documents can only be included in user messages."
    ]


def test_the_encoded_request_meets_converse_rules() -> None:
    request = CanonicalRequest(
        model="bedrock:m",
        messages=[
            Message.user("?", DocumentBlock.from_bytes(b"%PDF", "application/pdf", title="a/b.pdf"))
        ],
        max_output_tokens=64,
    )
    body = converse.encode(request, make_call(provider="bedrock", model="bedrock:m"))
    assert RULES["bedrock_converse"](body) == []
