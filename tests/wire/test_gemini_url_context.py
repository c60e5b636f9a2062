"""Gemini's URL context tool in a reply (docs/contract.md §11): the candidate's
``urlContextMetadata`` becomes a ``web_fetch`` server-tool call and result per URL, streamed and
whole, the same; a URL not read is a result with its retrieval status as ``error``. Wire samples:
python-genai ``types.py`` (``UrlContextMetadata.url_metadata``, ``UrlMetadata.retrieved_url``,
``url_retrieval_status``, ``UrlRetrievalStatus``) and the example response of
https://ai.google.dev/gemini-api/docs/url-context.
"""

from __future__ import annotations

import copy
from typing import Any

from metis.model.content import Message, ServerToolCallBlock, ServerToolResultBlock, TextBlock
from metis.model.events import ServerToolCall, ServerToolResult
from metis.model.request import CanonicalRequest
from metis.model.server_tools import WEB_FETCH, SearchResult
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.anthropic import codec as anthropic
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from tests.helpers import recording_call

MODEL = "gemini:gemini-2.5-flash"
codec = get_codec("schema", load_stack("gemini").codec_settings)
ANSWER = "Both recipes use flour; the first adds eggs."
URL_CONTEXT = {
    "urlMetadata": [
        {
            "retrievedUrl": "https://www.foodnetwork.com/recipes/ina-garten/perfect-roast-chicken",
            "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_SUCCESS",
        },
        {
            "retrievedUrl": "https://www.allrecipes.com/recipe/21151/simple-whole-roast-chicken/",
            "urlRetrievalStatus": "URL_RETRIEVAL_STATUS_ERROR",
        },
    ]
}


def chunk(text: str, finish: bool = False, **fields: Any) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}, **fields}
    if finish:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 5}}


def read(*objs: dict[str, Any], streamed: bool) -> tuple[list[Any], list[Any]]:
    warned: list[str] = []
    builder = MessageBuilder("gemini", MODEL, lambda kind, *a, **k: warned.append(kind))
    if streamed:
        parser = codec.stream_parser(builder)
        events = [event for obj in objs for event in parser.feed(copy.deepcopy(obj))]
        events += parser.end()
    else:
        events = list(codec.parse_body(copy.deepcopy(objs[0]), builder))
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    assert warned == []
    return events[-1].final_content, events  # type: ignore[no-any-return]


def test_url_context_metadata_reads_as_a_fetch_per_url_streamed_and_whole() -> None:
    whole, _ = read(chunk(ANSWER, finish=True, urlContextMetadata=URL_CONTEXT), streamed=False)
    half = len(ANSWER) // 2
    streamed, events = read(
        chunk(ANSWER[:half]),
        chunk(ANSWER[half:], finish=True, urlContextMetadata=URL_CONTEXT),
        streamed=True,
    )
    assert streamed == whole
    text, call, read_ok, failed_call, failed = whole
    assert text == TextBlock(text=ANSWER)
    read_url, failed_url = (e["retrievedUrl"] for e in URL_CONTEXT["urlMetadata"])
    assert isinstance(call, ServerToolCallBlock)
    assert (call.name, call.input) == (WEB_FETCH, {"url": read_url})
    assert isinstance(read_ok, ServerToolResultBlock) and read_ok.tool_call_id == call.id
    assert read_ok.search_results == [SearchResult(url=read_url)] and read_ok.error is None
    assert isinstance(failed_call, ServerToolCallBlock) and failed_call.input == {"url": failed_url}
    assert isinstance(failed, ServerToolResultBlock) and failed.tool_call_id == failed_call.id
    assert (failed.search_results, failed.error) == (None, "URL_RETRIEVAL_STATUS_ERROR")
    assert [type(e) for e in events if isinstance(e, ServerToolCall | ServerToolResult)] == [
        ServerToolCall,
        ServerToolResult,
    ] * 2
    assert call.provider_raw is not None and call.provider_raw.model == MODEL


