"""The fuzz suite: every recorded stream, mutated, through the full adapters.

Sources are the streamed cassettes (``cassettes/``) and the streamed 200 exchanges of
``../shared/real-traffic``. Each run takes one source, applies one to three mutations
(truncation, byte flips, a duplicated, dropped or reordered event, a hostile number or string
in an event's JSON, junk after the end), cuts the body into random chunks and replays it,
alternating asyncio and trio. Each run must:

- end (``anyio.fail_after``): no hangs;
- finish, or fail with exactly ``ProtocolError`` (or the class the unmutated source itself
  fails with): no bare exception and no other class;
- after a ``message.start``, end with ``message.complete`` keeping every text delta sent;
- yield events that encode as UTF-8 (no lone surrogate reaches the caller);
- close every response it opened: no leaked connections;
- never show the API key (planted in hostile strings) in the error, its ``describe()``,
  telemetry or log records.

The default run is a few seconds (``METIS_FUZZ_RUNS`` runs per source, 3); the long run is
marked ``slow`` (``-m slow``, ``METIS_FUZZ_SLOW_RUNS`` per source, 40). Both print their
figures; docs/reliability.md records them.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.errors import AdapterError, ProtocolError
from metis.model import MessageComplete, MessageStart, StreamEvent, TextBlock, TextDelta
from metis.pipeline.stores import InMemoryToolIdStore
from metis.telemetry import ListSink

from ..reliability_helpers import cassette_streams, split_at, stream_request
from . import test_real_traffic

KEY = "sk-fuzz-PLANTEDkey-0123456789"
RUNS = int(os.environ.get("METIS_FUZZ_RUNS", "3"))
SLOW_RUNS = int(os.environ.get("METIS_FUZZ_SLOW_RUNS", "40"))


# Sources ---------------------------------------------------------------------------------


@dataclass
class Source:
    name: str
    provider: str
    body: bytes
    content_type: str
    module: Any = None  # a real-traffic test module, whose own adapter replays the exchange
    exchange: Any = None

    def __str__(self) -> str:
        return self.name


def _sources() -> list[Source]:
    found = [
        Source(str(s), s.provider, s.body, s.content_type)
        for s in cassette_streams()
        if s.provider in ("anthropic", "openai", "openai_responses", "gemini", "ollama")
    ]
    for name, module in REAL_TRAFFIC.items():
        for exchange in module.EXCHANGES:
            content_type = getattr(exchange, "content_type", None) or "text/event-stream"
            if exchange.status != 200 or not _streamed(name, module, exchange):
                continue
            found.append(
                Source(f"{name}:{exchange}", name, exchange.body, content_type, module, exchange)
            )
    return found


REAL_TRAFFIC = {"test_real_traffic": test_real_traffic}


def _streamed(name: str, module: Any, exchange: Any) -> bool:
    return bool(module.text_stream(exchange))


SOURCES = _sources()


class TrackedStream(httpx.AsyncByteStream):
    """A response body served chunk by chunk that counts whether it was closed."""

    opened = 0
    closed = 0

    def __init__(self, chunks: list[bytes]) -> None:
        self.chunks = chunks
        TrackedStream.opened += 1

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self.chunks:
            yield chunk

    async def aclose(self) -> None:
        TrackedStream.closed += 1


@contextmanager
def serving(module: Any, chunks: list[bytes]) -> Iterator[None]:
    """A real-traffic module's own adapter, serving ``chunks`` through a TrackedStream."""
    original = module._Stream
    module._Stream = lambda _chunks: TrackedStream(list(chunks))
    try:
        yield
    finally:
        module._Stream = original


