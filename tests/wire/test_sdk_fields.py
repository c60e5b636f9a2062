"""Fields the official SDKs' newest releases type in a reply, read through metis's codecs,
whole and streamed, each from a sample written after the SDK's type (named in each test).
What metis cannot represent is listed in the sdkaudit report, not here."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.errors import AdapterError, ErrorClass
from metis.model import CanonicalRequest, Message, TextBlock, ThinkingBlock
from metis.model.citation import DocumentLocation
from metis.model.events import MessageComplete
from metis.model.response import ServerToolRequests, StopKind, StopReason
from metis.model.tier import ServiceTier, TierKind
from metis.wire.builder import MessageBuilder
from tests.helpers import checked_final, make_call, stack_codec


def read(stack: str, reply: Any, streamed: bool) -> MessageComplete:
    """``reply`` (a whole body, or a list of stream objects) read by ``stack``'s codec."""
    codec = stack_codec(stack)
    builder = MessageBuilder(stack, f"{stack}:m")
    if not streamed:
        return checked_final(list(codec.parse_body(reply, builder)))
    parser = codec.stream_parser(builder)
    events = [event for obj in reply for event in parser.feed(obj)]
    final: MessageComplete = checked_final(events + list(parser.end()))
    return final


STREAMED = pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])


# OpenAI Responses ----------------------------------------------------------------------------


def _response(output: list[dict[str, Any]], **fields: Any) -> dict[str, Any]:
    usage = {"input_tokens": 10, "output_tokens": 2, "total_tokens": 12}
    return {
        "id": "resp_1",
        "object": "response",
        "status": "completed",
        "model": "gpt-x",
        "output": output,
        "usage": usage,
        **fields,
    }


def _responses_reply(output: list[dict[str, Any]], streamed: bool, **fields: Any) -> Any:
    done = _response(output, **fields)
    if not streamed:
        return done
    created = {**_response([]), "status": "in_progress", "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
    for index, item in enumerate(output):
        for kind in ("response.output_item.added", "response.output_item.done"):
            events.append({"type": kind, "output_index": index, "item": item})
    return [*events, {"type": "response.completed", "response": done}]


_MESSAGE = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [{"type": "output_text", "text": "Sunny.", "annotations": []}],
}


def _web(n: int, action: dict[str, Any]) -> dict[str, Any]:
    return {"type": "web_search_call", "id": f"ws_{n}", "status": "completed", "action": action}


@STREAMED
def test_responses_web_searches_are_the_billed_count_of_tool_usage(streamed: bool) -> None:
    """openai-python ``Response.tool_usage`` (``ToolUsageWebSearch.num_requests``): the
    billable searches, which leave out opening a page and finding in it; the items made
    three ``web_search_call`` items, OpenAI bills one."""
    items = [
        _web(1, {"type": "search", "query": "weather"}),
        _web(2, {"type": "open_page", "url": "https://example.com"}),
        _web(3, {"type": "find_in_page", "url": "https://example.com", "pattern": "sun"}),
        _MESSAGE,
    ]
    tool_usage = {
        "image_gen": {
            "input_tokens": 0,
            "output_tokens": 0,
            "total_tokens": 0,
            "input_tokens_details": {"image_tokens": 0, "text_tokens": 0},
        },
        "web_search": {"num_requests": 1},
    }
    final = read(
        "openai_responses", _responses_reply(items, streamed, tool_usage=tool_usage), streamed
    )
    assert final.usage.server_tools == ServerToolRequests(web_search=1)
    without = read("openai_responses", _responses_reply(items, streamed), streamed)
    assert without.usage.server_tools == ServerToolRequests(web_search=3)  # one per item


# Bedrock Converse ----------------------------------------------------------------------------


def _converse_reply(citation: dict[str, Any], streamed: bool) -> Any:
    usage = {"inputTokens": 10, "outputTokens": 2, "totalTokens": 12}
    if not streamed:
        block = {"citationsContent": {"content": [{"text": "Sunny."}], "citations": [citation]}}
        message = {"role": "assistant", "content": [block]}
        return {"output": {"message": message}, "stopReason": "end_turn", "usage": usage}
    deltas = [{"text": "Sunny."}, {"citation": citation}]
    return [
        {"messageStart": {"role": "assistant"}},
        *[{"contentBlockDelta": {"contentBlockIndex": 0, "delta": d}} for d in deltas],
        {"contentBlockStop": {"contentBlockIndex": 0}},
        {"messageStop": {"stopReason": "end_turn"}},
        {"metadata": {"usage": usage}},
    ]


