"""Server-side tools and citations (docs/contract.md §11, §12): the canonical declarations and
blocks, Anthropic's wire forms both ways (whole and streamed), the projection to other
providers, the stream invariants, and run_tools passing the blocks over.

Wire samples follow anthropic-sdk-python's types (``web_search_tool_20250305_param``,
``server_tool_use_block``, ``web_search_tool_result_block``, ``code_execution_tool_result_block``,
``citation_char_location``, ``citations_web_search_result_location``) and the examples of
https://platform.claude.com/docs/en/agents-and-tools/tool-use/web-search-tool.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

import metis
from metis.errors import CapabilityError, InvariantViolation
from metis.model.capabilities import AdapterCapabilities
from metis.model.citation import Citation
from metis.model.content import Message, ProviderRaw, TextBlock, ToolUseBlock
from metis.model.events import CitationDelta, ServerToolCall, ServerToolResult
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, StopKind, StopReason, TokenUsage
from metis.model.server_tools import (
    CodeExecution,
    CodeOutput,
    ProviderTool,
    SearchResult,
    ServerToolCallBlock,
    ServerToolResultBlock,
    UserLocation,
    WebFetch,
    WebSearch,
    projected_text,
)
from metis.stacks.loader import load_stack
from metis.stages.policy.capability_check import unmet_needs
from metis.stages.policy.invariants import StreamChecker
from metis.wire.anthropic import codec
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from tests.helpers import recording_call

MODEL = "anthropic:claude-sonnet-4-5"
SEARCH_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "name": "web_search",
    "input": {"query": "claude shannon birth date"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01WYG3ziw53XMcoyKL4XcZmE",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
            "title": "Claude Shannon - Wikipedia",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAwMjY1Mi1mZjM5LTQ1NGUtODgxNC1kNjNjNTk1ZWI3Y",
            "page_age": "April 30, 2025",
        }
    ],
}
WEB_CITATION = {
    "type": "web_search_result_location",
    "url": "https://en.wikipedia.org/wiki/Claude_Shannon",
    "title": "Claude Shannon - Wikipedia",
    "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0OWJmZi1lNm..",
    "cited_text": "Claude Elwood Shannon (April 30, 1916 - February 24, 2001) was an American",
}
CITED_TEXT = {
    "type": "text",
    "text": "Claude Shannon was born on April 30, 1916, in Petoskey, Michigan",
    "citations": [WEB_CITATION],
}
CODE_CALL = {
    "type": "server_tool_use",
    "id": "srvtoolu_01A2B3C4D5E6F7G8H9I0J1K2",
    "name": "code_execution",
    "input": {"code": "print(sum(range(10)))"},
}
CODE_RESULT = {
    "type": "code_execution_tool_result",
    "tool_use_id": "srvtoolu_01A2B3C4D5E6F7G8H9I0J1K2",
    "content": {
        "type": "code_execution_result",
        "stdout": "45\n",
        "stderr": "",
        "return_code": 0,
        "content": [{"type": "code_execution_output", "file_id": "file_011CPf8Qn2"}],
    },
}
BODY = {
    "id": "msg_01",
    "type": "message",
    "role": "assistant",
    "model": "claude-sonnet-4-5",
    "content": [
        {"type": "text", "text": "I'll search for when Claude Shannon was born."},
        SEARCH_CALL,
        SEARCH_RESULT,
        CITED_TEXT,
    ],
    "stop_reason": "end_turn",
    "usage": {
        "input_tokens": 6039,
        "output_tokens": 931,
        "server_tool_use": {"web_search_requests": 1},
    },
}


def request(*messages: Message, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODEL, messages=list(messages) or [Message.user("hi")], max_output_tokens=64, **kw
    )


def read_body(body: dict[str, Any], builder: MessageBuilder | None = None) -> list[Any]:
    """The events of a whole reply, checked by the stream invariants."""
    events = list(codec.parse_body(body, builder or MessageBuilder("anthropic", MODEL)))
    checked(events)
    return events


def read_stream(objs: list[dict[str, Any]]) -> list[Any]:
    parser = codec.stream_parser(MessageBuilder("anthropic", MODEL))
    events = [event for obj in objs for event in parser.feed(obj)]
    events += parser.end()
    checked(events)
    return events


def checked(events: list[Any]) -> None:
    checker = StreamChecker()
    for event in events:
        checker.check(event)
    checker.check_ended()


def final_content(events: list[Any]) -> list[Any]:
    return events[-1].final_content  # type: ignore[no-any-return]


def stream_of(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream Anthropic sends for ``body``: a server call's input as input_json_delta, a
    text's citations as citations_delta before its text, a result whole at its start."""
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {**body, "content": [], "stop_reason": None}}
    ]
    for index, block in enumerate(body["content"]):
        if block["type"] == "server_tool_use":
            start = {**block, "input": {}}
            deltas = [{"type": "input_json_delta", "partial_json": p} for p in _pieces(block)]
        elif block["type"] == "text":
            start = {"type": "text", "text": ""}
            deltas = [
                {"type": "citations_delta", "citation": c} for c in block.get("citations", [])
            ]
            deltas.append({"type": "text_delta", "text": block["text"]})
        else:
            start, deltas = block, []
        events.append({"type": "content_block_start", "index": index, "content_block": start})
        events += [{"type": "content_block_delta", "index": index, "delta": d} for d in deltas]
        events.append({"type": "content_block_stop", "index": index})
    delta = {"type": "message_delta", "delta": {"stop_reason": body["stop_reason"]}}
    return [*events, {**delta, "usage": body["usage"]}, {"type": "message_stop"}]