async def replay(source: Source, chunks: list[bytes], sink: ListSink, events: list[Any]) -> None:
    """Replay ``chunks`` as the source's response, appending the events as they arrive (a
    real-traffic module's replay gives them only when it succeeds)."""
    if source.module is not None:
        with serving(source.module, chunks):
            events.extend(await source.module.replay(source.exchange))
        return

    def handler(request: httpx.Request) -> httpx.Response:
        headers = {"content-type": source.content_type}
        return httpx.Response(200, headers=headers, stream=TrackedStream(list(chunks)))

    adapter = build_adapter(
        source.provider,
        AdapterConfig(
            api_key=KEY,
            max_retries=0,
            http_client=httpx.AsyncClient(transport=httpx.MockTransport(handler)),
        ),
        tool_id_store=InMemoryToolIdStore(),
        telemetry=sink,
    )
    async for event in adapter.stream(stream_request(source.provider)):
        events.append(event)


# Mutations -------------------------------------------------------------------------------

HOSTILE_NUMBERS = ["-1", "0.5", "1e400", "-1e400", "NaN", "Infinity", "1" + "0" * 40, '"12"']
KEPT_THEN_LONE = "the string as it was, then a lone surrogate"
HOSTILE_STRINGS = [
    '"\\ud800"',
    '"tail \\ud83d"',
    '"\\ude00 head"',
    KEPT_THEN_LONE,  # an id or a name that still means what it meant
    json.dumps(f"the key {KEY} was rejected"),
    json.dumps("\u0000\u001b[31m\u202e"),
    '"' + "A" * 300_000 + '"',
    "[" * 3_000 + "]" * 3_000,
    "{}",
    "null",
]
_EVENT_SPLIT = re.compile(rb"(?<=\n\n)|(?<=\r\n\r\n)")


def events_of(source: Source) -> list[bytes]:
    if "ndjson" in source.content_type:
        return source.body.splitlines(keepends=True)
    return [part for part in _EVENT_SPLIT.split(source.body) if part]


