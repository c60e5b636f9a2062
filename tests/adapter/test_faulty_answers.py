"""Answers that are not what was asked for, on every stack: each provider's real answer (the
emulator's, in process) reshaped on its way back, as a proxy, a gateway or a misbehaving
server would reshape it. Each ends in the reply or in a classified error, never a silent
empty message."""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest

from metis.errors import AdapterError, ProtocolError
from metis.model import CanonicalRequest, Message, MessageComplete, TextDelta
from metis.testing.emulator import Emulator

from ..stack_table import CLOUD, FAMILIES, MODELS, adapter

pytestmark = [pytest.mark.anyio, pytest.mark.backend_independent]

STACKS = [stack for stack in (*FAMILIES, *CLOUD) if stack != "tgi"]
Reshape = Callable[[httpx.Request, int, dict[str, str], bytes], httpx.Response]


class Reshaping(httpx.AsyncBaseTransport):
    """The emulator's answer, read whole, then handed to ``reshape``; ``wire`` forces the
    request's ``stream`` flag as the emulator sees it (to fetch a whole reply for a stream)."""

    def __init__(self, emulator: Emulator, reshape: Reshape, wire_stream: bool | None = None):
        self.inner = emulator.transport()
        self.reshape = reshape
        self.wire_stream = wire_stream

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        asked = request
        if self.wire_stream is not None:
            asked = _restreamed(request, self.wire_stream)
        answer = await self.inner.handle_async_request(asked)
        body = await answer.aread()
        skip = ("content-length", "transfer-encoding")
        headers = {k: v for k, v in answer.headers.items() if k.lower() not in skip}
        return self.reshape(request, answer.status_code, headers, body)


def _restreamed(request: httpx.Request, stream: bool) -> httpx.Request:
    """``request`` as its non-streamed twin (or streamed): the body's flag, Gemini's and
    Bedrock's streaming paths, and the SSE parameter."""
    url = request.url
    path = url.path.replace(":streamGenerateContent", ":generateContent")
    path = path.replace("/converse-stream", "/converse")
    path = path.replace("/invoke-with-response-stream", "/invoke")
    path = path.replace(":streamRawPredict", ":rawPredict")
    params = url.params.remove("alt") if not stream else url.params
    content = request.content
    if content and not stream:
        body = json.loads(content)
        if "stream" in body:
            body["stream"] = False
            body.pop("stream_options", None)
        content = json.dumps(body).encode()
    headers = {k: v for k, v in request.headers.items() if k.lower() != "content-length"}
    return httpx.Request(
        request.method, url.copy_with(path=path, params=params), headers=headers, content=content
    )


def request_for(stack: str) -> CanonicalRequest:
    return CanonicalRequest(
        model=MODELS[stack].split(":", 1)[1],
        messages=[Message.user("Say hello")],
        max_output_tokens=50,
    )


async def streamed_text(stack: str, transport: httpx.AsyncBaseTransport) -> str:
    emulator = Emulator()
    async with httpx.AsyncClient(transport=transport) as client:
        built = adapter(stack, emulator, http_client=client, max_retries=0)
        try:
            return "".join(await _texts(built.stream(request_for(stack))))
        finally:
            await built.aclose()


async def _texts(events: AsyncIterator[object]) -> list[str]:
    texts, completed = [], False
    async for event in events:
        if isinstance(event, TextDelta):
            texts.append(event.text)
        completed = completed or isinstance(event, MessageComplete)
    assert completed
    return texts


BOM = b"\xef\xbb\xbf"


