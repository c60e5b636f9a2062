"""Error classification (docs/contract.md §4 items 8-9) through both adapters."""

from __future__ import annotations

import httpx
import pytest

from metis import AdapterError, ErrorClass
from metis.model import MessageComplete
from metis.model.response import StopKind

from ..fakes import (
    DROP,
    FakePeer,
    Reply,
    anthropic_error,
    anthropic_start,
    collect,
    openai_error,
    request,
    sse,
)

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

KEY = "sk-test-0123456789abcdef"
HTML_502 = Reply(
    status=502,
    chunks=["<html><head><title>502 Bad Gateway</title></head><body>cloudflare</body></html>"],
    headers={"content-type": "text/html"},
)
EMPTY_500 = Reply(status=500, chunks=[], headers={"content-type": "text/plain"})
GRAMMAR_TOO_LARGE = (
    "The compiled grammar is too large, which would cause performance issues. Simplify your "
    "tool schemas or reduce the number of strict tools."
)

ANTHROPIC_CASES = [
    (
        anthropic_error(
            429,
            "rate_limit_error",
            "Number of request tokens has exceeded your per-minute rate limit",
        ),
        ErrorClass.RATE_LIMIT,
    ),
    (anthropic_error(529, "overloaded_error", "Overloaded"), ErrorClass.OVERLOADED),
    (anthropic_error(401, "authentication_error", "invalid x-api-key"), ErrorClass.AUTH),
    (
        anthropic_error(403, "permission_error", "Your API key does not have permission"),
        ErrorClass.AUTH,
    ),
    (anthropic_error(500, "api_error", "Internal server error"), ErrorClass.SERVER_ERROR),
    (HTML_502, ErrorClass.SERVER_ERROR),
    (EMPTY_500, ErrorClass.SERVER_ERROR),
    (
        anthropic_error(
            413, "request_too_large", "Request exceeds the maximum allowed number of bytes"
        ),
        ErrorClass.CONTEXT_OVERFLOW,
    ),
    (
        anthropic_error(
            400, "invalid_request_error", "prompt is too long: 215000 tokens > 200000 maximum"
        ),
        ErrorClass.CONTEXT_OVERFLOW,
    ),
    (  # crmne/ruby_llm chat_real_error_scenarios_anthropic_..._context_length_exceeded_errors
        anthropic_error(
            400, "invalid_request_error", "too many total text bytes: 10000002 > 9000000"
        ),
        ErrorClass.CONTEXT_OVERFLOW,
    ),
    (
        anthropic_error(400, "invalid_request_error", "max_tokens: must be positive"),
        ErrorClass.INVALID_REQUEST,
    ),
    (anthropic_error(404, "not_found_error", "model: claude-nope"), ErrorClass.INVALID_REQUEST),
    (Reply(status=408, chunks=["timeout"]), ErrorClass.NETWORK),
    # strict schemas over the grammar compiler's ceiling, which Anthropic does not document:
    # anthropics/anthropic-sdk-python#1185 (a strict tool), TanStack/ai#682 (an output schema)
    (anthropic_error(400, "invalid_request_error", GRAMMAR_TOO_LARGE), ErrorClass.INVALID_REQUEST),
    (
        anthropic_error(
            400,
            "invalid_request_error",
            f"output_config.format.schema: Invalid schema: {GRAMMAR_TOO_LARGE}",
        ),
        ErrorClass.INVALID_REQUEST,
    ),
]
OPENAI_CASES = [
    (
        openai_error(429, "rate_limit_exceeded", "Rate limit reached for gpt-4o", kind="requests"),
        ErrorClass.RATE_LIMIT,
    ),
    (
        openai_error(
            503,
            None,
            "The engine is currently overloaded, please try again later",
            kind="server_error",
        ),
        ErrorClass.OVERLOADED,
    ),
    (openai_error(401, "invalid_api_key", f"Incorrect API key provided: {KEY}."), ErrorClass.AUTH),
    (
        openai_error(500, None, "The server had an error", kind="server_error"),
        ErrorClass.SERVER_ERROR,
    ),
    (HTML_502, ErrorClass.SERVER_ERROR),
    (EMPTY_500, ErrorClass.SERVER_ERROR),
    (
        openai_error(
            400, "context_length_exceeded", "This model's maximum context length is 128000 tokens."
        ),
        ErrorClass.CONTEXT_OVERFLOW,
    ),
    (  # xAI's words: crmne/ruby_llm chat_real_error_scenarios_xai_grok-3-mini_...
        openai_error(
            400,
            None,
            "This model's maximum prompt length is 131072 but the request contains 625078 tokens.",
        ),
        ErrorClass.CONTEXT_OVERFLOW,
    ),
    (
        openai_error(400, None, "Invalid 'messages[1].content': string too long."),
        ErrorClass.INVALID_REQUEST,
    ),
    (
        openai_error(404, "model_not_found", "The model `gpt-nope` does not exist"),
        ErrorClass.INVALID_REQUEST,
    ),
    (Reply(status=413, chunks=["Request Entity Too Large"]), ErrorClass.CONTEXT_OVERFLOW),
]