def _pieces(block: dict[str, Any]) -> list[str]:
    import json

    text = json.dumps(block["input"])
    return [text[:5], text[5:]]


# The canonical model -----------------------------------------------------------------------


def test_declarations_check_their_options() -> None:
    with pytest.raises(ValidationError, match="not both"):
        WebSearch(allowed_domains=["a.com"], blocked_domains=["b.com"])
    with pytest.raises(ValidationError):
        WebSearch(max_uses=0)
    with pytest.raises(ValidationError):
        WebSearch(colour="red")  # type: ignore[call-arg]
    with pytest.raises(ValidationError):
        UserLocation(country="Great Britain")
    assert CanonicalRequest.model_validate(
        {"model": MODEL, "messages": [], "max_output_tokens": 1,
         "server_tools": [{"kind": "web_search", "max_uses": 2}]}
    ).server_tools == [WebSearch(max_uses=2)]  # fmt: skip


def test_the_one_line_calls_take_server_tools_among_the_tools() -> None:
    from metis.calls.request import build_request

    class Fake:
        def capabilities_for(self, model: str) -> AdapterCapabilities:
            return AdapterCapabilities(max_output_tokens=100)

        def wire_model(self, model: str) -> str:
            return model

    def weather(city: str) -> str:
        """Weather."""
        return city

    made = build_request(Fake(), MODEL, "hi", {"tools": [weather, WebSearch(), CodeExecution()]})  # type: ignore[arg-type]
    assert [t.name for t in made.tools] == ["weather"]
    assert made.server_tools == [WebSearch(), CodeExecution()]


def test_a_stack_without_a_server_tool_refuses_it_before_sending() -> None:
    caps = AdapterCapabilities(server_tools=["web_search"])
    asked = request(server_tools=[WebSearch(), CodeExecution(), WebFetch()])
    assert unmet_needs(asked, caps) == [
        "the provider runs no code_execution tool that metis maps",
        "the provider runs no web_fetch tool that metis maps",
    ]
    assert unmet_needs(request(server_tools=[WebSearch()]), caps) == []


def test_run_tools_passes_server_blocks_over() -> None:
    reply = Message.assistant(
        ServerToolCallBlock(id="srv_1", name="web_search", input={"query": "x"}),
        ServerToolResultBlock(tool_call_id="srv_1", name="web_search", search_results=[]),
        ToolUseBlock(id="tu_1", name="echo", input={"text": "a"}),
    )

    def echo(text: str) -> str:
        """Echo."""
        return text

    results = metis.run_tools(reply, [echo])
    assert [b.tool_use_id for b in results.content] == ["tu_1"]  # type: ignore[union-attr]


def test_a_reply_with_server_blocks_continues_whole() -> None:
    content = [
        ServerToolCallBlock(id="srv_1", name="web_search"),
        ServerToolResultBlock(tool_call_id="srv_1", name="web_search", search_results=[]),
    ]
    reply = CanonicalResponse(
        request_id="r", model=MODEL, provider="anthropic", content=content,
        stop_reason=StopReason(kind=StopKind.PAUSE_TURN, raw="pause_turn"),
        usage=TokenUsage(), latency_ms=1,
    )  # fmt: skip
    assert reply.tool_calls == [] and reply.citations == []
    assert reply.message.content == content  # pause_turn: sent back as it is, to go on


