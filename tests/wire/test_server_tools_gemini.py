"""Gemini's built-in tools and grounding through the schema codec (docs/contract.md §11, §12).

Wire samples follow python-genai's ``types.py`` (``ExecutableCode``, ``CodeExecutionResult``,
``GroundingMetadata``, ``GroundingChunk``, ``GroundingSupport``, ``Segment``) and the example
response of https://ai.google.dev/gemini-api/docs/google-search.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from metis.errors import CapabilityError
from metis.model.content import Message, ServerToolCallBlock, ServerToolResultBlock, TextBlock
from metis.model.request import CanonicalRequest
from metis.model.server_tools import CodeExecution, CodeOutput, WebFetch, WebSearch
from metis.stacks.loader import load_stack
from metis.stages.policy.invariants import StreamChecker
from metis.wire.builder import MessageBuilder
from metis.wire.codec import get_codec
from tests.helpers import recording_call

MODEL = "gemini:gemini-2.5-flash"
codec = get_codec("schema", load_stack("gemini").codec_settings)
CODE = {"executableCode": {"language": "PYTHON", "code": "print(2 + 2)"}, "thoughtSignature": "sig"}
RAN = {"codeExecutionResult": {"outcome": "OUTCOME_OK", "output": "4\n"}}
ANSWER = "Spain won Euro 2024, defeating England 2-1 in the final."
GROUNDING = {
    "webSearchQueries": ["UEFA Euro 2024 winner"],
    "groundingChunks": [
        {"web": {"uri": "https://vertexaisearch.cloud.google.com/1", "title": "aljazeera.com"}},
        {"web": {"uri": "https://vertexaisearch.cloud.google.com/2", "title": "uefa.com"}},
    ],
    "groundingSupports": [
        {
            "segment": {"startIndex": 0, "endIndex": 22, "text": "Spain won Euro 2024"},
            "groundingChunkIndices": [0, 1],
        }
    ],
}


def response(*parts: dict[str, Any], grounding: dict[str, Any] | None = None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": list(parts)}}
    candidate["finishReason"] = "STOP"
    if grounding:
        candidate["groundingMetadata"] = grounding
    return {"candidates": [candidate], "usageMetadata": {"promptTokenCount": 5}, "responseId": "r1"}


def read(*objs: dict[str, Any], streamed: bool = False) -> list[Any]:
    builder = MessageBuilder("gemini", MODEL)
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
    return events[-1].final_content  # type: ignore[no-any-return]


def request(*messages: Message, model: str = MODEL, **kw: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=model, messages=list(messages) or [Message.user("hi")], max_output_tokens=64, **kw
    )


def test_gemini_declares_search_url_context_and_code_execution_beside_functions() -> None:
    tools = [WebSearch(blocked_domains=["example.com"]), WebFetch(), CodeExecution()]
    body = codec.encode(request(server_tools=tools), recording_call("gemini", MODEL))
    assert body["tools"] == [
        {"googleSearch": {"excludeDomains": ["example.com"]}},
        {"urlContext": {}},
        {"codeExecution": {}},
    ]
    with pytest.raises(CapabilityError, match="takes only blocked_domains"):
        codec.encode(request(server_tools=[WebSearch(max_uses=1)]), recording_call("gemini", MODEL))


def test_code_execution_parts_read_as_a_server_call_and_result() -> None:
    whole = read(response(CODE, RAN, {"text": "It is 4."}))
    chunks = [response(CODE), response(RAN), response({"text": "It is 4."})]
    assert read(*chunks, streamed=True) == whole
    call, result, text = whole
    assert isinstance(call, ServerToolCallBlock) and call.name == "code_execution"
    assert call.input == {"language": "PYTHON", "code": "print(2 + 2)"}
    assert isinstance(result, ServerToolResultBlock) and result.tool_call_id == call.id
    assert result.code_output == CodeOutput(stdout="4\n")
    assert isinstance(text, TextBlock) and text.text == "It is 4."
    failed = read(
        response(CODE, {"codeExecutionResult": {"outcome": "OUTCOME_FAILED", "output": "E"}})
    )
    assert failed[1].error == "OUTCOME_FAILED" and failed[1].code_output.stderr == "E"


def test_grounding_metadata_reads_as_citations_of_the_answer() -> None:
    whole = read(response({"text": ANSWER}, grounding=GROUNDING))
    half = len(ANSWER) // 2
    chunks = [
        response({"text": ANSWER[:half]}),
        response({"text": ANSWER[half:]}, grounding=GROUNDING),
    ]
    assert read(*chunks, streamed=True) == whole
    (text,) = whole
    assert [(c.url, c.title) for c in text.citations] == [
        ("https://vertexaisearch.cloud.google.com/1", "aljazeera.com"),
        ("https://vertexaisearch.cloud.google.com/2", "uefa.com"),
    ]
    span = text.citations[0].span
    assert text.text[span.start : span.end] == "Spain won Euro 2024"


def test_the_parts_go_back_verbatim_to_their_model_and_as_text_elsewhere() -> None:
    reply = read(response(CODE, RAN, {"text": "It is 4."}))
    history = [Message.user("2+2?"), Message.assistant(*reply), Message.user("ok")]
    body = codec.encode(request(*history), recording_call("gemini", MODEL))
    assert body["contents"][1]["parts"][:2] == [CODE, RAN]
    other = "gemini:gemini-2.5-pro"
    call = recording_call("gemini", other)
    body = codec.encode(request(*history, model=other), call)
    parts = body["contents"][1]["parts"]
    assert "executableCode" not in str(parts) and "sig" not in str(parts)
    assert parts[0]["text"].startswith('[code_execution {"code": "print(2 + 2)"')


def test_grounding_chunks_of_every_kind_are_citations_and_another_kind_is_reported() -> None:
    """python-genai ``GroundingChunk``: ``web``, ``maps``, ``image`` (its page ``sourceUri``),
    ``retrievedContext`` (File Search or RAG: a document); one of no known kind is a WARN."""
    place = {"uri": "https://maps.google.com/?cid=1", "title": "Cafe", "placeId": "p1"}
    picture = {"sourceUri": "https://a.example/page", "imageUri": "https://a.example/i.png"}
    document = {"title": "handbook.pdf", "text": "Leave is 25 days.", "fileSearchStore": "s/1"}
    chunks = [{"maps": place}, {"image": picture}, {"retrievedContext": document}, {"holo": {}}]
    supports = [{"segment": {"text": "Spain"}, "groundingChunkIndices": [0, 1, 2, 3]}]
    grounding = {"groundingChunks": chunks, "groundingSupports": supports}
    warned: list[str] = []
    builder = MessageBuilder("gemini", MODEL, lambda kind, *a, **k: warned.append(kind))
    body = response({"text": ANSWER}, grounding=grounding)
    (text,) = list(codec.parse_body(copy.deepcopy(body), builder))[-1].final_content
    assert [(c.kind, c.url, c.title, c.cited_text) for c in text.citations] == [
        ("url", place["uri"], "Cafe", "Spain"),
        ("url", picture["sourceUri"], None, "Spain"),
        ("document", None, "handbook.pdf", "Spain"),
    ]
    assert text.citations[2].provider_raw.data["source"] == "retrievedContext"
    assert warned == ["groundingChunks"]


def test_a_recited_source_naming_no_uri_is_still_a_citation() -> None:
    source = {"startIndex": 0, "endIndex": 5, "license": "mit"}
    body = response({"text": ANSWER})
    body["candidates"][0]["citationMetadata"] = {"citationSources": [source, source]}
    (text,) = read(body)
    (cited,) = text.citations
    assert (cited.kind, cited.url) == ("url", None)
    assert cited.provider_raw is not None and cited.provider_raw.data == {"citation": source}
