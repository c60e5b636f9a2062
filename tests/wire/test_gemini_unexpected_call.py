"""Gemini's ``UNEXPECTED_TOOL_CALL`` (Vertex): the model called a tool the request did not
declare or enable. The call is no call to run (docs/contract.md §3): it is kept whole in the
reply as an opaque ``functionCall`` block, never a ToolUseBlock an agent loop would run, and
never sent back (Gemini would want its answer): left out with the section 8 WARN."""

from __future__ import annotations

import pytest

from metis.model import CanonicalRequest, Message, OpaqueBlock, Role, TextBlock, ToolUseBlock
from metis.model.response import StopKind

from ..helpers import recording_call
from .test_gemini import MODEL, chunk, codec, final_of, parse

CALL = {"functionCall": {"name": "delete_everything", "args": {"really": True}}}


@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
def test_an_unexpected_call_is_kept_whole_and_is_no_call_to_run(stream: bool) -> None:
    events = parse(chunk({"text": "Let me"}, CALL, finish="UNEXPECTED_TOOL_CALL"), stream=stream)
    final = final_of(events)
    assert not [b for b in final.final_content if isinstance(b, ToolUseBlock)]
    assert not [e for e in events[:-1] if e.type.startswith("tool.")]
    text, kept = final.final_content
    assert isinstance(text, TextBlock) and text.text == "Let me"
    assert isinstance(kept, OpaqueBlock) and kept.kind == "functionCall"
    assert kept.provider_raw.data["item"] == CALL  # nothing lost
    stop = final.stop_reason
    assert (stop.kind, stop.raw) == (StopKind.PROVIDER_SPECIFIC, "UNEXPECTED_TOOL_CALL")


def test_a_call_ending_well_is_still_a_call() -> None:
    final = final_of(parse(chunk(CALL, finish="STOP")))
    assert [type(b) for b in final.final_content] == [ToolUseBlock]
    assert final.stop_reason.kind is StopKind.TOOL_USE


def test_the_kept_call_is_not_sent_back_and_is_reported() -> None:
    final = final_of(parse(chunk({"text": "Let me"}, CALL, finish="UNEXPECTED_TOOL_CALL")))
    history = [
        Message.user("Tidy up"),
        Message(role=Role.ASSISTANT, content=final.final_content),
        Message.user("Go on"),
    ]
    call = recording_call(provider="gemini", model=MODEL)
    request = CanonicalRequest(model=MODEL, max_output_tokens=64, messages=history)
    body = codec().encode(request, call)
    assert body["contents"][1]["parts"] == [{"text": "Let me"}]
    assert [(d[0], d[2]["message_id"]) for d in call.dropped] == [("functionCall", "messages[1]")]