@pytest.mark.parametrize("bom", [b"", BOM], ids=["", "after a BOM"])
@pytest.mark.parametrize("stack", STACKS)
async def test_a_stream_answered_with_the_whole_json_reply_gives_its_text(
    stack: str, bom: bytes
) -> None:
    # A proxy that buffers, or a server that ignores ``stream``, answers a streamed request
    # with the whole reply as application/json: it is read as that reply. Gemini and Vertex
    # read it as an empty message (the reply's dict subclass hid every field from the codec).
    # After a byte order mark it was read as an event stream with no events: 'stream ended
    # before message_stop', the reply lost.
    def whole(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        assert status == 200, body
        content = bom + body
        return httpx.Response(200, headers={"content-type": "application/json"}, content=content)

    emulator = Emulator()
    text = await streamed_text(stack, Reshaping(emulator, whole, wire_stream=False))
    assert text == "You said: Say hello"


@pytest.mark.parametrize("bom", [b"", BOM], ids=["", "after a BOM"])
@pytest.mark.parametrize("stack", ["gemini", "vertex"])
async def test_a_stream_answered_with_a_whole_json_error_raises_it(stack: str, bom: bytes) -> None:
    error = bom + b'{"error": {"code": 503, "message": "overloaded", "status": "UNAVAILABLE"}}'

    def failed(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        return httpx.Response(200, headers={"content-type": "application/json"}, content=error)

    with pytest.raises(AdapterError) as caught:
        await streamed_text(stack, Reshaping(Emulator(), failed))
    assert caught.value.error_class == "overloaded"
    assert not isinstance(caught.value, ProtocolError)


class Chunks(httpx.AsyncByteStream):
    def __init__(self, *chunks: bytes, repeat: int = 1) -> None:
        self.chunks, self.repeat = chunks, repeat

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for _ in range(self.repeat):
            for chunk in self.chunks:
                yield chunk


@pytest.mark.parametrize("stack", ["anthropic", "openai", "gemini", "ollama", "bedrock"])
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_json_reply_too_large_to_hold_is_a_protocol_error(stack: str, streamed: bool):
    # 80 MiB of a reply that never ends (a decompression bomb, a runaway proxy): what is held
    # to parse it at the end stops at 64 MiB instead of growing with the body.
    mib = b" " * (1 << 20)

    def endless(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        stream = Chunks(b'{"id": "x", "padding": "', *[mib] * 8, repeat=10)
        return httpx.Response(200, headers={"content-type": "application/json"}, stream=stream)

    await _refused_as_protocol_error(stack, streamed, endless, "larger than 64 MiB")


def _as_json_array(sse_body: bytes, *extra: bytes) -> bytes:
    """An SSE stream's data objects as Gemini's stream without ``alt=sse``: one JSON array."""
    datas = [line[5:].strip() for line in sse_body.splitlines() if line.startswith(b"data:")]
    return b"[" + b",\r\n".join([*datas, *extra]) + b"]"


@pytest.mark.parametrize("bom", [b"", BOM], ids=["", "after a BOM"])
@pytest.mark.parametrize("stack", ["gemini", "vertex"])
async def test_a_gemini_stream_sent_as_a_json_array_is_read_chunk_by_chunk(
    stack: str, bom: bytes
) -> None:
    # A proxy that drops ``alt=sse`` gets Gemini's array; it was read as an SSE stream with
    # no events ("ended before its finish reason"), an error element in it lost its class.
    def array(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        content = bom + _as_json_array(body)
        return httpx.Response(200, headers={"content-type": "application/json"}, content=content)

    text = await streamed_text(stack, Reshaping(Emulator(), array))
    assert text == "You said: Say hello"


@pytest.mark.parametrize("stack", ["gemini", "vertex"])
async def test_an_error_in_a_gemini_json_array_is_raised_after_what_came_before(
    stack: str,
) -> None:
    error = b'{"error": {"code": 429, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}'

    def array(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        first = _as_json_array(body)[1:].split(b",\r\n")[0]  # the first chunk alone
        content = b"[" + first + b",\r\n" + error + b"]"
        return httpx.Response(200, headers={"content-type": "application/json"}, content=content)

    emulator = Emulator()
    async with httpx.AsyncClient(transport=Reshaping(emulator, array)) as client:
        built = adapter(stack, emulator, http_client=client, max_retries=0)
        try:
            with pytest.raises(AdapterError) as caught:
                await built.complete(request_for(stack).model_copy(update={"stream": True}))
        finally:
            await built.aclose()
    assert caught.value.error_class == "rate_limit"
    partial = caught.value.partial_response
    assert partial is not None and partial.text


HTML_PAGE = b"<!DOCTYPE html><html><head><title>Sign in to the proxy</title></head><body>...</body>"


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_an_html_page_with_200_says_what_it_was(stack: str, streamed: bool) -> None:
    # A proxy's login page, 200 text/html: a stream said only "ended before message_stop".
    def page(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        return httpx.Response(200, headers={"content-type": "text/html"}, content=HTML_PAGE)

    await _refused_as_protocol_error(stack, streamed, page, "HTML error page: Sign in to the proxy")


@pytest.mark.parametrize("stack", ["anthropic", "openai", "openai_responses", "gemini", "ollama"])
async def test_a_stream_labelled_text_html_is_still_read_as_its_stream(stack: str) -> None:
    def relabelled(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        return httpx.Response(status, headers={"content-type": "text/html"}, content=body)

    text = await streamed_text(stack, Reshaping(Emulator(), relabelled))
    assert text == "You said: Say hello"


async def _refused_as_protocol_error(stack: str, streamed: bool, reshape: Any, match: str) -> None:
    """A call (streamed or whole) whose answer ``reshape`` rewrote fails as a ProtocolError
    saying ``match``."""
    emulator = Emulator()
    async with httpx.AsyncClient(transport=Reshaping(emulator, reshape)) as client:
        built = adapter(stack, emulator, http_client=client, max_retries=0)
        try:
            with pytest.raises(ProtocolError, match=match):
                if streamed:
                    await _texts(built.stream(request_for(stack)))
                else:
                    await built.complete(request_for(stack))
        finally:
            await built.aclose()


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_body_gzipped_without_its_content_encoding_says_so(
    stack: str, streamed: bool
) -> None:
    # A proxy that compresses and drops the header: "invalid UTF-8 in its event stream",
    # or a corrupt event-stream frame, where the first two bytes say what it is.
    def gzipped(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        kept = {k: v for k, v in headers.items() if k.lower() != "content-encoding"}
        return httpx.Response(status, headers=kept, content=gzip.compress(body))

    said = r"looks gzip-compressed \(1f 8b at its start\) but no Content-Encoding declared it"
    await _refused_as_protocol_error(stack, streamed, gzipped, said)


@pytest.mark.parametrize("stack", ["anthropic", "openai", "gemini", "ollama", "bedrock"])
async def test_an_error_body_gzipped_without_its_content_encoding_says_so(stack: str) -> None:
    # Its excerpt was the compressed bytes as replacement characters.
    def failed(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        return httpx.Response(500, content=gzip.compress(b'{"error": "boom"}'))

    emulator = Emulator()
    async with httpx.AsyncClient(transport=Reshaping(emulator, failed)) as client:
        built = adapter(stack, emulator, http_client=client, max_retries=0)
        try:
            with pytest.raises(AdapterError, match="looks gzip-compressed") as caught:
                await built.complete(request_for(stack))
        finally:
            await built.aclose()
    assert caught.value.provider_status == 500


def _counts_negative(value: Any) -> Any:
    """``value`` with every whole number under a key naming a token count made -5."""
    if isinstance(value, dict):
        counted = ("tokens", "Tokens", "TokenCount", "_count")
        return {
            key: -5 if key.endswith(counted) and isinstance(item, int) else _counts_negative(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [_counts_negative(item) for item in value]
    return value


_A_COUNT = re.compile(rb'("\w*(?:tokens|Tokens|TokenCount|_count)": ?)\d+')
_EVENTSTREAM = ("bedrock", "bedrock_anthropic")  # binary frames: lengths and CRCs


@pytest.mark.parametrize("stack", STACKS)
@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
async def test_a_reply_with_negative_token_counts_is_kept_with_its_usage_estimated(
    stack: str, streamed: bool, caplog: pytest.LogCaptureFixture
) -> None:
    # OpenAI's o4-mini-deep-research answered "output_tokens": -9: that was a ProtocolError,
    # and the reply whose text arrived whole was lost. No count can be negative: the usage is
    # unknown, estimated as a reply's without usage is, and a warning names what was sent.
    if streamed and stack in _EVENTSTREAM:
        pytest.skip("an event stream's frames cannot be rewritten as text")

    def negative(request: httpx.Request, status: int, headers: dict[str, str], body: bytes):
        if streamed:
            content = _A_COUNT.sub(rb"\g<1>-5", body)
        else:
            content = json.dumps(_counts_negative(json.loads(body))).encode()
        return httpx.Response(status, headers=headers, content=content)

    emulator = Emulator()
    async with httpx.AsyncClient(transport=Reshaping(emulator, negative)) as client:
        built = adapter(stack, emulator, http_client=client, max_retries=0)
        try:
            if streamed:
                events = [event async for event in built.stream(request_for(stack))]
                ends = [event for event in events if isinstance(event, MessageComplete)]
                reply = ends[-1]
                text = "".join(e.text for e in events if isinstance(e, TextDelta))
            else:
                done = await built.complete(request_for(stack))
                reply, text = done, done.text
        finally:
            await built.aclose()
    assert text == "You said: Say hello"
    assert reply.stop_reason.kind == "end_turn"
    usage = reply.usage
    assert usage.estimated and usage.input_tokens > 0 and usage.output_tokens > 0
    assert usage.cached_input_tokens == usage.reasoning_tokens == 0
    warned = [r.getMessage() for r in caplog.records if "cannot be true" in r.getMessage()]
    assert len(warned) == 1 and "-5" in warned[0], warned


@pytest.mark.parametrize("body", [b"{}", b'{"candidates": []}', b'{"error": "quota"}'])
@pytest.mark.parametrize("stack", ["gemini", "vertex"])
async def test_a_whole_gemini_reply_with_nothing_in_it_is_a_protocol_error(
    stack: str, body: bytes
) -> None:
    # No candidate, no finish reason, no prompt feedback: it was a successful empty message
    # (stop provider_specific), where the same answer streamed is a ProtocolError.
    def empty(request: httpx.Request, status: int, headers: dict[str, str], raw: bytes):
        return httpx.Response(200, headers={"content-type": "application/json"}, content=body)

    emulator = Emulator()
    async with httpx.AsyncClient(transport=Reshaping(emulator, empty)) as client:
        built = adapter(stack, emulator, http_client=client, max_retries=0)
        try:
            with pytest.raises(ProtocolError, match="no candidate"):
                await built.complete(request_for(stack))
        finally:
            await built.aclose()