@STREAMED
def test_converse_cites_a_search_result_by_its_place(streamed: bool) -> None:
    """botocore bedrock-runtime ``CitationLocation.searchResultLocation``
    (``SearchResultLocation{searchResultIndex, start, end}``, content blocks of the request's
    ``searchResult`` block) with the ``Citation``'s ``source`` and ``title``: a search-result
    citation, as Anthropic's ``search_result_location`` is read."""
    citation = {
        "title": "Forecast",
        "source": "https://weather.example/today",
        "sourceContent": [{"text": "Sunny all day."}],
        "location": {"searchResultLocation": {"searchResultIndex": 1, "start": 0, "end": 2}},
    }
    final = read("bedrock", _converse_reply(citation, streamed), streamed)
    (text,) = final.final_content
    (cited,) = text.citations
    assert (cited.kind, cited.url, cited.title) == (
        "search_result",
        "https://weather.example/today",
        "Forecast",
    )
    assert cited.cited_text == "Sunny all day."
    assert cited.document == DocumentLocation(
        index=1, title="Forecast", unit="block", start=0, end=2
    )


# Gemini, Vertex ------------------------------------------------------------------------------


def _gemini_reply(finish: str, streamed: bool) -> Any:
    usage = {"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}

    def chunk(text: str, finish: str | None) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
        if finish:
            candidate["finishReason"] = finish
        return {"candidates": [candidate], "usageMetadata": usage, "modelVersion": "gemini-x"}

    return (
        [chunk("Once upon", None), chunk(" a time", finish)] if streamed else chunk("Once", finish)
    )


@STREAMED
@pytest.mark.parametrize("stack", ["gemini", "vertex"])
@pytest.mark.parametrize(
    ("finish", "kind"),
    [("CONTINUATION", StopKind.MAX_TOKENS), ("ESCALATION", StopKind.CONTENT_FILTER)],
)
def test_gemini_finish_reasons_of_a_limit_and_a_filter(
    stack: str, finish: str, kind: StopKind, streamed: bool
) -> None:
    """google-genai ``FinishReason.CONTINUATION`` (the reply reached the per-request token
    limit before it was done) is ``max_tokens``; ``FinishReason.ESCALATION`` (the request was
    filtered by an escalation rule) is ``content_filter``; ``raw`` names which."""
    final = read(stack, _gemini_reply(finish, streamed), streamed)
    assert final.stop_reason == StopReason(kind=kind, raw=finish)


# Mistral (Chat Completions) ------------------------------------------------------------------


def _mistral_reply(content: Any, streamed: bool, finish: str = "stop", **usage: Any) -> Any:
    counts = {"prompt_tokens": 10, "completion_tokens": 2, "total_tokens": 12, **usage}
    head = {"id": "c1", "model": "mistral-medium-latest", "created": 1}
    if not streamed:
        message = {"role": "assistant", "content": content}
        choice = {"index": 0, "message": message, "finish_reason": finish}
        return {**head, "object": "chat.completion", "choices": [choice], "usage": counts}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return {**head, "object": "chat.completion.chunk", "choices": [choice]}

    return [
        chunk({"role": "assistant", "content": content}),
        {**chunk({}, finish), "usage": counts},
    ]


@STREAMED
def test_mistral_model_length_is_the_output_limit(streamed: bool) -> None:
    """mistralai ``ChatCompletionChoiceFinishReason`` ``model_length``: the model's context
    length was reached, as Anthropic's ``model_context_window_exceeded`` is ``max_tokens``."""
    final = read("mistral", _mistral_reply("Once upon", streamed, "model_length"), streamed)
    assert final.stop_reason == StopReason(kind=StopKind.MAX_TOKENS, raw="model_length")


@STREAMED
def test_mistral_service_tier_is_read_from_its_usage(streamed: bool) -> None:
    """mistralai ``UsageInfo.service_tier``: Mistral says the tier inside ``usage``, not
    beside it as OpenAI does."""
    reply = _mistral_reply("Sunny.", streamed, service_tier="priority")
    final = read("mistral", reply, streamed)
    assert final.usage.service_tier == ServiceTier(kind=TierKind.PRIORITY, raw="priority")


@STREAMED
def test_mistral_signed_reasoning_keeps_its_signature_and_goes_back_with_it(
    streamed: bool,
) -> None:
    """mistralai ``ThinkChunk.signature``: a thinking chunk's signature is the thinking
    block's, and the chunk goes back to the model that wrote it with it."""
    think = {
        "type": "thinking",
        "thinking": [{"type": "text", "text": "Look it up."}],
        "signature": "sig-1",
        "closed": True,
    }
    final = read(
        "mistral", _mistral_reply([think, {"type": "text", "text": "Sunny."}], streamed), streamed
    )
    thought, text = final.final_content
    assert isinstance(thought, ThinkingBlock) and isinstance(text, TextBlock)
    assert (thought.thinking, thought.signature) == ("Look it up.", "sig-1")
    request = CanonicalRequest(
        model="m",
        messages=[
            Message.user("Weather?"),
            Message(role="assistant", content=list(final.final_content)),
            Message.user("Thanks."),
        ],
        max_output_tokens=64,
    )
    call = make_call("mistral", "mistral:m")
    body = stack_codec("mistral").encode(request, call)
    sent = body["messages"][1]["content"]
    assert sent[0] == {
        "type": "thinking",
        "thinking": [{"type": "text", "text": "Look it up."}],
        "signature": "sig-1",
    }


# Anthropic -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "error_class"),
    [
        ("billing_error", ErrorClass.RATE_LIMIT),  # never retried: metis/wire/out_of_credit.py
        ("gateway_timeout_error", ErrorClass.SERVER_ERROR),
    ],
)
def test_anthropic_stream_errors_of_every_type_are_classified(
    kind: str, error_class: ErrorClass
) -> None:
    """anthropic-sdk-python ``BillingError`` (``billing_error``: the account's billing, which
    no retry mends) and ``GatewayTimeoutError`` (``gateway_timeout_error``) as a stream's
    ``error`` event, which has no HTTP status to classify it by."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": [],
            "stop_reason": None,
            "usage": {"input_tokens": 3, "output_tokens": 1},
        },
    }
    error = {"type": "error", "error": {"type": kind, "message": "no"}}
    with pytest.raises(AdapterError) as raised:
        read("anthropic", [start, error], streamed=True)
    assert raised.value.error_class is error_class
    assert raised.value.retryable is (error_class is ErrorClass.SERVER_ERROR)


_FAILED_BY_THE_REQUEST = [
    "data_residency_mismatch",
    "bio_policy",
    "misalignment_policy_violation",
    "image_too_large",
    "image_too_small",
    "image_parse_error",
    "image_content_policy_violation",
    "image_file_too_large",
    "empty_image_file",
    "failed_to_download_image",
    "image_file_not_found",
]


@STREAMED
@pytest.mark.parametrize("code", _FAILED_BY_THE_REQUEST)
def test_a_response_failed_by_what_it_was_asked_is_not_retried(code: str, streamed: bool) -> None:
    """openai-python ``ResponseError.code``: a response that failed for what the request holds
    (its images, a policy, where its data may live) fails again however often it is sent: an
    ``invalid_request``, not the retried server error an unknown code is."""
    failed = {**_response([]), "status": "failed", "error": {"code": code, "message": "no"}}
    reply = [{"type": "response.failed", "response": failed}] if streamed else failed
    with pytest.raises(AdapterError) as raised:
        read("openai_responses", reply, streamed)
    assert raised.value.error_class is ErrorClass.INVALID_REQUEST
    assert not raised.value.retryable


@pytest.mark.parametrize("stack", ["gemini", "vertex"])
@pytest.mark.parametrize(
    ("code", "status"), [(409, "ABORTED"), (409, "ALREADY_EXISTS"), (499, "CANCELLED")]
)
def test_a_gemini_error_in_a_stream_is_classified_by_its_own_code(
    stack: str, code: int, status: str
) -> None:
    """google-genai raises an error chunk of a stream as ``APIError`` by its ``code`` (the HTTP
    status it stands for): metis classifies it as it does the same error answered with that
    status (docs/contract.md §4), not as a retried server error."""
    chunk = _gemini_reply("STOP", streamed=True)[0]
    error = {"error": {"code": code, "message": "no", "status": status}}
    answered = stack_codec(stack).error_from_http(code, {}, json.dumps(error).encode())
    with pytest.raises(AdapterError) as raised:
        read(stack, [chunk, error], streamed=True)
    assert raised.value.error_class is answered.error_class is ErrorClass.INVALID_REQUEST
    assert not raised.value.retryable


@STREAMED
@pytest.mark.parametrize(("stack", "key"), [("vertex", "citations"), ("gemini", "citationSources")])
def test_gemini_recitation_sources_are_citations(stack: str, key: str, streamed: bool) -> None:
    """google-genai ``Candidate.citation_metadata`` (``CitationMetadata.citations``, Vertex's
    key; the Gemini API's ``citationSources``, which the SDK renames): each source the reply
    recites is a URL citation of its text, once however many chunks repeat it."""
    source = {
        "startIndex": 0,
        "endIndex": 9,
        "uri": "https://poems.example/one",
        "title": "One",
        "license": "CC-BY",
    }
    reply = _gemini_reply("STOP", streamed)
    for chunk in reply if streamed else [reply]:
        chunk["candidates"][0]["citationMetadata"] = {key: [source]}
    final = read(stack, reply, streamed)
    (text,) = final.final_content
    assert text.text == ("Once upon a time" if streamed else "Once")
    (cited,) = text.citations
    assert (cited.kind, cited.url, cited.title) == ("url", "https://poems.example/one", "One")
    assert cited.provider_raw is not None and cited.provider_raw.data == {"citation": source}