def test_projected_text_says_what_was_called_and_found() -> None:
    call = ServerToolCallBlock(id="s", name="web_search", input={"query": "shannon"})
    found = ServerToolResultBlock(
        tool_call_id="s",
        name="web_search",
        search_results=[SearchResult(url="https://a.org", title="A", snippet="born 1916")],
    )
    assert projected_text(found, call) == (
        '[web_search {"query": "shannon"}]\n- A <https://a.org>: born 1916'
    )
    ran = ServerToolResultBlock(
        tool_call_id="c",
        name="code_execution",
        code_output=CodeOutput(stdout="45\n", stderr="warn", exit_code=1, files=["file_1"]),
    )
    assert projected_text(ran) == (
        "[code_execution]\nexit code 1\nstdout:\n45\n\nstderr:\nwarn\nfile: file_1"
    )
    failed = ServerToolResultBlock(tool_call_id="c", name="web_search", error="max_uses_exceeded")
    assert projected_text(failed) == "[web_search] failed: max_uses_exceeded"
    assert projected_text(ServerToolResultBlock(tool_call_id="c", name="x")) is None


# Anthropic: declarations -------------------------------------------------------------------


def test_anthropic_declares_each_server_tool_with_its_options() -> None:
    call = recording_call(model=MODEL)
    tools = [
        WebSearch(
            max_uses=5,
            allowed_domains=["wikipedia.org"],
            user_location=UserLocation(city="San Francisco", region="California", country="US",
                                       timezone="America/Los_Angeles"),
        ),
        WebFetch(max_uses=2, blocked_domains=["example.com"], citations=True,
                 max_content_tokens=1000),
        CodeExecution(container="container_011CPf"),
        ProviderTool(dialect="anthropic", type="bash_20250124", name="bash"),
    ]  # fmt: skip
    body = codec.encode(request(server_tools=tools), call)
    assert body["tools"] == [
        {
            "type": "web_search_20250305",
            "name": "web_search",
            "max_uses": 5,
            "allowed_domains": ["wikipedia.org"],
            "user_location": {
                "type": "approximate",
                "city": "San Francisco",
                "region": "California",
                "country": "US",
                "timezone": "America/Los_Angeles",
            },
        },
        {
            "type": "web_fetch_20250910",
            "name": "web_fetch",
            "max_uses": 2,
            "blocked_domains": ["example.com"],
            "citations": {"enabled": True},
            "max_content_tokens": 1000,
        },
        {"type": "code_execution_20250825", "name": "code_execution"},
        {"type": "bash_20250124", "name": "bash"},
    ]
    assert body["container"] == "container_011CPf"
    assert codec.headers_for(body) == {  # type: ignore[attr-defined]
        "anthropic-beta": "code-execution-2025-08-25,web-fetch-2025-09-10"
    }
    assert codec.headers_for({"tools": body["tools"][:1]}) == {}  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("tool", "words"),
    [
        (WebSearch(context_size="high"), "takes no context_size"),
        (
            ProviderTool(dialect="openai_responses", type="file_search"),
            "goes only to openai_responses",
        ),
    ],
)
def test_anthropic_refuses_what_it_cannot_take(tool: Any, words: str) -> None:
    with pytest.raises(CapabilityError, match=words):
        codec.encode(request(server_tools=[tool]), recording_call(model=MODEL))


@pytest.mark.parametrize(
    ("stack", "model", "dialect", "meant"),
    [
        ("openai_responses", "openai_responses:gpt-5.1", "openai_response", "openai_responses"),
        ("anthropic", "anthropic:claude-sonnet-4-5", "antropic", "anthropic"),
        ("openai", "openai:gpt-4o", "openai_chats", "openai_chat"),
        ("gemini", "gemini:gemini-2.5-flash", "gemni", "gemini"),
        ("bedrock", "bedrock:us.amazon.nova-2-lite-v1:0", "bedrock", "bedrock_converse"),
    ],
)
def test_a_misspelt_provider_tool_dialect_is_refused_naming_the_one_meant(
    stack: str, model: str, dialect: str, meant: str
) -> None:
    """It said "the openai_response tool 'mcp' goes only to openai_response": no stack is."""
    encode = get_codec(load_stack(stack).codec, load_stack(stack).codec_settings).encode
    mcp = ProviderTool(dialect=dialect, type="mcp")
    with pytest.raises(CapabilityError, match=f"did you mean '{meant}'"):
        encode(request(server_tools=[mcp]), recording_call(model=model, provider=stack))


# Anthropic: reading ------------------------------------------------------------------------


