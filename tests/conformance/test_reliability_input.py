"""Issue 7 (1, 2): chunk boundaries never change the canonical events, and hostile bodies
never escape the full adapters as anything but a classified AdapterError."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from metis import AdapterConfig, build_adapter
from metis.core.config_files import read_yaml
from metis.errors import (
    AdapterError,
    ConfigError,
    InvalidRequestError,
    OverloadedError,
    ProtocolError,
)
from metis.model import (
    Message,
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextBlock,
    TextDelta,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.stores import InMemoryToolIdStore
from metis.pipeline.warned import session_warnings
from metis.stacks.loader import load_stack
from metis.wire import json_limits

from ..fakes import anthropic_end, anthropic_start, anthropic_text, sse
from ..reliability_helpers import (
    RecordedStream,
    cassette_streams,
    normalized,
    serving_adapter,
    split_at,
    stream_request,
)
from . import test_real_traffic

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

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


@pytest.mark.slow
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

_REAL = {"test_real_traffic": test_real_traffic}


def _real_streams() -> list[Any]:
    out = []
    for name, module in _REAL.items():
        for exchange in module.EXCHANGES:
            if exchange.status != 200:
                continue
            if not module.text_stream(exchange):
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


@pytest.mark.slow
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
    """Run one call; assert it ends, fails only as ProtocolError (or, for an error status,
    another AdapterError), and keeps partial text."""
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
    if status == 200 and error is not None:  # a 200 that goes wrong is malformed, nothing else
        assert type(error) is ProtocolError, (provider, repr(error))
    if any(isinstance(e, MessageStart) for e in events):
        assert isinstance(events[-1], MessageComplete), (provider, error, events[-1])
        sent = "".join(e.text for e in events if isinstance(e, TextDelta))
        kept = "".join(b.text for b in events[-1].final_content if isinstance(b, TextBlock))
        assert kept == sent, (provider, error)
    return events


def _run(provider: str, chunks: list[bytes], **kw: Any) -> list[StreamEvent]:
    return anyio.run(lambda: _hostile(provider, chunks, **kw))


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize("provider", PROVIDERS)
def test_random_bytes_are_classified(provider: str) -> None:
    @SETTINGS
    @given(body=st.binary(max_size=2000), cuts=st.lists(st.integers(1, 2000), max_size=10))
    def check(body: bytes, cuts: list[int]) -> None:
        _run(provider, split_at(body, cuts))

    check()


# 3. Hostile numbers, strings and nesting; events after the end (issue 11, 15-18) ----------

_COUNT_KEY = re.compile(r"(tokens|TokenCount|_count)$")
_SENTINEL = "@@HOSTILE@@"


def _with_literal(stream: RecordedStream, literal: str, where: re.Pattern[str]) -> bytes:
    """The stream with every integer under a key matching ``where`` written as ``literal``
    (raw JSON text: ``NaN`` and ``1e400`` included)."""

    def swap(obj: Any) -> Any:
        if isinstance(obj, dict):
            return {
                k: _SENTINEL if where.search(k) and type(v) is int else swap(v)
                for k, v in obj.items()
            }
        if isinstance(obj, list):
            return [swap(v) for v in obj]
        return obj

    ndjson = _sep(stream) == "ndjson"
    out = []
    for event in events_of(stream):
        mapped = _map_data(event, ndjson, swap)
        out.append(mapped.replace(f'"{_SENTINEL}"'.encode(), literal.encode()))
    return b"".join(out)


HOSTILE_COUNTS = ["12.5", "1e400", "100000000000000000000000000000", "NaN", "Infinity", '"7"']


async def _failure(provider: str, body: bytes) -> tuple[list[StreamEvent], BaseException | None]:
    adapter = serving_adapter(provider, [body], content_type=BASE[provider].content_type)
    events: list[StreamEvent] = []
    with anyio.fail_after(20):
        try:
            async for event in adapter.stream(stream_request(provider)):
                events.append(event)
        except Exception as caught:
            return events, caught
    return events, None


def _ended_with_error(events: list[StreamEvent]) -> None:
    """Nothing, or a message.start and at last a message.complete with stop reason error."""
    if not events:
        return
    assert isinstance(events[0], MessageStart)
    last = events[-1]
    assert isinstance(last, MessageComplete) and last.stop_reason.kind.value == "error", last


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_hostile_token_counts_are_protocol_errors(provider: str) -> None:
    for literal in HOSTILE_COUNTS:
        body = _with_literal(BASE[provider], literal, _COUNT_KEY)
        assert body != BASE[provider].body, "the recorded stream reports no token counts"
        events, error = await _failure(provider, body)
        assert type(error) is ProtocolError, (literal, repr(error))
        _ended_with_error(events)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_a_negative_token_count_leaves_the_reply_whole_its_usage_estimated(
    provider: str,
) -> None:
    # A count that cannot be true says nothing of the reply (docs/reliability.md, Numbers).
    plain, _ = await _failure(provider, BASE[provider].body)
    events, error = await _failure(provider, _with_literal(BASE[provider], "-3", _COUNT_KEY))
    assert error is None
    last, before = events[-1], plain[-1]
    assert isinstance(last, MessageComplete) and isinstance(before, MessageComplete)
    assert _without_ids(last.final_content) == _without_ids(before.final_content)
    assert last.stop_reason == before.stop_reason
    assert last.usage.estimated and not before.usage.estimated


def _without_ids(content: list[Any]) -> list[dict[str, Any]]:
    """The blocks as dicts, each call's canonical tool id (new on every call) left out."""
    return [block.model_dump(exclude={"id"}) for block in content]


