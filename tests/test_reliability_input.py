"""Issue 7 (1, 2): chunk boundaries never change the canonical events, and hostile bodies
never escape the full adapters as anything but a classified AdapterError."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metis.errors import AdapterError
from metis.model import MessageComplete, MessageStart, StreamEvent, TextBlock, TextDelta
from metis.pipeline.warned import session_warnings

from .reliability_helpers import (
    RecordedStream,
    cassette_streams,
    normalized,
    serving_adapter,
    split_at,
    stream_request,
)

STREAMS = cassette_streams()
SETTINGS = settings(
    max_examples=25, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True
)


def interesting_cuts(body: bytes) -> list[int]:
    """Cut points inside a UTF-8 character and between a '\\r' and its '\\n'."""
    cuts = [i for i in range(1, len(body)) if body[i] & 0xC0 == 0x80]
    cuts += [i for i in range(1, len(body)) if body[i - 1 : i + 1] == b"\r\n"]
    return sorted(set(cuts)) or [len(body) // 2]


def cuts_for(body: bytes) -> st.SearchStrategy[list[int]]:
    anywhere = st.integers(1, max(1, len(body) - 1))
    return st.lists(st.one_of(anywhere, st.sampled_from(interesting_cuts(body))), max_size=80)


# 1. Chunk-boundary invariance: cassettes ---------------------------------------------------


async def _events(stream: RecordedStream, chunks: list[bytes]) -> list[StreamEvent]:
    adapter = serving_adapter(stream.provider, chunks, content_type=stream.content_type)
    with anyio.fail_after(20):
        return [e async for e in adapter.stream(stream_request(stream.provider, stream.model))]


def _baseline(stream: RecordedStream) -> list[dict[str, Any]]:
    return normalized(anyio.run(_events, stream, [stream.body]))


def test_the_cassettes_hold_streams_with_multibyte_text() -> None:
    assert {s.provider for s in STREAMS} >= {
        "anthropic",
        "openai",
        "openai_responses",
        "gemini",
        "ollama",
    }
    assert any(any(b >= 0x80 for b in s.body) for s in STREAMS)


@pytest.mark.parametrize("stream", STREAMS, ids=str)
def test_cassette_streams_ignore_chunk_boundaries(stream: RecordedStream) -> None:
    expected = _baseline(stream)
    one_byte = [stream.body[i : i + 1] for i in range(len(stream.body))]
    assert normalized(anyio.run(_events, stream, one_byte)) == expected
    tricky = split_at(stream.body, interesting_cuts(stream.body))
    assert normalized(anyio.run(_events, stream, tricky)) == expected

    @SETTINGS
    @given(cuts=cuts_for(stream.body))
    def check(cuts: list[int]) -> None:
        got = anyio.run(_events, stream, split_at(stream.body, cuts))
        assert normalized(got) == expected

    check()


# 1. Chunk-boundary invariance: ../shared/real-traffic ----------------------------------------

_REAL = {
    name: importlib.import_module(f"tests.{name}")
    for name in (
        "test_real_traffic",
        "test_real_traffic_gemini",
        "test_real_traffic_responses",
        "test_real_traffic_ollama",
    )
}


def _real_streams() -> list[Any]:
    out = []
    for name, module in _REAL.items():
        for exchange in module.EXCHANGES:
            if exchange.status != 200:
                continue
            if name == "test_real_traffic_ollama":
                if exchange.path != "/api/chat" or not module.streamed(exchange):
                    continue
            elif not exchange.streamed:
                continue
            out.append(pytest.param(name, exchange, id=f"{name}:{exchange}"))
    return out


REAL_STREAMS = _real_streams()


@contextmanager
def rechunked(module: Any, cuts: list[int]) -> Iterator[None]:
    """The module's own adapter_for, serving its body split at ``cuts`` instead."""
    original = module._Stream

    def factory(chunks: list[bytes]) -> Any:
        return original(split_at(b"".join(chunks), cuts))

    module._Stream = factory
    try:
        yield
    finally:
        module._Stream = original


def _replay(name: str, exchange: Any, cuts: list[int]) -> list[dict[str, Any]]:
    module = _REAL[name]
    session_warnings.clear()  # each replay is a first call: its drops are not repeats
    with rechunked(module, cuts):
        return normalized(anyio.run(module.replay, exchange))


@pytest.mark.real_traffic
@pytest.mark.skipif(not REAL_STREAMS, reason="no recorded traffic in ../shared/real-traffic")
@pytest.mark.parametrize(("name", "exchange"), REAL_STREAMS)
def test_real_traffic_streams_ignore_chunk_boundaries(name: str, exchange: Any) -> None:
    expected = _replay(name, exchange, [])
    assert _replay(name, exchange, interesting_cuts(exchange.body)) == expected

    @settings(SETTINGS, max_examples=10)
    @given(cuts=cuts_for(exchange.body))
    def check(cuts: list[int]) -> None:
        assert _replay(name, exchange, cuts) == expected

    check()