def test_anthropic_body_reads_search_call_results_and_citations() -> None:
    events = read_body(BODY)
    _, call, result, text = final_content(events)
    assert isinstance(call, ServerToolCallBlock)
    assert (call.id, call.name, call.input) == (
        SEARCH_CALL["id"],
        "web_search",
        SEARCH_CALL["input"],
    )
    assert call.provider_raw == ProviderRaw(provider="anthropic", model=MODEL, data=SEARCH_CALL)
    assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == SEARCH_CALL["id"]
    assert result.search_results == [
        SearchResult(
            url="https://en.wikipedia.org/wiki/Claude_Shannon",
            title="Claude Shannon - Wikipedia",
            page_age="April 30, 2025",
        )
    ]
    assert result.provider_raw is not None and result.provider_raw.data == SEARCH_RESULT
    assert isinstance(text, TextBlock) and text.citations is not None
    (cited,) = text.citations
    assert (cited.kind, cited.url, cited.title) == (
        "url",
        WEB_CITATION["url"],
        WEB_CITATION["title"],
    )
    assert cited.cited_text == WEB_CITATION["cited_text"]
    assert cited.provider_raw is not None and cited.provider_raw.data == WEB_CITATION
    kinds = [type(e).__name__ for e in events]
    assert [k for k in kinds if k.startswith("Server")] == ["ServerToolCall", "ServerToolResult"]


def test_anthropic_stream_gives_the_same_content_as_the_body() -> None:
    streamed = read_stream(stream_of(BODY))
    assert final_content(streamed) == final_content(read_body(BODY))
    events = [
        e for e in streamed if isinstance(e, ServerToolCall | ServerToolResult | CitationDelta)
    ]
    assert [e.content_block_index for e in events] == [1, 2, 3]


def test_anthropic_code_execution_result_reads_as_code_output() -> None:
    body = {**BODY, "content": [CODE_CALL, CODE_RESULT, {"type": "text", "text": "45"}]}
    for events in (read_body(body), read_stream(stream_of(body))):
        call, result, _ = final_content(events)
        assert call.input == {"code": "print(sum(range(10)))"}
        assert result.code_output == CodeOutput(
            stdout="45\n", stderr="", exit_code=0, files=["file_011CPf8Qn2"]
        )


def test_anthropic_search_error_and_encrypted_code_result() -> None:
    error = {
        **SEARCH_RESULT,
        "content": {"type": "web_search_tool_result_error", "error_code": "max_uses_exceeded"},
    }
    encrypted = {
        **CODE_RESULT,
        "content": {
            "type": "encrypted_code_execution_result",
            "encrypted_stdout": "EuQJ",
            "stderr": "",
            "return_code": 0,
            "content": [],
        },
    }
    body = {**BODY, "content": [SEARCH_CALL, error, CODE_CALL, encrypted]}
    _, failed, _, opaque = final_content(read_body(body))
    assert failed.error == "max_uses_exceeded" and failed.search_results is None
    assert opaque.code_output is None and opaque.provider_raw.data == encrypted


def test_anthropic_document_citations_read_their_location() -> None:
    page = {
        "type": "page_location", "cited_text": "The grass is green.", "document_index": 0,
        "document_title": "Facts", "start_page_number": 1, "end_page_number": 2,
    }  # fmt: skip
    chars = {
        "type": "char_location", "cited_text": "The sky is blue.", "document_index": 1,
        "document_title": None, "start_char_index": 20, "end_char_index": 36,
    }  # fmt: skip
    body = {
        **BODY,
        "content": [{"type": "text", "text": "Grass is green", "citations": [page, chars]}],
    }
    (text,) = final_content(read_body(body))
    first, second = text.citations
    assert first.kind == "document" and first.document.model_dump(exclude_none=True) == {
        "index": 0, "title": "Facts", "unit": "page", "start": 1, "end": 2,
    }  # fmt: skip
    assert second.document.model_dump(exclude_none=True) == {
        "index": 1, "unit": "char", "start": 20, "end": 36,
    }  # fmt: skip


def test_a_result_with_a_malformed_call_id_is_kept_opaque() -> None:
    warned: list[str] = []
    builder = MessageBuilder("anthropic", MODEL, lambda kind, *a, **k: warned.append(kind))
    odd = {**SEARCH_RESULT, "tool_use_id": ["srvtoolu_1"]}
    events = read_body({**BODY, "content": [SEARCH_CALL, odd]}, builder)
    assert [b.type for b in final_content(events)] == ["server_tool_call", "opaque"]
    assert warned == []


