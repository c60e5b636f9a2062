"""The Responses writer: a message's annotations (whole, and streamed after its text), the items
only the Responses API makes (a hosted tool's call with its progress events, a web search
opening with no action as the recorded streams do, a compaction item) as it wrote them,
reasoning with no summary (no summary events), the encrypted content known when the item is
added, the cache writes in the usage, and the ids and request echo a caller gives."""

from __future__ import annotations

import json
from typing import Any

from metis.gateway.inbound import Inbound
from metis.gateway.responses_api import ResponseStream
from metis.gateway.responses_items import output_items, response_object
from metis.histories.blocks import opaque
from metis.model.citation import Citation, TextSpan
from metis.model.content import ContentBlock, TextBlock, ThinkingBlock
from metis.model.events import CitationDelta, MessageComplete, TextDelta, ThinkingDelta
from metis.model.response import StopKind, StopReason, TokenUsage

CITED = Citation(kind="url", url="https://a.example", title="A", span=TextSpan(start=0, end=4))
ANNOTATION = {
    "type": "url_citation",
    "start_index": 0,
    "end_index": 4,
    "url": "https://a.example",
    "title": "A",
}
SEARCH = {
    "id": "ws_1",
    "type": "web_search_call",
    "status": "completed",
    "action": {"type": "search", "query": "a", "sources": [{"type": "url", "url": "https://a"}]},
}
CODE = {
    "id": "ci_1",
    "type": "code_interpreter_call",
    "status": "completed",
    "code": "print(1)",
    "container_id": "cntr_1",
    "outputs": None,
}
SEALED = Inbound(model="m", messages=[], options={"encrypted_reasoning": True})
END = StopReason(kind=StopKind.END_TURN)


def named(prefix: str) -> str:
    return prefix + "given"


def test_whole_output_keeps_annotations_hosted_items_and_given_ids() -> None:
    content: list[ContentBlock] = [
        ThinkingBlock(thinking="", signature="enc"),
        opaque("web_search_call", SEARCH, "openai_responses"),
        opaque("web_search_call", SEARCH, "anthropic"),  # another API's: left out
        TextBlock(text="A is", citations=[CITED]),
    ]
    output = output_items(content, SEALED, "resp_1", named)
    assert output[0] == {
        "id": "rs_given",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "enc",
    }
    assert output[1] == SEARCH
    assert output[2]["id"] == "msg_given"
    assert output[2]["content"][0]["annotations"] == [ANNOTATION]
    assert len(output) == 3


def test_the_response_echoes_what_it_is_given_and_counts_cache_writes() -> None:
    echo = {
        "instructions": "be brief",
        "max_output_tokens": 9,
        "parallel_tool_calls": False,
        "previous_response_id": None,
        "reasoning": {"effort": None, "summary": None},
        "store": False,
        "temperature": 0,
        "text": {"format": {"type": "text"}},
        "tool_choice": "none",
        "tools": [],
        "top_p": 0.5,
        "truncation": "auto",
        "metadata": {"k": "v"},
    }
    tokens = TokenUsage(input_tokens=2, cache_creation_input_tokens=3)
    written = response_object(SEALED, "m", "resp_1", [], END, tokens, echo)
    assert {k: written[k] for k in echo} == echo
    assert written["background"] is False and written["user"] is None
    assert written["usage"]["input_tokens"] == 5
    assert written["usage"]["input_tokens_details"]["cache_write_tokens"] == 3


def events(written: bytes) -> list[dict[str, Any]]:
    return [json.loads(e.partition(b"data: ")[2]) for e in written.split(b"\n\n")[:-1]]