async def failure(provider: str, reply: Reply) -> AdapterError:
    adapter = FakePeer(reply).adapter(provider, max_retries=0)
    with pytest.raises(AdapterError) as caught:
        await collect(adapter, request(provider))
    return caught.value


@pytest.mark.anyio
@pytest.mark.parametrize(("reply", "expected"), ANTHROPIC_CASES)
async def test_anthropic_errors_are_classified(reply: Reply, expected: ErrorClass) -> None:
    error = await failure("anthropic", reply)
    assert error.error_class is expected
    assert error.provider == "anthropic" and error.provider_status == reply.status
    assert error.request_id


@pytest.mark.anyio
@pytest.mark.parametrize(("reply", "expected"), OPENAI_CASES)
async def test_openai_errors_are_classified(reply: Reply, expected: ErrorClass) -> None:
    error = await failure("openai", reply)
    assert error.error_class is expected
    assert error.provider == "openai" and error.provider_status == reply.status
    assert KEY not in str(error) and KEY not in error.provider_message and KEY not in repr(error)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("anthropic", "openai", "expected"),
    [
        (
            anthropic_error(401, "authentication_error", "invalid x-api-key"),
            openai_error(401, "invalid_api_key", "Incorrect API key provided"),
            ErrorClass.AUTH,
        ),
        (
            anthropic_error(429, "rate_limit_error", "slow down"),
            openai_error(429, "rate_limit_exceeded", "slow down"),
            ErrorClass.RATE_LIMIT,
        ),
        (
            anthropic_error(400, "invalid_request_error", "prompt is too long"),
            openai_error(400, "context_length_exceeded", "maximum context length"),
            ErrorClass.CONTEXT_OVERFLOW,
        ),
        (HTML_502, HTML_502, ErrorClass.SERVER_ERROR),
    ],
)
async def test_the_same_failure_is_the_same_class_on_every_provider(
    anthropic: Reply, openai: Reply, expected: ErrorClass
) -> None:
    assert (await failure("anthropic", anthropic)).error_class is expected
    assert (await failure("openai", openai)).error_class is expected


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_connection_refused_is_a_network_error(provider: str) -> None:
    error = await failure_raising(provider, httpx.ConnectError("[Errno 111] Connection refused"))
    assert error.error_class is ErrorClass.NETWORK and error.retryable


async def failure_raising(provider: str, exc: BaseException) -> AdapterError:
    adapter = FakePeer(exc).adapter(provider, max_retries=0)
    with pytest.raises(AdapterError) as caught:
        await collect(adapter, request(provider))
    return caught.value