def _payload_span(event: bytes, ndjson: bool) -> tuple[int, int] | None:
    """Where the event's JSON text is: the line (ndjson) or its first data: line."""
    if ndjson:
        return (0, len(event.rstrip(b"\r\n")))
    match = re.search(rb"^data: ?(\{.*?)\r?$", event, re.MULTILINE)
    return match.span(1) if match else None


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _leaves(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaves(v, (*path, i))
    else:
        yield path, value


def _get(value: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        value = value[part]
    return value


def _set(value: Any, path: tuple[Any, ...], new: Any) -> None:
    for part in path[:-1]:
        value = value[part]
    value[path[-1]] = new


def hostile_value(event: bytes, ndjson: bool, rng: random.Random, kind: str) -> bytes:
    """The event with one number (or string) of its JSON replaced by a hostile literal."""
    span = _payload_span(event, ndjson)
    if span is None:
        return event
    try:
        data = json.loads(event[span[0] : span[1]])
    except (ValueError, RecursionError):  # already mutated past parsing: leave it so
        return event
    wanted = (int, float) if kind == "number" else (str,)
    leaves = [p for p, v in _leaves(data) if p and isinstance(v, wanted) and type(v) is not bool]
    if not leaves:
        return event
    path = rng.choice(leaves)
    literal = rng.choice(HOSTILE_NUMBERS if kind == "number" else HOSTILE_STRINGS)
    if literal == KEPT_THEN_LONE:
        literal = json.dumps(_get(data, path))[:-1] + '\\udc00"'
    _set(data, path, "@@FUZZ@@")
    text = json.dumps(data).replace('"@@FUZZ@@"', literal).encode()
    return event[: span[0]] + text + event[span[1] :]


OPS = ["truncate", "flip", "duplicate", "drop", "reorder", "number", "string", "after_end"]


def mutate(source: Source, rng: random.Random) -> tuple[bytes, list[str]]:
    events = events_of(source)
    ndjson = "ndjson" in source.content_type
    applied = rng.sample(OPS, rng.randint(1, 3))
    for op in applied:
        i = rng.randrange(len(events))
        if op == "duplicate":
            events.insert(i, events[i])
        elif op == "drop" and len(events) > 1:
            events.pop(i)
        elif op == "reorder":
            j = rng.randrange(len(events))
            events[i], events[j] = events[j], events[i]
        elif op in ("number", "string"):
            events[i] = hostile_value(events[i], ndjson, rng, op)
        elif op == "after_end":
            events += [rng.choice(events_of(source)) for _ in range(rng.randint(1, 5))]
            events.append(b"{not json\n" if ndjson else b"data: {not json\n\n")
    body = b"".join(events)
    if "flip" in applied:
        flipped = bytearray(body)
        for _ in range(rng.randint(1, 4)):
            flipped[rng.randrange(len(flipped))] ^= rng.randint(1, 255)
        body = bytes(flipped)
    if "truncate" in applied:
        body = body[: rng.randrange(len(body) + 1)]
    return body, applied


# Checking one run ------------------------------------------------------------------------


@dataclass
class Figures:
    runs: int = 0
    ops: Counter[str] = field(default_factory=Counter)
    outcomes: Counter[str] = field(default_factory=Counter)
    failures: list[str] = field(default_factory=list)
    hangs: int = 0
    bare: int = 0
    wrong_class: int = 0
    unencodable: int = 0
    lost_content: int = 0
    leaked: int = 0
    secrets: int = 0

    def report(self, title: str) -> str:
        ops = ", ".join(f"{k}={v}" for k, v in sorted(self.ops.items()))
        outcomes = ", ".join(f"{k}={v}" for k, v in sorted(self.outcomes.items()))
        return (
            f"{title}: {self.runs} mutated replays of {len(SOURCES)} recorded streams\n"
            f"  mutations: {ops}\n  outcomes: {outcomes}\n"
            f"  hangs: {self.hangs}, bare exceptions: {self.bare}, other error classes: "
            f"{self.wrong_class}, lost content: {self.lost_content}, unencodable events: "
            f"{self.unencodable}, leaked connections: {self.leaked}, secrets found: "
            f"{self.secrets}"
        )


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.text: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.text.append(record.getMessage() + repr(record.__dict__))


def _baseline(source: Source) -> type[BaseException] | None:
    async def go() -> type[BaseException] | None:
        try:
            await replay(source, [source.body], ListSink(), [])
        except AdapterError as error:
            return type(error)
        return None

    return anyio.run(go)


def run_once(source: Source, body: bytes, cuts: list[int], backend: str, figures: Figures) -> None:
    chunks = split_at(body, cuts)
    sink = ListSink()
    events: list[StreamEvent] = []
    error: BaseException | None = None
    opened_before, closed_before = TrackedStream.opened, TrackedStream.closed

    async def go() -> None:
        nonlocal error
        with anyio.fail_after(15):
            try:
                await replay(source, chunks, sink, events)
            except Exception as caught:
                error = caught

    anyio.run(go, backend=backend)
    figures.runs += 1
    _judge(source, events, error, sink, figures)
    if TrackedStream.opened - opened_before != TrackedStream.closed - closed_before:
        figures.leaked += 1
        figures.failures.append(f"{source}: a response was not closed")


ALLOWED: dict[str, type[BaseException] | None] = {}


def allowed(source: Source) -> type[BaseException] | None:
    """The class the unmutated source itself fails with (None: it completes), replayed the
    first time a run of it fails with a class other than ProtocolError."""
    if source.name not in ALLOWED:
        ALLOWED[source.name] = _baseline(source)
    return ALLOWED[source.name]


def _judge(
    source: Source,
    events: list[StreamEvent],
    error: BaseException | None,
    sink: ListSink,
    figures: Figures,
) -> None:
    where = f"{source}: {type(error).__name__}: {error}"[:300]
    if isinstance(error, TimeoutError):
        figures.hangs += 1
        figures.failures.append(f"hang: {where}")
        return
    if error is not None and not isinstance(error, AdapterError):
        figures.bare += 1
        figures.failures.append(f"bare: {where}")
        return
    if (
        error is not None
        and type(error) is not ProtocolError
        and type(error) is not allowed(source)
    ):
        figures.wrong_class += 1
        figures.failures.append(f"class: {where}")
    figures.outcomes[type(error).__name__ if error else "completed"] += 1
    _check_events(source, events, figures)
    if error is not None and source.module is None:
        shown = [str(error), repr(error), json.dumps(error.describe()), repr(sink.events)]
        if any(KEY in text for text in shown):
            figures.secrets += 1
            figures.failures.append(f"secret: {where}")


def _check_events(source: Source, events: list[StreamEvent], figures: Figures) -> None:
    try:
        json.dumps([e.to_dict() for e in events], ensure_ascii=False).encode()
    except (UnicodeEncodeError, ValueError) as exc:
        figures.unencodable += 1
        figures.failures.append(f"unencodable: {source}: {exc}"[:300])
    if not any(isinstance(e, MessageStart) for e in events):
        return
    last = events[-1]
    sent = "".join(e.text for e in events if isinstance(e, TextDelta))
    kept = (
        "".join(b.text for b in last.final_content if isinstance(b, TextBlock))
        if isinstance(last, MessageComplete)
        else None
    )
    if kept != sent:
        figures.lost_content += 1
        figures.failures.append(f"lost content: {source}")


def fuzz(sources: list[Source], runs: int, seed: int, figures: Figures) -> None:
    records = _Records()
    logger = logging.getLogger()
    logger.addHandler(records)
    try:
        for n, source in enumerate(sources):
            rng = random.Random(f"{seed}:{source}")
            for i in range(runs):
                body, applied = mutate(source, rng)
                figures.ops.update(applied)
                cuts = [rng.randint(1, max(1, len(body) - 1)) for _ in range(rng.randint(0, 12))]
                run_once(source, body, cuts, "trio" if (n + i) % 2 else "asyncio", figures)
    finally:
        logger.removeHandler(records)
    leaked_logs = [text for text in records.text if KEY in text]
    figures.secrets += len(leaked_logs)
    figures.failures += [f"secret in a log record: {text[:200]}" for text in leaked_logs]


def _assert_clean(figures: Figures) -> None:
    assert not figures.failures, "\n".join(figures.failures[:20])
    assert figures.runs and figures.outcomes["ProtocolError"] and figures.outcomes["completed"]


# The suite -------------------------------------------------------------------------------


def test_every_provider_has_recorded_streams_to_mutate() -> None:
    providers = {s.provider for s in SOURCES if s.module is None}
    assert providers >= {"anthropic", "openai", "openai_responses", "gemini", "ollama"}


def test_fuzz_recorded_streams() -> None:
    figures = Figures()
    fuzz(SOURCES, RUNS, seed=11, figures=figures)
    print("\n" + figures.report("fuzz"))
    _assert_clean(figures)


@pytest.mark.slow
def test_fuzz_recorded_streams_long(request: pytest.FixtureRequest) -> None:
    if "slow" not in (request.config.option.markexpr or "") and not os.environ.get("METIS_SLOW"):
        pytest.skip("the long fuzz run: select it with -m slow (METIS_FUZZ_SLOW_RUNS bounds it)")
    figures = Figures()
    fuzz(SOURCES, SLOW_RUNS, seed=29, figures=figures)
    print("\n" + figures.report("fuzz (long)"))
    _assert_clean(figures)


def test_mutations_change_the_streams() -> None:
    rng = random.Random(3)
    source = next(s for s in SOURCES if s.provider == "anthropic")
    ndjson = False
    event = next(e for e in events_of(source) if b"text_delta" in e)
    assert hostile_value(event, ndjson, rng, "string") != event
    assert any(mutate(source, rng)[0] != source.body for _ in range(5))
