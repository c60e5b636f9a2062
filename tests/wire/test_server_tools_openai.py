"""Server-side tools and citations on OpenAI's APIs (docs/contract.md §11, §12): Responses'
web_search and code_interpreter (declared, read whole and streamed, sent back), Chat
Completions' web_search_options and annotations, Perplexity's and xAI's source lists.

Wire samples follow openai-python's types (``responses/response_function_web_search.py``,
``responses/response_code_interpreter_tool_call.py``, ``responses/response_output_text.py``,
``chat/chat_completion_message.py``) and https://platform.openai.com/docs/guides/tools-web-search;
Perplexity's from https://docs.perplexity.ai/guides/chat-completions-guide.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from metis.errors import CapabilityError
from metis.model.content import Message, ServerToolCallBlock, ServerToolResultBlock, TextBlock
from metis.model.request import CanonicalRequest
from metis.model.server_tools import (
    CodeExecution,
    CodeOutput,
    SearchResult,
    UserLocation,
    WebFetch,
    WebSearch,
)
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from metis.wire.openai_chat import codec as chat
from tests.helpers import recording_call

responses = get_codec("openai_responses")
MODEL = "openai_responses:gpt-5"
SEARCH = {
    "type": "web_search_call",
    "id": "ws_67c9fa0502748190b7dd390736892e100be649c1a5ff9609",
    "status": "completed",
    "action": {
        "type": "search",
        "query": "positive news today",
        "sources": [{"type": "url", "url": "https://www.example.com/good"}],
    },
}
CODE = {
    "type": "code_interpreter_call",
    "id": "ci_68c3509faff0819e96f6d45e6faf7849",
    "status": "completed",
    "code": "print(2 + 2)",
    "container_id": "cntr_68c3509e",
    "outputs": [{"type": "logs", "logs": "4\n"}, {"type": "image", "url": "https://x/p.png"}],
}
ANNOTATION = {
    "type": "url_citation",
    "start_index": 3,
    "end_index": 11,
    "url": "https://www.example.com/good",
    "title": "Good news",
}
MESSAGE = {
    "type": "message",
    "id": "msg_67c9fa077e288190af08fdffda2e34f2",
    "status": "completed",
    "role": "assistant",
    "content": [{"type": "output_text", "text": "It is good news.", "annotations": [ANNOTATION]}],
}
RESPONSE = {
    "id": "resp_1",
    "object": "response",
    "model": "gpt-5",
    "status": "completed",
    "output": [SEARCH, CODE, MESSAGE],
    "usage": {"input_tokens": 10, "output_tokens": 5, "input_tokens_details": {"cached_tokens": 0}},
}


def request(*messages: Message, model: str = MODEL, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=model, messages=list(messages) or [Message.user("hi")], max_output_tokens=64, **kw
    )


def checked(events: list[Any]) -> list[Any]:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()
    return events[-1].final_content  # type: ignore[no-any-return]


def read_body(body: dict[str, Any], codec: Any = responses, model: str = MODEL) -> list[Any]:
    builder = MessageBuilder(model.split(":")[0], model)
    return checked(list(codec.parse_body(copy.deepcopy(body), builder)))


def read_stream(
    objs: list[dict[str, Any]], codec: Any = responses, model: str = MODEL
) -> list[Any]:
    parser = codec.stream_parser(MessageBuilder(model.split(":")[0], model))
    events = [event for obj in copy.deepcopy(objs) for event in parser.feed(obj)]
    return checked(events + list(parser.end()))


def responses_stream() -> list[dict[str, Any]]:
    """What the Responses API streams for RESPONSE."""
    head = {**RESPONSE, "status": "in_progress", "output": []}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": head}]
    for index, item in enumerate((SEARCH, CODE)):
        added = {**item, "status": "in_progress"}
        events += [
            {"type": "response.output_item.added", "output_index": index, "item": added},
            {"type": f"response.{item['type']}.in_progress", "output_index": index},
            {"type": "response.output_item.done", "output_index": index, "item": item},
        ]
    message = {**MESSAGE, "content": []}
    events += [
        {"type": "response.output_item.added", "output_index": 2, "item": message},
        {"type": "response.output_text.delta", "output_index": 2, "delta": "It is good news."},
        {
            "type": "response.output_text.annotation.added",
            "output_index": 2,
            "content_index": 0,
            "annotation_index": 0,
            "annotation": ANNOTATION,
        },
        {"type": "response.output_item.done", "output_index": 2, "item": MESSAGE},
        {"type": "response.completed", "response": RESPONSE},
    ]
    return events


# Responses ---------------------------------------------------------------------------------


def test_responses_declares_web_search_and_code_interpreter_and_asks_for_their_results() -> None:
    tools = [
        WebSearch(
            allowed_domains=["pubmed.ncbi.nlm.nih.gov"],
            context_size="low",
            user_location=UserLocation(country="GB", city="London", region="London"),
        ),
        CodeExecution(),
    ]
    body = responses.encode(request(server_tools=tools), recording_call(model=MODEL))
    assert body["tools"] == [
        {
            "type": "web_search",
            "filters": {"allowed_domains": ["pubmed.ncbi.nlm.nih.gov"]},
            "search_context_size": "low",
            "user_location": {
                "type": "approximate",
                "city": "London",
                "region": "London",
                "country": "GB",
            },
        },
        {"type": "code_interpreter", "container": {"type": "auto"}},
    ]
    assert body["include"] == ["web_search_call.action.sources", "code_interpreter_call.outputs"]


@pytest.mark.parametrize(
    ("tool", "words"),
    [
        (WebSearch(max_uses=2), "no max_uses"),
        (WebSearch(blocked_domains=["a.com"]), "no blocked_domains"),
        (WebFetch(), "has no web_fetch tool"),
    ],
)
def test_responses_refuses_what_it_cannot_take(tool: Any, words: str) -> None:
    with pytest.raises(CapabilityError, match=words):
        responses.encode(request(server_tools=[tool]), recording_call(model=MODEL))


def test_responses_items_read_as_server_blocks_and_citations() -> None:
    whole = read_body(RESPONSE)
    assert read_stream(responses_stream()) == whole
    search_call, search, code_call, code, text = whole
    assert isinstance(search_call, ServerToolCallBlock) and search_call.name == "web_search"
    assert search_call.input == {"type": "search", "query": "positive news today"}
    assert isinstance(search, ServerToolResultBlock) and search.tool_call_id == SEARCH["id"]
    assert search.search_results == [SearchResult(url="https://www.example.com/good")]
    assert code_call.name == "code_execution" and code_call.input["code"] == "print(2 + 2)"
    assert code.code_output == CodeOutput(stdout="4\n", files=["https://x/p.png"])
    assert isinstance(text, TextBlock) and text.citations is not None
    (cited,) = text.citations
    assert (cited.url, cited.title) == ("https://www.example.com/good", "Good news")
    assert cited.span is not None and text.text[cited.span.start : cited.span.end] == "is good "


def test_a_code_call_without_its_outputs_included_has_no_output() -> None:
    bare = {**CODE}
    del bare["outputs"]
    _, result = read_body({**RESPONSE, "output": [bare]})
    assert result.code_output is None and result.error is None


def test_responses_sends_each_item_back_once_to_its_model_and_text_elsewhere() -> None:
    reply = read_body(RESPONSE)
    history = [Message.user("news?"), Message.assistant(*reply), Message.user("more")]
    call = recording_call(provider="openai_responses", model=MODEL)
    body = responses.encode(request(*history), call)
    assert [i.get("type") for i in body["input"][1:4]] == [
        "web_search_call",
        "code_interpreter_call",
        "message",
    ]
    assert body["input"][1] == SEARCH and body["input"][2] == CODE
    other = recording_call(provider="openai_responses", model="openai_responses:gpt-4.1")
    body = responses.encode(request(*history, model="openai_responses:gpt-4.1"), other)
    assert "web_search_call" not in str(body["input"])
    assert "[code_execution" in str(body["input"]) and other.dropped == []


# Chat Completions --------------------------------------------------------------------------

CHAT_BODY = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "model": "gpt-4o-search-preview",
    "choices": [
        {
            "index": 0,
            "finish_reason": "stop",
            "message": {
                "role": "assistant",
                "content": "It is good news.",
                "annotations": [
                    {
                        "type": "url_citation",
                        "url_citation": {
                            "start_index": 3,
                            "end_index": 11,
                            "url": "https://www.example.com/good",
                            "title": "Good news",
                        },
                    }
                ],
            },
        }
    ],
    "usage": {"prompt_tokens": 9, "completion_tokens": 5},
}


def test_chat_search_models_take_web_search_options() -> None:
    model = "openai:gpt-4o-search-preview"
    where = UserLocation(country="GB", city="London")
    asked = request(model=model, server_tools=[WebSearch(context_size="high", user_location=where)])
    body = chat.encode(asked, recording_call(provider="openai", model=model))
    assert body["web_search_options"] == {
        "search_context_size": "high",
        "user_location": {
            "type": "approximate",
            "approximate": {"city": "London", "country": "GB"},
        },
    }
    assert "tools" not in body
    with pytest.raises(CapabilityError, match=r"only the search models .* openai_responses:gpt-4o"):
        chat.encode(request(model="openai:gpt-4o", server_tools=[WebSearch()]),
                    recording_call(provider="openai", model="openai:gpt-4o"))  # fmt: skip


def test_chat_annotations_read_as_citations_whole_and_streamed() -> None:
    model = "openai:gpt-4o-search-preview"
    whole = read_body(CHAT_BODY, chat, model)
    message = CHAT_BODY["choices"][0]["message"]  # type: ignore[index]
    chunks = [
        {"id": "chatcmpl-1", "model": "gpt-4o-search-preview",
         "choices": [{"index": 0, "delta": {"role": "assistant", "content": message["content"]}}]},
        {"id": "chatcmpl-1", "model": "gpt-4o-search-preview",
         "choices": [{"index": 0, "delta": {"annotations": message["annotations"]},
                      "finish_reason": "stop"}]},
    ]  # fmt: skip
    assert read_stream(chunks, chat, model) == whole
    (text,) = whole
    (cited,) = text.citations
    assert (cited.kind, cited.url, cited.span.start, cited.span.end) == (
        "url", "https://www.example.com/good", 3, 11,
    )  # fmt: skip


def test_chat_annotations_of_another_shape_are_passed_over_with_a_warn_each() -> None:
    model = "openai:gpt-4o-search-preview"
    body = copy.deepcopy(CHAT_BODY)
    body["choices"][0]["message"]["annotations"] = ["odd", {"type": "file_path"}]  # type: ignore[index]
    warned: list[str] = []
    builder = MessageBuilder("openai", model, lambda kind, message, **k: warned.append(message))
    (text,) = checked(list(chat.parse_body(body, builder)))
    assert text.citations is None
    assert warned == [
        "openai_chat annotation 'odd' has no canonical form",
        "openai_chat annotation file_path has no canonical form",
    ]


def test_a_responses_annotation_of_an_unknown_kind_is_passed_over_with_a_warn() -> None:
    odd = {"type": "quote_citation", "start_index": 0, "end_index": 2}
    message = {**MESSAGE, "content": [{**MESSAGE["content"][0], "annotations": [odd]}]}  # type: ignore[index]
    stream = responses_stream()
    stream[-3]["annotation"] = odd
    stream[-2]["item"] = message
    stream[-1]["response"] = {**RESPONSE, "output": [SEARCH, CODE, message]}
    said = "openai_responses annotation 'quote_citation' has no canonical form"
    warned: list[str] = []
    builder = MessageBuilder("openai_responses", MODEL, lambda k, m, **_: warned.append(m))
    (*_, text) = checked(list(responses.parse_body(stream[-1]["response"], builder)))
    assert warned == [said] and text.citations is None
    warned.clear()
    parser = responses.stream_parser(MessageBuilder("openai_responses", MODEL, builder.warn))
    (*_, streamed) = checked([e for obj in stream for e in parser.feed(obj)] + list(parser.end()))
    assert warned == [said] and streamed == text


def test_perplexity_takes_domain_filters_and_lists_its_sources() -> None:
    model = "perplexity:sonar"
    tool = WebSearch(blocked_domains=["pinterest.com"], context_size="low")
    body = chat.encode(
        request(model=model, server_tools=[tool]), recording_call("perplexity", model)
    )
    assert body["search_domain_filter"] == ["-pinterest.com"]
    assert body["web_search_options"] == {"search_context_size": "low"}
    reply = {
        "id": "p1",
        "model": "sonar",
        "citations": ["https://a.org/1", "https://b.org/2"],
        "search_results": [{"title": "B", "url": "https://b.org/2", "date": "2025-01-02"}],
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": "Yes [1][2]."}}],
    }  # fmt: skip
    (text,) = read_body(reply, chat, model)
    assert [(c.url, c.title) for c in text.citations] == [
        ("https://a.org/1", None),
        ("https://b.org/2", "B"),
    ]
    chunks = [
        {**reply, "choices": [{"index": 0, "delta": {"content": "Yes "}}]},
        {
            **reply,
            "choices": [{"index": 0, "delta": {"content": "[1][2]."}, "finish_reason": "stop"}],
        },
    ]
    assert read_stream(chunks, chat, model) == read_body(reply, chat, model)