# 2. Hostile input ------------------------------------------------------------------------

PROVIDERS = ["anthropic", "openai", "openai_responses", "gemini", "ollama"]
BASE = {
    p: next(s for s in STREAMS if s.provider == p and "tool_call" in s.source) for p in PROVIDERS
}


def events_of(stream: RecordedStream) -> list[bytes]:
    """The body as separate events (SSE blocks or NDJSON lines), each with its terminator."""
    if "ndjson" in stream.content_type:
        return [line + b"\n" for line in stream.body.split(b"\n") if line.strip()]
    parts = re.split(rb"(?:\r?\n){2}", stream.body)
    sep = b"\r\n\r\n" if b"\r\n\r\n" in stream.body else b"\n\n"
    return [p + sep for p in parts if p.strip()]


def _map_data(event: bytes, ndjson: bool, fn: Any) -> bytes:
    """Apply ``fn`` to the JSON payload(s) of one event."""
    if ndjson:
        return json.dumps(fn(json.loads(event))).encode() + b"\n"
    out = []
    for line in event.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(b"data:") and stripped[5:].strip() not in (b"", b"[DONE]"):
            payload = fn(json.loads(stripped[5:]))
            line = b"data: " + json.dumps(payload).encode() + b"\n"
        out.append(line)
    return b"".join(out)


def _corrupt_args(obj: Any) -> Any:
    if isinstance(obj, dict):
        fixed = {k: _corrupt_args(v) for k, v in obj.items()}
        for key in ("partial_json", "arguments", "args"):
            if key in fixed:
                fixed[key] = '{"city": ]bad'
        if str(obj.get("type", "")).startswith("response.function_call_arguments") and isinstance(
            obj.get("delta"), str
        ):
            fixed["delta"] = '{"city": ]bad'
        return fixed
    if isinstance(obj, list):
        return [_corrupt_args(v) for v in obj]
    return obj


UNKNOWN_INDEX_TOOL_DELTA = {
    "anthropic": b'event: content_block_delta\ndata: {"type":"content_block_delta","index":99,'
    b'"delta":{"type":"input_json_delta","partial_json":"{\\"a\\":"}}\n\n',
    "openai": b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":0,'
    b'"delta":{"tool_calls":[{"index":7,"function":{"arguments":"{\\"a\\":1}"}}]},'
    b'"finish_reason":null}]}\n\n',
    "openai_responses": b'event: response.function_call_arguments.delta\ndata: {"type":'
    b'"response.function_call_arguments.delta","output_index":9,"item_id":"fc_nope",'
    b'"delta":"{\\"a\\":"}\n\n',
    "gemini": b'data: {"candidates":[{"content":{"role":"model","parts":[{"functionCall":'
    b'{"name":"nope","args":"not an object"}}]},"index":3}]}\r\n\r\n',
    "ollama": b'{"model":"m","message":{"role":"assistant","content":"","tool_calls":'
    b'[{"function":{"index":5,"name":7,"arguments":"oops"}}]},"done":false}\n',
}
UNKNOWN_EVENT = {
    "ndjson": b'{"totally":"unknown","done":"maybe"}\n',
    "sse": b'event: mystery_event\ndata: {"type":"mystery_event","index":0}\n\n',
}
HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"


def _sep(stream: RecordedStream) -> str:
    return "ndjson" if "ndjson" in stream.content_type else "sse"


async def _hostile(
    provider: str,
    chunks: list[bytes],
    *,
    status: int = 200,
    content_type: str | None = None,
) -> list[StreamEvent]:
    """Run one call; assert it ends, fails only as AdapterError, and keeps partial text."""
    stream = BASE[provider]
    adapter = serving_adapter(
        provider, chunks, status=status, content_type=content_type or stream.content_type
    )
    events: list[StreamEvent] = []
    error: BaseException | None = None
    with anyio.fail_after(30):
        try:
            async for event in adapter.stream(stream_request(provider)):
                events.append(event)
        except AdapterError as caught:
            error = caught
        except Exception as caught:
            pytest.fail(f"{provider}: escaped as {type(caught).__name__}: {caught!r}")
    if any(isinstance(e, MessageStart) for e in events):
        assert isinstance(events[-1], MessageComplete), (provider, error, events[-1])
        sent = "".join(e.text for e in events if isinstance(e, TextDelta))
        kept = "".join(b.text for b in events[-1].final_content if isinstance(b, TextBlock))
        assert kept == sent, (provider, error)
    return events


def _run(provider: str, chunks: list[bytes], **kw: Any) -> list[StreamEvent]:
    return anyio.run(lambda: _hostile(provider, chunks, **kw))