def _anthropic(*objects: dict[str, Any]) -> bytes:
    return "".join(sse(*objects)).encode()


@pytest.mark.anyio
async def test_a_character_split_into_surrogate_halves_is_rejoined() -> None:
    halves = _anthropic(anthropic_start(), *anthropic_text("hi ", "x", "y"), *anthropic_end())
    halves = halves.replace(b'"text": "x"', b'"text": "\\ud83d"')
    halves = halves.replace(b'"text": "y"', b'"text": "\\ude00!"')
    events, error = await _failure("anthropic", halves)
    assert error is None
    last = events[-1]
    assert isinstance(last, MessageComplete)
    assert last.final_content == [TextBlock(text="hi \U0001f600!")]
    sent = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert sent == "hi \U0001f600!"


@pytest.mark.parametrize(
    "escape", ["\\ud800", "\\udfff", "a\\ud83d", "\\ude00b", "\\ud83d\\ud83d"], ids=repr
)
@pytest.mark.anyio
async def test_lone_surrogates_become_replacement_characters(escape: str) -> None:
    body = _anthropic(
        anthropic_start(),
        *anthropic_text("x"),
        {
            "type": "content_block_start",
            "index": 1,
            "content_block": {"type": "tool_use", "id": f"t{escape}", "name": f"n{escape}"},
        },
        {
            "type": "content_block_delta",
            "index": 1,
            "delta": {"type": "input_json_delta", "partial_json": '{"q": "X"}'},
        },
        {"type": "content_block_stop", "index": 1},
        *anthropic_end(),
    )
    body = body.replace(b'"text": "x"', f'"text": "{escape}"'.encode())
    body = body.replace(b'\\"X\\"', f'\\"{escape}\\"'.encode().replace(b"\\u", b"\\\\u"))
    events, error = await _failure("anthropic", body)
    assert error is None
    encoded = json.dumps([e.to_dict() for e in events], ensure_ascii=False).encode()
    assert "\ufffd".encode() in encoded  # every lone half replaced: encoding did not fail
    last = events[-1]
    assert isinstance(last, MessageComplete)
    assert "\ufffd" in last.final_content[1].input["q"]  # type: ignore[union-attr]


@pytest.mark.parametrize("depth", [101, 5_000, 200_000])
@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_deeply_nested_events_are_protocol_errors(provider: str, depth: int) -> None:
    nested = "[" * depth + "]" * depth
    body = _with_literal(BASE[provider], nested, _COUNT_KEY)
    events, error = await _failure(provider, body)
    assert type(error) is ProtocolError, repr(error)
    assert "nested deeper" in str(error)
    _ended_with_error(events)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_a_deeply_nested_error_body_is_classified_by_its_status(provider: str) -> None:
    deep = ('{"error":' * 50_000 + '"x"' + "}" * 50_000).encode()
    adapter = serving_adapter(provider, [deep], status=400, content_type="application/json")
    with anyio.fail_after(20), pytest.raises(AdapterError) as caught:
        async for _ in adapter.stream(stream_request(provider)):
            pass
    assert caught.value.error_class.value == "invalid_request"
    assert caught.value.provider_status == 400


def test_nesting_depth_ignores_brackets_inside_strings() -> None:
    assert not json_limits.too_deep('{"a": "' + "[" * 500 + '"}')
    assert json_limits.too_deep("[" * 101 + "]" * 101)
    assert not json_limits.too_deep("[" * 100 + "]" * 100)
    with pytest.raises(ValueError):
        json_limits.loads('{"a": NaN}')


