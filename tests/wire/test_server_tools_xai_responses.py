"""xAI's server-side tools through the Responses stack (docs/contract.md §11): the calls xAI
makes and runs itself (web search, X search, code execution, viewing a video) come as
``custom_tool_call`` items named for the tool, or as ``web_search_call`` / ``x_search_call`` /
``code_interpreter_call`` items with a ``name`` and JSON ``arguments``. They are server tool
calls and results, never tool calls for the application to run; a freeform tool the request
declared under the same name is still the application's. Hand-written in the shapes xAI's
replies have. Sans-IO."""

from __future__ import annotations

from typing import Any

from metis.model.content import ServerToolCallBlock, ServerToolResultBlock, TextBlock
from metis.model.events import MessageComplete, ServerToolCall, StreamEvent, ToolUseStart
from metis.model.response import StopKind
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses import OpenAIResponsesCodec
from tests.helpers import checked_final, recording_call

codec = OpenAIResponsesCodec()
X_SEARCH_TOOLS = [{"type": "x_search"}, {"type": "web_search"}]


def response(status: str, output: list[Any], tools: list[Any] | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": "resp_7",
        "object": "response",
        "model": "grok-4",
        "output": output,
    }
    body["status"] = status
    if tools is not None:
        body["tools"] = tools
    if status == "completed":
        body["usage"] = {"input_tokens": 900, "output_tokens": 40}
    return body


def custom_call(name: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {
        "type": "custom_tool_call",
        "id": f"ctc_7_{name}",
        "call_id": f"xs_call_{name}",
        "name": name,
        "input": text,
        "status": status,
    }


MESSAGE = {
    "type": "message",
    "id": "msg_7",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Two posts say so.", "annotations": []}],
}


def streamed(tools: list[Any] | None, *calls: dict[str, Any]) -> list[StreamEvent]:
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": response("in_progress", [], tools)}
    ]
    for index, call in enumerate(calls):
        events.append(
            {
                "type": "response.output_item.added",
                "output_index": index,
                "item": {**call, "input": "", "status": "in_progress"},
            }
        )
        for piece in (call["input"][:9], call["input"][9:]):
            events.append(
                {"type": "response.custom_tool_call_input.delta", "output_index": index,
                 "item_id": call["id"], "delta": piece}
            )  # fmt: skip
        events.append(
            {"type": "response.custom_tool_call_input.done", "output_index": index,
             "item_id": call["id"], "input": call["input"]}
        )  # fmt: skip
        events.append({"type": "response.output_item.done", "output_index": index, "item": call})
    last = len(calls)
    events += [
        {"type": "response.output_item.added", "output_index": last,
         "item": {**MESSAGE, "content": []}},
        {"type": "response.output_text.delta", "output_index": last, "content_index": 0,
         "item_id": "msg_7", "delta": "Two posts say so."},
        {"type": "response.output_item.done", "output_index": last, "item": MESSAGE},
        {"type": "response.completed",
         "response": response("completed", [*calls, MESSAGE], tools)},
    ]  # fmt: skip
    parser = codec.stream_parser(MessageBuilder("openai_responses", "openai_responses:grok-4"))
    out = [event for obj in events for event in parser.feed(obj)]
    return [*out, *parser.end()]


SEARCHED = custom_call("x_keyword_search", '{"query": "from:xai", "limit": 20}')
WATCHED = custom_call("view_x_video", '{"video_url": "https://video.example/v.mp4"}')


def test_streamed_custom_calls_of_xais_server_tools_are_server_tool_calls() -> None:
    events = streamed(X_SEARCH_TOOLS, SEARCHED, WATCHED)
    done = checked_final(events)
    assert not [e for e in events if isinstance(e, ToolUseStart)]  # nothing for the app to run
    calls = [e for e in events if isinstance(e, ServerToolCall)]
    assert [(c.block.name, c.block.input) for c in calls] == [
        ("x_keyword_search", {"query": "from:xai", "limit": 20}),
        ("view_x_video", {"video_url": "https://video.example/v.mp4"}),
    ]
    assert done.stop_reason.kind is StopKind.END_TURN
    kinds = [type(block) for block in done.final_content]
    assert kinds == [ServerToolCallBlock, ServerToolResultBlock] * 2 + [TextBlock]
    assert done.final_content[0].id == "ctc_7_x_keyword_search"
    assert done.final_content[0].provider_raw.data["item"] == SEARCHED


def test_a_freeform_tool_the_request_declared_under_that_name_is_the_applications() -> None:
    tools = [*X_SEARCH_TOOLS, {"type": "custom", "name": "x_keyword_search"}]
    events = streamed(tools, SEARCHED)
    done = checked_final(events)
    assert [e.tool_name for e in events if isinstance(e, ToolUseStart)] == ["x_keyword_search"]
    assert done.stop_reason.kind is StopKind.TOOL_USE


def test_a_reply_that_echoes_no_tools_reads_custom_calls_as_before() -> None:
    events = streamed(None, SEARCHED)
    assert checked_final(events).stop_reason.kind is StopKind.TOOL_USE


def test_whole_replies_read_xais_named_call_items_with_their_arguments() -> None:
    output = [
        {"type": "web_search_call", "id": "fc_1", "call_id": "", "name": "web_search",
         "arguments": '{"query": "what is xAI", "num_results": 5}', "status": "completed"},
        {"type": "x_search_call", "id": "fc_2", "call_id": "", "name": "x_semantic_search",
         "arguments": '{"query": "AI", "limit": 20}', "status": "completed"},
        {"type": "code_interpreter_call", "id": "fc_3", "call_id": "", "name": "code_execution",
         "arguments": '{"code": "print(6 * 7)"}', "status": "completed"},
        custom_call("browse_page", '{"url": "https://x.ai"}', status="failed"),
        MESSAGE,
    ]  # fmt: skip
    body = response("completed", output, [*X_SEARCH_TOOLS, {"type": "code_interpreter"}])
    done = codec.parse_body(body, MessageBuilder("openai_responses", "openai_responses:grok-4"))
    final = done[-1]
    assert isinstance(final, MessageComplete)
    assert final.stop_reason.kind is StopKind.END_TURN
    calls = [b for b in final.final_content if isinstance(b, ServerToolCallBlock)]
    assert [(c.name, c.input) for c in calls] == [
        ("web_search", {"query": "what is xAI", "num_results": 5}),
        ("x_semantic_search", {"query": "AI", "limit": 20}),
        ("code_execution", {"code": "print(6 * 7)"}),
        ("browse_page", {"url": "https://x.ai"}),
    ]
    results = [b for b in final.final_content if isinstance(b, ServerToolResultBlock)]
    assert [r.error for r in results] == [None, None, None, "failed"]


def test_the_calls_go_back_to_xai_as_the_items_they_came_as() -> None:
    done = checked_final(streamed(X_SEARCH_TOOLS, SEARCHED, WATCHED))
    call = recording_call("openai_responses", "openai_responses:grok-4")
    items = codec.output_items(done.final_content, call)
    assert items[:2] == [SEARCHED, WATCHED]
