"""One reader of Responses requests (issue 25 item 2): the gateway's codec reads every input
part and item the API takes (files, audio, refusals, custom tool calls), and the emulator reads
its Responses requests through it, after its own rules have checked the raw body."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from metis.errors import InvalidRequestError
from metis.gateway.responses_read import read_responses
from metis.model.content import ImageBlock, Role, TextBlock, ToolResultBlock, ToolUseBlock
from metis.model.media import AudioBlock, Base64Source, DocumentBlock, FileIdSource, URLSource
from metis.testing.emulator import Emulator
from metis.testing.emulator.model import Prompt, Reply
from metis.testing.emulator.script import text

PDF = "data:application/pdf;base64,JVBERi0xLjQK"


def _user(*parts: dict[str, Any]) -> dict[str, Any]:
    return {"role": "user", "content": list(parts)}


def test_files_audio_and_refusals_are_read() -> None:
    inbound = read_responses(
        {
            "model": "m",
            "input": [
                _user(
                    {"type": "input_file", "file_id": "file-abc"},
                    {"type": "input_file", "filename": "a.pdf", "file_data": PDF},
                    {"type": "input_file", "file_url": "https://example.com/b.pdf"},
                    {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}},
                    {"type": "input_image", "file_id": "file-img"},
                ),
                {"role": "assistant", "content": [{"type": "refusal", "refusal": "I can't."}]},
            ],
        }
    )
    user, assistant = inbound.messages
    by_id, inline, by_url, audio, image = user.content
    assert isinstance(by_id, DocumentBlock) and isinstance(by_id.source, FileIdSource)
    assert by_id.source.file_id == "file-abc"
    assert isinstance(inline, DocumentBlock) and isinstance(inline.source, Base64Source)
    assert inline.source.media_type == "application/pdf" and inline.title == "a.pdf"
    assert isinstance(by_url, DocumentBlock) and isinstance(by_url.source, URLSource)
    assert by_url.source.media_type == "application/pdf"
    assert isinstance(audio, AudioBlock) and audio.source.media_type == "audio/wav"
    assert assistant.content == [TextBlock(text="I can't.")]
    assert image == ImageBlock.from_file_id("file-img", provider="openai")  # OpenAI's store
    assert inbound.ignored == []


def test_custom_tool_calls_and_their_outputs_are_read_as_chats_are() -> None:
    inbound = read_responses(
        {
            "model": "m",
            "input": [
                _user({"type": "input_text", "text": "Run it."}),
                {"type": "custom_tool_call", "call_id": "c1", "name": "sh", "input": "ls -la"},
                {"type": "custom_tool_call_output", "call_id": "c1", "output": "a.txt"},
            ],
        }
    )
    assert [m.role for m in inbound.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    (call,) = inbound.messages[1].content
    (result,) = inbound.messages[2].content
    assert isinstance(call, ToolUseBlock) and call.name == "sh"
    assert call.input == {"input": "ls -la"}
    assert isinstance(result, ToolResultBlock) and result.tool_use_id == call.id
    assert result.text == "a.txt" and inbound.ignored == []


@pytest.mark.parametrize(
    ("item", "where"),
    [
        ({"type": "custom_tool_call", "call_id": "c", "name": "sh", "input": 3}, "input[0].input"),
        (
            _user({"type": "input_audio", "input_audio": {"data": "x", "format": "ogg"}}),
            "content[0].input_audio",
        ),
        (_user({"type": "input_file", "file_data": "data:;base64,"}), "content[0].file_data"),
    ],
)
def test_a_malformed_part_is_a_classified_error(item: dict[str, Any], where: str) -> None:
    with pytest.raises(InvalidRequestError, match=re.escape(where)):
        read_responses({"model": "m", "input": [item]})


def test_the_emulator_reads_a_responses_conversation_through_the_gateway_codec() -> None:
    seen: list[Prompt] = []

    def model(prompt: Prompt) -> Reply:
        seen.append(prompt)
        return text("done")

    body = {
        "model": "gpt-5",
        "instructions": "Be brief.",
        "tools": [{"type": "custom", "name": "sh", "description": "a shell"}],
        "input": [
            _user(
                {"type": "input_text", "text": "Read this and run ls."},
                {"type": "input_file", "filename": "a.pdf", "file_data": PDF},
            ),
            {"type": "custom_tool_call", "call_id": "call_1", "name": "sh", "input": "ls"},
            {"type": "custom_tool_call_output", "call_id": "call_1", "output": "a.txt"},
        ],
    }
    with Emulator(model=model, models="any") as emulator:
        reply = httpx.post(
            f"{emulator.url}/v1/responses", json=body, headers={"authorization": "Bearer k"}
        )
    assert reply.status_code == 200, reply.text
    (prompt,) = seen
    assert prompt.system.startswith("Be brief.")
    user, assistant, results = prompt.turns
    assert user.text == "Read this and run ls."
    assert [(c.name, c.args) for c in assistant.calls] == [("sh", {"input": "ls"})]
    assert [(r.call_id, r.content) for r in results.results] == [(assistant.calls[0].id, "a.txt")]


def test_the_emulator_still_refuses_what_its_rules_refuse_before_reading() -> None:
    body = {
        "model": "gpt-5",
        "input": [{"type": "function_call_output", "call_id": "nowhere", "output": "x"}],
    }
    with Emulator(models="any") as emulator:
        reply = httpx.post(
            f"{emulator.url}/v1/responses", json=body, headers={"authorization": "Bearer k"}
        )
    assert reply.status_code == 400
    assert "nowhere" in reply.json()["error"]["message"]


def test_the_emulator_answers_the_last_of_several_user_messages() -> None:
    # Codex CLI sends its environment and instructions as user messages of their own before
    # the prompt; the scripted model answers the prompt, not the joined text
    body = {
        "model": "gpt-5",
        "input": [
            _user(
                {
                    "type": "input_text",
                    "text": "<environment_context>cwd /tmp/Say</environment_context>",
                }
            ),
            _user({"type": "input_text", "text": "Say hi"}),
        ],
    }
    with Emulator(models="any") as emulator:
        reply = httpx.post(
            f"{emulator.url}/v1/responses", json=body, headers={"authorization": "Bearer k"}
        )
    assert reply.status_code == 200, reply.text
    (message,) = [item for item in reply.json()["output"] if item["type"] == "message"]
    assert message["content"][0]["text"] == "You said: Say hi"