@pytest.mark.parametrize("provider", PROVIDERS)
def test_truncation_anywhere_is_classified(provider: str) -> None:
    body = BASE[provider].body
    for cut in range(0, len(body), max(1, len(body) // 80)):
        _run(provider, [body[:cut]])

    @SETTINGS
    @given(cut=st.integers(0, len(body)), cuts=cuts_for(body))
    def check(cut: int, cuts: list[int]) -> None:
        _run(provider, split_at(body[:cut], cuts))

    check()


MUTATIONS = st.lists(
    st.tuples(
        st.sampled_from(["dup", "drop", "swap", "unknown", "tool_delta", "badargs", "garbage"]),
        st.integers(0, 10_000),
    ),
    min_size=1,
    max_size=4,
)


def mutate(provider: str, ops: list[tuple[str, int]]) -> list[bytes]:
    stream = BASE[provider]
    events = events_of(stream)
    ndjson = _sep(stream) == "ndjson"
    for op, n in ops:
        i = n % len(events)
        if op == "dup":
            events.insert(i, events[i])
        elif op == "drop" and len(events) > 1:
            events.pop(i)
        elif op == "swap":
            j = (i + 1 + n // 7) % len(events)
            events[i], events[j] = events[j], events[i]
        elif op == "unknown":
            events.insert(i, UNKNOWN_EVENT[_sep(stream)])
        elif op == "tool_delta":
            events.insert(i, UNKNOWN_INDEX_TOOL_DELTA[provider])
        elif op == "badargs":
            with suppress(ValueError):
                events[i] = _map_data(events[i], ndjson, _corrupt_args)
        elif op == "garbage":
            events[i] = events[i][: n % 40] + b"\xff\xfe{]\x80" + events[i][n % 40 :]
    return events


@pytest.mark.parametrize("provider", PROVIDERS)
def test_mutated_streams_are_classified(provider: str) -> None:
    @SETTINGS
    @given(ops=MUTATIONS, cuts=st.lists(st.integers(1, 20_000), max_size=20))
    def check(ops: list[tuple[str, int]], cuts: list[int]) -> None:
        _run(provider, split_at(b"".join(mutate(provider, ops)), cuts))

    check()


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize(
    "ops",
    [[("tool_delta", 1)], [("tool_delta", 4)], [("badargs", n) for n in range(40)]],
    ids=["tool-delta-early", "tool-delta-later", "invalid-tool-arguments"],
)
@pytest.mark.anyio
async def test_tool_faults_are_classified(provider: str, ops: list[tuple[str, int]]) -> None:
    await _hostile(provider, mutate(provider, ops))


def _huge(provider: str) -> list[bytes]:
    stream = BASE[provider]
    events = events_of(stream)
    blob = "A" * (4 * 1024 * 1024)
    line = (
        json.dumps({"huge": blob}).encode() + b"\n"
        if _sep(stream) == "ndjson"
        else b"data: " + json.dumps({"type": "huge", "huge": blob}).encode() + b"\n\n"
    )
    body = b"".join([*events[:2], line, *events[2:]])
    return [body[i : i + 65536] for i in range(0, len(body), 65536)]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_a_huge_line_is_survived_or_classified(provider: str) -> None:
    await _hostile(provider, _huge(provider))


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_non_utf8_bytes_are_classified(provider: str) -> None:
    events = events_of(BASE[provider])
    events.insert(
        2, b"data: \xff\xfe\xc3(\n\n" if _sep(BASE[provider]) == "sse" else b"\xff\xc3(\n"
    )
    await _hostile(provider, events)
    body = BASE[provider].body
    await _hostile(provider, [body[: len(body) // 2] + b"\xc3" + body[len(body) // 2 :]])


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("content_type", ["text/html", "application/json", "text/plain", ""])
@pytest.mark.anyio
async def test_a_wrong_content_type_is_survived_or_classified(
    provider: str, content_type: str
) -> None:
    await _hostile(provider, [BASE[provider].body], content_type=content_type)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("status", [200, 502])
@pytest.mark.anyio
async def test_an_html_error_page_is_classified(provider: str, status: int) -> None:
    adapter = serving_adapter(provider, [HTML], status=status, content_type="text/html")
    with anyio.fail_after(30), pytest.raises(AdapterError) as caught:
        async for _ in adapter.stream(stream_request(provider)):
            pass
    if status == 502:
        assert caught.value.provider_status == 502


@pytest.mark.parametrize("provider", PROVIDERS)
def test_random_bytes_are_classified(provider: str) -> None:
    @SETTINGS
    @given(body=st.binary(max_size=2000), cuts=st.lists(st.integers(1, 2000), max_size=10))
    def check(body: bytes, cuts: list[int]) -> None:
        _run(provider, split_at(body, cuts))

    check()