@pytest.mark.anyio
async def test_an_in_stream_error_ends_the_message_then_raises() -> None:
    """docs/contract.md §4 for Anthropic's `event: error` inside a 200 stream."""
    text = {
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": "half"},
    }
    error = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    adapter = FakePeer(Reply(chunks=sse(anthropic_start(), text, error))).adapter("anthropic")
    events = []
    with pytest.raises(AdapterError) as caught:
        async for event in adapter.stream(request("anthropic")):
            events.append(event)
    assert caught.value.error_class is ErrorClass.OVERLOADED
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.ERROR
    assert final.stop_reason.raw == "overloaded_error"
    assert final.final_content[0].text == "half"  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_an_openai_error_chunk_mid_stream_ends_the_message_then_raises() -> None:
    chunks = sse(
        {"choices": [{"index": 0, "delta": {"role": "assistant", "content": "part"}}]},
        {
            "error": {
                "message": "The server had an error processing your request.",
                "type": "server_error",
            }
        },
        names=False,
    )
    adapter = FakePeer(Reply(chunks=chunks)).adapter("openai")
    events = []
    with pytest.raises(AdapterError) as caught:
        async for event in adapter.stream(request("openai")):
            events.append(event)
    assert caught.value.error_class is ErrorClass.SERVER_ERROR
    assert events[-1].stop_reason.kind is StopKind.ERROR  # type: ignore[attr-defined]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_stream_that_stops_before_its_terminal_event_is_an_error(provider: str) -> None:
    if provider == "anthropic":
        chunks = sse(anthropic_start())
    else:
        chunks = sse({"choices": [{"index": 0, "delta": {"content": "x"}}]}, names=False)
    adapter = FakePeer(Reply(chunks=chunks)).adapter(provider, max_retries=0)
    events = []
    with pytest.raises(AdapterError, match="ended") as caught:
        async for event in adapter.stream(request(provider)):
            events.append(event)
    assert caught.value.error_class is ErrorClass.OTHER
    assert events[-1].stop_reason.kind is StopKind.ERROR  # type: ignore[attr-defined]


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_garbage_in_the_stream_is_a_classified_error_not_a_crash(provider: str) -> None:
    adapter = FakePeer(Reply(chunks=["data: {not json\n\n"])).adapter(provider, max_retries=0)
    with pytest.raises(AdapterError, match="invalid JSON"):
        await collect(adapter, request(provider))


@pytest.mark.anyio
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
async def test_a_connection_dropped_mid_body_is_a_network_error(provider: str) -> None:
    adapter = FakePeer(Reply(chunks=[DROP])).adapter(provider, max_retries=0)
    with pytest.raises(AdapterError) as caught:
        await collect(adapter, request(provider))
    assert caught.value.error_class is ErrorClass.NETWORK


AUTH_BODIES = [
    b'{"error": {"type": "invalid_request_error", "message": "Incorrect API key provided"}}',
    b'{"type": "error", "error": {"type": "invalid_request_error", "message": "bad key"}}',
    b'{"error": {"code": 400, "status": "INVALID_ARGUMENT", "message": "API key not valid"}}',
    b'{"error": {"code": "invalid_api_key", "message": "Incorrect API key"}}',
    b'{"message": "The security token included in the request is invalid."}',
    b'{"error": "unauthorized"}',
    b"",
]


@pytest.mark.parametrize("status", [401, 403])
def test_a_401_or_403_is_auth_whatever_the_body_says_in_every_stack(status: int) -> None:
    from metis.stacks.loader import builtin_stacks, load_stack

    headers = [{}, {"x-amzn-errortype": "ValidationException:http://internal.amazon.com/"}]
    wrong = []
    for stack in builtin_stacks():
        codec = load_stack(stack).build_pipeline()["normalize"].codec  # type: ignore[attr-defined]
        for body in AUTH_BODIES:
            for header in headers:
                error = codec.error_from_http(status, header, body)
                if error.error_class is not ErrorClass.AUTH or error.retryable:
                    wrong.append((stack, body[:40], header, error.error_class.value))
    assert wrong == []


GEMINI_FILE_GONE = (
    b'{"error": {"code": 403, "status": "PERMISSION_DENIED", "message": "You do not have '
    b'permission to access the File ab12cd34 or it may not exist."}}'
)


@pytest.mark.parametrize("stack", ["gemini", "openai_compatible"])
def test_a_403_for_a_file_that_may_not_exist_is_an_invalid_request(stack: str) -> None:
    """The Gemini API's answer to a request naming a file of its Files API it no longer has
    (files expire 48 hours after upload) was an AuthError: a key refused, where the request
    named a file that is gone (an OpenAI-compatible endpoint relaying it says the same)."""
    from metis.stacks.loader import load_stack

    codec = load_stack(stack).build_pipeline()["normalize"].codec  # type: ignore[attr-defined]
    error = codec.error_from_http(403, {}, GEMINI_FILE_GONE)
    assert error.error_class is ErrorClass.INVALID_REQUEST and not error.retryable
    assert "may not exist" in str(error)