def test_a_stream_writes_hosted_progress_annotations_and_summaryless_reasoning() -> None:
    writer = ResponseStream(SEALED, "m", "resp_1", ids=named)
    written = writer.kept(opaque("code_interpreter_call", CODE, "openai_responses"))
    written += writer.kept(opaque("web_search_call", SEARCH, "openai_responses"))
    written += writer.feed(ThinkingDelta(2, signature="enc"))
    written += writer.feed(CitationDelta(3, CITED))
    written += writer.feed(TextDelta(3, "A is"))
    written += writer.feed(MessageComplete([], END, TokenUsage()))
    got = events(written)
    assert [e["sequence_number"] for e in got] == list(range(len(got)))
    kinds = [e["type"].removeprefix("response.") for e in got]
    assert kinds[:8] == [
        "created",
        "in_progress",
        "output_item.added",
        "code_interpreter_call.in_progress",
        "code_interpreter_call_code.delta",
        "code_interpreter_call_code.done",
        "code_interpreter_call.interpreting",
        "code_interpreter_call.completed",
    ]
    assert got[2]["item"] == {**CODE, "status": "in_progress", "code": "", "outputs": None}
    searched = [k for k in kinds if k.startswith("web_search_call.")]
    assert searched == [
        "web_search_call.in_progress",
        "web_search_call.searching",
        "web_search_call.completed",
    ]
    added = [e["item"] for e in got if e["type"] == "response.output_item.added"]
    assert added[1] == {"id": "ws_1", "type": "web_search_call", "status": "in_progress"}
    assert added[2] == {
        "id": "rs_given",
        "type": "reasoning",
        "summary": [],
        "encrypted_content": "enc",
    }
    assert not any("reasoning_summary" in k for k in kinds)
    annotated = [e for e in got if e["type"] == "response.output_text.annotation.added"]
    assert [e["annotation"] for e in annotated] == [ANNOTATION]
    assert kinds.index("output_text.annotation.added") < kinds.index("output_text.done")
    final = got[-1]["response"]["output"]
    assert [item["id"] for item in final] == ["ci_1", "ws_1", "rs_given", "msg_given"]
    assert final[1] == SEARCH
    assert final[3]["content"][0]["annotations"] == [ANNOTATION]


CUT = StopReason(kind=StopKind.MAX_TOKENS)
PLAIN = Inbound(model="m", messages=[], options={})


def test_a_stream_cut_at_its_limit_marks_the_item_it_was_writing_incomplete() -> None:
    """As the API streams it (mirascope's recorded gpt-4o max-tokens stream): the message's
    ``output_item.done`` and the final response's item say ``incomplete``, its text kept."""
    writer = ResponseStream(PLAIN, "m", "resp_1", ids=named)
    written = writer.feed(TextDelta(0, "A is"))
    written += writer.feed(MessageComplete([], CUT, TokenUsage()))
    got = events(written)
    (done,) = [e["item"] for e in got if e["type"] == "response.output_item.done"]
    assert done["status"] == "incomplete"
    assert done["content"][0]["text"] == "A is"
    assert got[-1]["type"] == "response.incomplete"
    assert got[-1]["response"]["incomplete_details"] == {"reason": "max_output_tokens"}
    assert [item["status"] for item in got[-1]["response"]["output"]] == ["incomplete"]


def test_a_finished_stream_marks_its_items_completed() -> None:
    writer = ResponseStream(PLAIN, "m", "resp_1", ids=named)
    written = writer.feed(TextDelta(0, "A is"))
    written += writer.feed(MessageComplete([], END, TokenUsage()))
    (done,) = [e["item"] for e in events(written) if e["type"] == "response.output_item.done"]
    assert done["status"] == "completed"


def test_a_whole_reply_cut_at_its_limit_marks_only_its_last_item_incomplete() -> None:
    content: list[ContentBlock] = [TextBlock(text="first"), TextBlock(text="cut of")]
    output = output_items(content, PLAIN, "resp_1", named)
    body = response_object(PLAIN, "m", "resp_1", output, CUT, TokenUsage())
    assert body["status"] == "incomplete"
    assert [item["status"] for item in body["output"]] == ["completed", "incomplete"]
    assert body["output"][1]["content"][0]["text"] == "cut of"
    assert [item["status"] for item in output] == ["completed", "completed"]  # not edited
    done = response_object(PLAIN, "m", "resp_1", output, END, TokenUsage())
    assert [item["status"] for item in done["output"]] == ["completed", "completed"]
