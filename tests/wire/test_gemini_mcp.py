"""Gemini's server-side MCP calls (``tools: [{mcpServers: [...]}]``): a ``functionCall`` the
reply answers itself with a ``functionResponse`` is a call the provider ran (docs/contract.md
§11). The shapes follow js-genai's recorded MCP tests: the whole reply holds the call, its
response and the answer in one candidate; the stream says STOP on the call's chunk already.
"""

from __future__ import annotations

import copy
import json
import logging
from typing import Any

import pytest

from metis.model.content import (
    Message,
    ServerToolCallBlock,
    ServerToolResultBlock,
    TextBlock,
    ToolUseBlock,
)
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind
from metis.stacks.loader import load_stack
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.unicode_text import clean_value
from tests.helpers import checked_final, recording_call

MODEL = "gemini:gemini-2.5-flash"
codec = get_codec("schema", load_stack("gemini").codec_settings)
ARGS = {"location": "Lyon", "date": "2026-03-01"}
CALL = {"functionCall": {"name": "meteo_forecast", "args": ARGS}}
ANSWERED = {
    "functionResponse": {
        "name": "meteo_forecast",
        "response": {"result": '{"max":"11C","min":"3C"}'},
    }
}
LOSSY = "metis.lossy_projection"
TEXT = "Lyon will see 3 to 11 degrees."


def chunk(*parts: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}, "index": 0}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 9, "candidatesTokenCount": 4},
        "modelVersion": "gemini-2.5-flash",
        "responseId": "r7",
    }


def read(*objs: dict[str, Any], streamed: bool = False) -> Any:
    builder = MessageBuilder("gemini", MODEL)
    if streamed:
        parser = codec.stream_parser(builder)
        events = [event for obj in objs for event in parser.feed(copy.deepcopy(obj))]
        events += parser.end()
    else:
        events = list(codec.parse_body(copy.deepcopy(objs[0]), builder))
    return checked_final(events)


def request(*messages: Message, model: str = MODEL) -> CanonicalRequest:
    return CanonicalRequest(model=model, messages=list(messages), max_output_tokens=64)


def test_a_call_the_reply_answers_is_a_server_call_whole_and_streamed() -> None:
    whole = read(chunk(CALL, ANSWERED, {"text": TEXT}, finish="STOP"))
    streamed = read(
        chunk(CALL, finish="STOP"),
        chunk(ANSWERED),
        chunk({"text": TEXT[:9]}),
        chunk({"text": TEXT[9:]}, finish="STOP"),
        streamed=True,
    )
    for final in (whole, streamed):
        call, result, text = final.final_content
        assert isinstance(call, ServerToolCallBlock) and call.name == "meteo_forecast"
        assert call.input == ARGS
        assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
        assert result.name == "meteo_forecast"
        assert isinstance(text, TextBlock) and text.text == TEXT
        assert final.stop_reason.kind is StopKind.END_TURN
    assert streamed.final_content == whole.final_content


def test_ids_must_agree_when_both_carry_one() -> None:
    call = {"functionCall": {**CALL["functionCall"], "id": "c1"}}
    other = {"functionResponse": {**ANSWERED["functionResponse"], "id": "c2"}}
    final = read(chunk(call, other, finish="STOP"))
    assert isinstance(final.final_content[0], ToolUseBlock)
    assert final.stop_reason.kind is StopKind.TOOL_USE
    same = {"functionResponse": {**ANSWERED["functionResponse"], "id": "c1"}}
    final = read(chunk(call, same, finish="STOP"))
    assert [b.type for b in final.final_content] == ["server_tool_call", "server_tool_result"]
    assert final.final_content[0].id == "c1"


def test_parallel_calls_answered_after_them_are_both_server_calls() -> None:
    second = {"functionCall": {"name": "meteo_now", "args": {}}}
    answer2 = {"functionResponse": {"name": "meteo_now", "response": {"result": "7C"}}}
    final = read(
        chunk(CALL, second, finish="STOP"),
        chunk(ANSWERED, answer2),
        chunk({"text": TEXT}),
        streamed=True,
    )
    kinds = [b.type for b in final.final_content]
    assert kinds == ["server_tool_call"] * 2 + ["server_tool_result"] * 2 + ["text"]
    assert final.stop_reason.kind is StopKind.END_TURN