def test_empty_or_late_metadata_is_read_once() -> None:
    """Metadata present but empty is nothing; the last non-empty one counts."""
    content, _ = read(
        chunk("a", urlContextMetadata={}),
        chunk("b", urlContextMetadata=URL_CONTEXT),
        chunk("c", finish=True, urlContextMetadata={}),
        streamed=True,
    )
    assert [b.type for b in content].count("server_tool_call") == 2
    assert content[0] == TextBlock(text="abc")
    nothing, _ = read(chunk("a", finish=True, urlContextMetadata={}), streamed=False)
    assert nothing == [TextBlock(text="a")]


def test_fetches_shown_as_tool_call_parts_are_not_read_twice() -> None:
    """With ``includeServerSideToolInvocations`` the fetch is a ``toolCall`` part already."""
    used = {"toolCall": {"id": "t1", "toolType": "URL_CONTEXT", "args": {"urls": ["u"]}}}
    answer = {"toolResponse": {"id": "t1", "toolType": "URL_CONTEXT", "response": {}}}
    obj = chunk(ANSWER, finish=True, urlContextMetadata=URL_CONTEXT)
    obj["candidates"][0]["content"]["parts"][:0] = [used, answer]
    content, _ = read(obj, streamed=False)
    assert [b.type for b in content] == ["server_tool_call", "server_tool_result", "text"]


def test_the_fetches_go_to_gemini_as_nothing_and_elsewhere_as_text() -> None:
    reply, _ = read(chunk(ANSWER, finish=True, urlContextMetadata=URL_CONTEXT), streamed=False)
    history = [
        Message.user("Compare these recipes."),
        Message.assistant(*reply),
        Message.user("ok"),
    ]
    request = CanonicalRequest(model=MODEL, messages=history, max_output_tokens=64)
    call = recording_call("gemini", MODEL)
    body = codec.encode(request, call)
    assert body["contents"][1]["parts"] == [{"text": ANSWER}]
    assert call.warnings == []
    elsewhere = recording_call("anthropic", "anthropic:claude-sonnet-4-6")
    sent = anthropic.encode(
        request.model_copy(update={"model": "anthropic:claude-sonnet-4-6"}), elsewhere
    )
    texts = [b["text"] for b in sent["messages"][1]["content"]]
    assert texts[0] == ANSWER
    assert texts[1].startswith('[web_fetch {"url": "https://www.foodnetwork.com')
    assert texts[2].endswith("failed: URL_RETRIEVAL_STATUS_ERROR")


def test_an_entry_naming_no_url_keeps_its_status_and_one_not_an_object_is_reported() -> None:
    """python-genai's ``UrlMetadata.retrieved_url`` is optional: an entry without it is still
    a fetch Gemini made, its status what became of it; never silently left out."""
    unnamed = {"urlRetrievalStatus": "URL_RETRIEVAL_STATUS_UNSAFE"}
    metadata = {"urlMetadata": [unnamed, *URL_CONTEXT["urlMetadata"][:1]]}
    content, _ = read(chunk(ANSWER, finish=True, urlContextMetadata=metadata), streamed=False)
    _, call, result, named_call, _ = content
    assert isinstance(call, ServerToolCallBlock) and (call.name, call.input) == (WEB_FETCH, {})
    assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
    assert (result.error, result.search_results) == ("URL_RETRIEVAL_STATUS_UNSAFE", None)
    assert call.provider_raw is not None and call.provider_raw.data == {"urlMetadata": unnamed}
    assert named_call.input == {"url": URL_CONTEXT["urlMetadata"][0]["retrievedUrl"]}
    warned: list[str] = []
    builder = MessageBuilder("gemini", MODEL, lambda kind, *a, **k: warned.append(kind))
    odd = chunk(ANSWER, finish=True, urlContextMetadata={"urlMetadata": ["not an entry"]})
    final = list(codec.parse_body(odd, builder))[-1].final_content
    assert warned == ["urlMetadata"] and [b.type for b in final] == ["text"]