@pytest.mark.anyio
async def test_tool_arguments_nested_too_deep_are_kept_raw() -> None:
    deep = "[" * 500 + "]" * 500
    body = _anthropic(
        anthropic_start(),
        {
            "type": "content_block_start",
            "index": 0,
            "content_block": {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        },
        {
            "type": "content_block_delta",
            "index": 0,
            "delta": {"type": "input_json_delta", "partial_json": '{"a": ' + deep + "}"},
        },
        {"type": "content_block_stop", "index": 0},
        *anthropic_end("tool_use"),
    )
    events, error = await _failure("anthropic", body)
    assert error is None
    block = events[-1].final_content[0]  # type: ignore[attr-defined]
    assert block.input == {} and block.provider_raw.data["arguments"].startswith('{"a": [[')


AFTER_END = {
    "anthropic": b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
    b'"delta":{"type":"text_delta","text":"LATE"}}\n\ndata: {not json\n\n',
    "openai": b'data: {"id":"c","object":"chat.completion.chunk","model":"m","choices":[{"index":'
    b'0,"delta":{"content":"LATE"},"finish_reason":null}]}\n\ndata: {not json\n\n',
    "openai_responses": b'event: response.output_text.delta\ndata: {"type":'
    b'"response.output_text.delta","output_index":0,"content_index":0,"delta":"LATE"}\n\n'
    b"data: {not json\n\n",
    "ollama": b'{"model":"m","message":{"role":"assistant","content":"LATE"},"done":false}\n'
    b"{not json\n",
}


@pytest.mark.parametrize("provider", list(AFTER_END))
@pytest.mark.anyio
async def test_events_after_the_terminal_event_are_ignored(
    provider: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Anthropic's message_stop, OpenAI's [DONE], Responses' response.completed and Ollama's
    done: true end the message; whatever follows is not parsed, and one WARN says so."""
    stream = BASE[provider]
    expected, error = await _failure(provider, stream.body)
    assert error is None
    for late in (AFTER_END[provider], AFTER_END[provider] * 200):
        caplog.clear()
        events, error = await _failure(provider, stream.body + late)
        assert error is None, repr(error)
        assert normalized(events) == normalized(expected)
        warned = [r for r in caplog.records if getattr(r, "event", "") == "metis.events_after_end"]
        assert len(warned) == 1, caplog.text


@pytest.mark.anyio
async def test_a_codec_bug_is_not_a_protocol_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only input a codec recognised as malformed is a ProtocolError; a KeyError raised by
    the codec's own code escapes as what it is, so tests catch it."""
    from metis.wire import anthropic

    def buggy(self: Any) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr(anthropic.AnthropicStreamParser, "end", buggy)
    with pytest.raises(KeyError):
        await _failure_raising("anthropic", BASE["anthropic"].body)


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("bug", [KeyError, TypeError, AttributeError], ids=lambda c: c.__name__)
@pytest.mark.anyio
async def test_a_bug_in_any_codec_escapes_the_adapter_as_itself(
    monkeypatch: pytest.MonkeyPatch, provider: str, bug: type[Exception]
) -> None:
    """A helper every codec calls (the message builder's ``text``) fails as a bug would: the
    recorded, valid reply is not reported as malformed, the bug comes out as what it is."""
    from metis.wire.builder import MessageBuilder

    def buggy(*args: Any, **kwargs: Any) -> None:
        raise bug("a bug")

    monkeypatch.setattr(MessageBuilder, "text", buggy)
    with pytest.raises(bug, match="a bug"):
        await _failure_raising(provider, BASE[provider].body)


async def _failure_raising(provider: str, body: bytes) -> None:
    adapter = serving_adapter(provider, [body], content_type=BASE[provider].content_type)
    async for _ in adapter.stream(stream_request(provider)):
        pass


# 4. Hostile config files (issue 11, 20) ----------------------------------------------------

LAUGHS = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [*a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}, *a{i - 1}]\n"
    for i in range(1, 12)
)
HOSTILE_CONFIGS = {
    "alias-bomb": (LAUGHS.encode(), "aliases expand"),
    "alias-in-itself": (b"name: x\nstages: &s [transport, *s]\n", "contains it"),
    "binary": (bytes(range(256)) * 4, "not a text file"),
    "nul-bytes": (b"name: x\x00\nstages: []\n", "NUL"),
    "flow-nesting": (b"stages: " + b"[" * 200_000 + b"]" * 200_000, "nested deeper"),
    "block-nesting": ("".join("  " * i + f"k{i}:\n" for i in range(150)).encode(), "nested"),
    "deep-indent": (b"a:\n" + b" " * 5_000 + b"b: 1\n", "indented more"),
}