def test_an_ordinary_call_is_still_a_tool_call_the_application_runs() -> None:
    for final in (
        read(chunk({"text": "Let me look."}, CALL, finish="STOP")),
        read(chunk({"text": "Let me look."}), chunk(CALL, finish="STOP"), streamed=True),
    ):
        text, call = final.final_content
        assert isinstance(text, TextBlock) and isinstance(call, ToolUseBlock)
        assert call.name == "meteo_forecast" and call.input == ARGS
        assert final.stop_reason.kind is StopKind.TOOL_USE
    # a call then text (no response): the call stays the application's, in its place
    final = read(chunk(CALL, finish="STOP"), chunk({"text": TEXT}), streamed=True)
    assert [b.type for b in final.final_content] == ["tool_use", "text"]
    assert final.stop_reason.kind is StopKind.TOOL_USE


def test_the_parts_go_back_to_gemini_as_gemini_wrote_them() -> None:
    reply = read(chunk(CALL, ANSWERED, {"text": TEXT}, finish="STOP")).final_content
    history = [Message.user("Weather in Lyon?"), Message.assistant(*reply), Message.user("ok")]
    body = codec.encode(request(*history), recording_call("gemini", MODEL))
    sent = body["contents"][1]["parts"]
    assert json.dumps(sent[:2]) == json.dumps([CALL, ANSWERED])
    assert sent[2] == {"text": TEXT}


def test_a_swap_to_anthropic_or_openai_projects_the_pair_away(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reply = read(chunk(CALL, ANSWERED, {"text": TEXT}, finish="STOP")).final_content
    history = [Message.user("Weather in Lyon?"), Message.assistant(*reply), Message.user("ok")]
    for stack, model in (("anthropic", "anthropic:claude-sonnet-4-5"), ("openai", "openai:gpt-4o")):
        caplog.clear()
        other = get_codec(load_stack(stack).codec, load_stack(stack).codec_settings)
        with caplog.at_level(logging.WARNING, logger="metis"):
            body = other.encode(request(*history, model=model), recording_call(stack, model))
        sent = json.dumps(body)
        assert "meteo_forecast" not in sent and "tool_use" not in sent
        assert "tool_calls" not in sent and TEXT in sent
        warned = [r for r in caplog.records if getattr(r, "event", None) == LOSSY]
        assert [r.block_type for r in warned] == ["server_tool_result"]  # type: ignore[attr-defined]


def test_a_failed_call_goes_elsewhere_as_its_failure() -> None:
    failed = {"functionResponse": {"name": "meteo_forecast", "response": {"error": "timeout"}}}
    reply = read(chunk(CALL, failed, {"text": "No luck."}, finish="STOP")).final_content
    assert reply[1].error == "timeout"
    history = [Message.user("Weather in Lyon?"), Message.assistant(*reply), Message.user("ok")]
    model = "anthropic:claude-sonnet-4-5"
    body = get_codec("anthropic").encode(
        request(*history, model=model), recording_call("anthropic", model)
    )
    said = body["messages"][1]["content"][0]["text"]
    assert said == '[meteo_forecast {"date": "2026-03-01", "location": "Lyon"}] failed: timeout\n\n'


def test_a_lone_surrogate_in_a_server_pair_is_replaced_so_the_reply_encodes() -> None:
    """A JSON escape can make a lone surrogate; the pair keeps U+FFFD in its place, as every
    other part the codec reads, and the reply dumps as UTF-8."""
    hostile = json.loads('"Ly\\ud83don"')
    call = {"functionCall": {"name": "meteo_forecast", "args": {"location": hostile}}}
    answered = {"functionResponse": {"name": "meteo_forecast", "response": {"result": hostile}}}
    final = read(chunk(call, finish="STOP"), chunk(answered), chunk({"text": TEXT}), streamed=True)
    server_call, server_result = final.final_content[:2]
    assert server_call.input == {"location": "Ly\ufffdon"}
    assert server_result.provider_raw.data["part"] == clean_value(answered)
    json.dumps(final.to_dict(), ensure_ascii=False).encode("utf-8")