def test_server_blocks_round_trip_as_dicts() -> None:
    reply = final_content(read_body(BODY))
    dumped = Message.assistant(*reply).model_dump(mode="json", exclude_none=True)
    again = CanonicalRequest(model=MODEL, messages=[dumped], max_output_tokens=1).messages[0]
    assert again.content == reply


def test_a_result_whose_call_came_in_an_earlier_reply_is_named_by_its_type() -> None:
    """A reply continuing a ``pause_turn`` opens with the result of the call the previous
    reply made: the result's type names its tool (as the recorded continuations show)."""
    (result,) = final_content(read_body({**BODY, "content": [SEARCH_RESULT]}))
    assert isinstance(result, ServerToolResultBlock)
    assert (result.name, result.tool_call_id) == ("web_search", SEARCH_CALL["id"])
    assert [r.url for r in result.search_results] == [
        "https://en.wikipedia.org/wiki/Claude_Shannon"
    ]


def test_a_result_whose_type_names_no_one_tool_and_no_call_is_kept_opaque() -> None:
    """``tool_search_tool_result`` answers the regex and the BM25 tool alike: with its call
    not in the reply, nothing tells which; kept whole, as any block with no canonical form."""
    answer = {**SEARCH_RESULT, "type": "tool_search_tool_result", "content": {}}
    (kept,) = final_content(read_body({**BODY, "content": [answer]}))
    assert kept.type == "opaque" and kept.kind == "tool_search_tool_result"


# Anthropic: history ------------------------------------------------------------------------


def history() -> list[Message]:
    reply = final_content(read_body(BODY))
    return [
        Message.user("When was Claude Shannon born?"),
        Message.assistant(*reply),
        Message.user("Thanks"),
    ]


def test_anthropic_sends_its_own_server_blocks_back_verbatim() -> None:
    call = recording_call(model=MODEL)
    body = codec.encode(request(*history()), call)
    assert body["messages"][1]["content"] == [
        BODY["content"][0],
        SEARCH_CALL,
        SEARCH_RESULT,
        {"type": "text", "text": CITED_TEXT["text"]},
    ]
    assert call.dropped == []


def test_another_model_gets_the_search_as_text() -> None:
    call = recording_call(model="anthropic:claude-opus-4-1")
    body = codec.encode(request(*history()), call)
    texts = [b["text"] for b in body["messages"][1]["content"]]
    assert texts[1] == (
        '[web_search {"query": "claude shannon birth date"}]\n'
        "- Claude Shannon - Wikipedia <https://en.wikipedia.org/wiki/Claude_Shannon>\n\n"
    )  # a paragraph of its own: the reply's text follows
    assert "server_tool_use" not in str(body) and "encrypted" not in str(body)
    assert call.dropped == []


def test_an_unreadable_result_is_dropped_elsewhere_with_one_warn() -> None:
    encrypted = {
        **CODE_RESULT,
        "content": {"type": "encrypted_code_execution_result", "encrypted_stdout": "EuQJ"},
    }
    reply = final_content(
        read_body({**BODY, "content": [CODE_CALL, encrypted, {"type": "text", "text": "done"}]})
    )
    call = recording_call(provider="openai", model="openai:gpt-5")
    body = metis_chat_encode(request(Message.user("go"), Message.assistant(*reply)), call)
    assert body["messages"][1]["content"] == "done"
    assert call.dropped_types == ["server_tool_result"]
    assert "holds nothing readable" in call.dropped[0][1]


def metis_chat_encode(req: CanonicalRequest, call: Any) -> dict[str, Any]:
    from metis.wire.openai_chat import codec as chat

    return chat.encode(req, call)


# Invariants --------------------------------------------------------------------------------


def test_invariants_refuse_final_content_without_the_server_blocks_streamed() -> None:
    events = read_body(BODY)
    final = events[-1]
    final.final_content = final.final_content[:2]  # type: ignore[attr-defined]
    checker = StreamChecker()
    with pytest.raises(InvariantViolation, match="invariant 4"):
        for event in events:
            checker.check(event)


def test_invariants_refuse_citations_the_content_does_not_hold() -> None:
    events = read_body(BODY)
    final = events[-1]
    text = final.final_content[3]  # type: ignore[attr-defined]
    final.final_content[3] = text.model_copy(update={"citations": None})  # type: ignore[attr-defined]
    checker = StreamChecker()
    with pytest.raises(InvariantViolation, match="citations"):
        for event in events:
            checker.check(event)


def test_a_citation_event_dumps_as_json() -> None:
    event = CitationDelta(0, Citation(kind="url", url="https://a.org"))
    assert event.to_dict()["citation"]["url"] == "https://a.org"