@pytest.mark.parametrize("case", list(HOSTILE_CONFIGS))
def test_hostile_config_files_are_config_errors_naming_the_file(case: str, tmp_path: Path) -> None:
    content, reason = HOSTILE_CONFIGS[case]
    path = tmp_path / f"{case}.yaml"
    path.write_bytes(content)
    for load in (load_stack, lambda p: read_yaml(p, "model registry")):
        with pytest.raises(ConfigError) as caught:
            load(path)
        assert str(path) in str(caught.value) and reason in str(caught.value), caught.value


def test_aliases_within_bounds_still_load(tmp_path: Path) -> None:
    path = tmp_path / "ok.yaml"
    path.write_text("base: &b {a: 1, b: [1, 2]}\nuses: [*b, *b, *b]\n")
    assert read_yaml(path, "test")["uses"][2] == {"a": 1, "b": [1, 2]}
    assert load_stack("gemini").name == "gemini"  # the built-in stack that uses anchors


# 5. Tool inputs JSON cannot carry (issue 11, 19) -------------------------------------------

UNSENDABLE = {
    "datetime": (datetime(2026, 1, 2, tzinfo=UTC), "a datetime"),
    "bytes": (b"\x00\x01", "a bytes"),
    "set": ({1, 2}, "a set"),
    "nan": (math.nan, "nan"),
    "infinity": (math.inf, "inf"),
    "lone-surrogate": ("ok \ud800", "lone UTF-16 surrogate"),
    "int-key": ({1: "x"}, "not a string"),
}


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.anyio
async def test_tool_inputs_json_cannot_carry_are_refused_before_sending(provider: str) -> None:
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    adapter = build_adapter(
        provider,
        AdapterConfig(
            api_key="k",
            max_retries=0,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
            capabilities={"supports_tools": True},
        ),
        tool_id_store=InMemoryToolIdStore(),
    )
    for case, (value, why) in UNSENDABLE.items():
        call = ToolUseBlock(
            id="tu_1", name="lookup", input={"city": "Oslo", "args": [1, {"v": value}]}
        )
        request = stream_request(provider).model_copy(
            update={
                "messages": [
                    Message.user("when?"),
                    Message.assistant(call),
                    Message.user(ToolResultBlock(tool_use_id="tu_1", content="noon")),
                ],
                "tools": [ToolDefinition(name="lookup", input_schema={"type": "object"})],
            }
        )
        with pytest.raises(InvalidRequestError) as caught:
            async for _ in adapter.stream(request):
                pass
        assert "messages[1].content[0].input.args[1].v" in str(caught.value), (case, caught.value)
        assert why in str(caught.value), case
        assert not sent, case


@pytest.mark.anyio
async def test_a_nan_in_a_tool_schema_is_refused_naming_it() -> None:
    adapter = serving_adapter("anthropic", [b""], capabilities={"supports_tools": True})
    tool = ToolDefinition(name="f", input_schema={"type": "object", "maximum": math.inf})
    request = stream_request("anthropic").model_copy(update={"tools": [tool]})
    with pytest.raises(InvalidRequestError, match=r"tools\[0\]\.input_schema\.maximum"):
        async for _ in adapter.stream(request):
            pass


@pytest.mark.anyio
async def test_a_stop_reason_with_a_lone_surrogate_is_replaced() -> None:
    body = _anthropic(anthropic_start(), *anthropic_text("x"), *anthropic_end("odd"))
    body = body.replace(b'"odd"', b'"odd\\ud800"')
    events, error = await _failure("anthropic", body)
    assert error is None
    assert events[-1].stop_reason.raw == "odd\ufffd"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_a_key_quoted_in_a_block_with_no_canonical_form_never_reaches_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The block is kept whole, as the provider sent it (docs/contract.md §8): content, like
    text the model wrote; nothing about it is logged with the key."""
    key = "k-ECHOED-0123456789abc"
    odd = {"type": "content_block_start", "index": 1, "content_block": {"type": f"x {key}"}}
    body = _anthropic(anthropic_start(), *anthropic_text("x"), odd, *anthropic_end())
    adapter = serving_adapter("anthropic", [body], api_key=key)
    events = [event async for event in adapter.stream(stream_request("anthropic"))]
    final = events[-1]
    assert isinstance(final, MessageComplete)
    assert [b.type for b in final.final_content] == ["text", "opaque"]
    assert key not in caplog.text


@pytest.mark.anyio
async def test_an_error_event_after_the_end_is_still_raised_after_message_complete() -> None:
    late = _anthropic(
        {"type": "error", "error": {"type": "overloaded_error", "message": "late failure"}}
    )
    events, error = await _failure("anthropic", BASE["anthropic"].body + late)
    assert type(error) is OverloadedError, repr(error)
    assert isinstance(events[-1], MessageComplete)
    assert events[-1].stop_reason.kind.value != "error"  # the message had ended well
