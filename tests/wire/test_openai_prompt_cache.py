"""OpenAI prompt caching per model (docs/caching.md, metis/wire/openai_cache.py): from gpt-5.6
the caller's cache hints on text and the stable prefix go as ``prompt_cache_breakpoint`` (at
most three) and retention is left out; gpt-5.5 takes retention ``24h`` only; earlier models
take no breakpoint. Each request goes through its adapter to the emulator, which refuses what
OpenAI refuses and caches as each model does, streamed and whole (under asyncio: a wire format is
the same under trio)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.model import CacheHint, CachePolicy, CanonicalRequest, Message, TextBlock
from metis.model.content import ImageBlock, URLImageSource
from metis.testing.emulator import Emulator

from ..helpers import answer

pytestmark = pytest.mark.backend_independent  # wire formats checked against the emulator

MANUAL = "The manual says many things about the device. " * 120
SYSTEM = "Answer from the manual. " * 60
MARK = {"mode": "explicit"}
STACKS = ["openai", "openai_responses"]


@pytest.fixture(scope="module")
def emulator_server() -> Iterator[Emulator]:
    """The emulator serving any model name: gpt-5.6 is newer than the catalog."""
    with Emulator(models="any") as server:
        yield server


def adapter_for(stack: str, emulator: Emulator) -> Any:
    config = AdapterConfig(api_key="k", base_url=emulator.base_url(stack), max_retries=0)
    return build_adapter(stack, config)


def ask(stack: str, model: str, messages: list[Message], **fields: Any) -> CanonicalRequest:
    return CanonicalRequest(
        model=f"{stack}:{model}",
        system_prompt=SYSTEM,
        messages=messages,
        max_output_tokens=200,
        session_id="session-1",
        **fields,
    )


def items(body: dict[str, Any]) -> list[dict[str, Any]]:
    return list(body.get("messages") or body["input"])


def marks(body: dict[str, Any]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, item in enumerate(items(body))
        for j, part in enumerate(item["content"] if isinstance(item["content"], list) else [])
        if part.get("prompt_cache_breakpoint") == MARK
    ]


def reasons(response: Any) -> list[str]:
    return [w.reason for w in response.warnings if w.block_type == "cache"]


def hinted_manual() -> Message:
    return Message.user(TextBlock(text=MANUAL, cache=CacheHint()), "How do I reset it?")


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize("stack", STACKS)
async def test_gpt_5_6_marks_the_hint_and_the_system_prompt_and_reads_them_back(
    emulator: Emulator, stack: str, stream: bool
) -> None:
    adapter = adapter_for(stack, emulator)
    conversation = [hinted_manual()]
    first = await answer(adapter, ask(stack, "gpt-5.6", conversation), stream)
    body = emulator.requests[-1].json()
    manual_at = 1 if stack == "openai" else 0  # Chat's system message comes first
    expected = [(0, 0), (manual_at, 0)] if stack == "openai" else [(manual_at, 0)]
    assert marks(body) == expected
    assert "prompt_cache_retention" not in body and body["prompt_cache_key"] == "session-1"
    assert first.warnings == []
    assert first.usage.cache_creation_input_tokens > 0  # written at the breakpoints
    conversation += [Message.assistant(first.text), Message.user("And to pair it?")]
    second = await answer(adapter, ask(stack, "gpt-5.6", conversation), stream)
    assert second.usage.cached_input_tokens >= first.usage.cache_creation_input_tokens
    assert all(r.status == 200 for r in emulator.requests)


@pytest.mark.anyio
@pytest.mark.parametrize("stack", STACKS)
async def test_at_most_three_breakpoints_the_latest_hints_first(
    emulator: Emulator, stack: str
) -> None:
    hinted = [
        Message.user(TextBlock(text=f"Part {i}. " + MANUAL, cache=CacheHint())) for i in range(4)
    ]
    conversation: list[Message] = []
    for message in hinted:
        conversation += [message, Message.assistant("Noted.")]
    conversation.append(Message.user("Summarise."))
    response = await adapter_for(stack, emulator).complete(ask(stack, "gpt-5.6", conversation))
    body = emulator.requests[-1].json()
    offset = 1 if stack == "openai" else 0
    assert marks(body) == [(offset + 2, 0), (offset + 4, 0), (offset + 6, 0)]  # no system mark
    assert len(reasons(response)) == 1  # the first hint (the default policy's system: a DEBUG)
    assert "not sent: OpenAI writes at most three" in reasons(response)[0]


@pytest.mark.anyio
async def test_a_hint_on_a_block_that_is_not_text_is_a_warning(emulator: Emulator) -> None:
    image = ImageBlock(source=URLImageSource(url="https://example.com/cat.png"), cache=CacheHint())
    request = ask("openai", "gpt-5.6", [Message.user("What is it?", image)])
    response = await adapter_for("openai", emulator).complete(request)
    assert reasons(response) == [
        "OpenAI takes a cache breakpoint on text only; a hint elsewhere was not sent"
    ]
    assert marks(emulator.requests[-1].json()) == [(0, 0)]  # the system prompt's only


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "whole"])
@pytest.mark.parametrize(
    ("model", "retention", "sent", "warned"),
    [
        ("gpt-5.6", "24h", None, "prompt_cache_retention has no effect from gpt-5.6"),
        ("gpt-5.5", "in_memory", None, "gpt-5.5 keeps prompt caches 24h only"),
        ("gpt-5.5", "24h", "24h", None),
        ("gpt-5.1", "in_memory", "in_memory", None),
    ],
)
async def test_retention_as_each_model_takes_it(
    emulator: Emulator,
    stream: bool,
    model: str,
    retention: str,
    sent: str | None,
    warned: str | None,
) -> None:
    request = ask("openai", model, [Message.user("Hi")], cache=CachePolicy(retention=retention))  # type: ignore[arg-type]
    response = await answer(adapter_for("openai", emulator), request, stream)
    body = emulator.requests[-1].json()
    assert body.get("prompt_cache_retention") == sent
    assert [r.split(" (")[0].split(";")[0] for r in reasons(response)] == (
        [warned.split(" (")[0]] if warned else []
    )


@pytest.mark.anyio
@pytest.mark.parametrize("stack", STACKS)
async def test_before_gpt_5_6_a_hint_has_no_form(emulator: Emulator, stack: str) -> None:
    response = await adapter_for(stack, emulator).complete(ask(stack, "gpt-5.1", [hinted_manual()]))
    assert marks(emulator.requests[-1].json()) == []
    assert reasons(response) == ["OpenAI has no form for a cache hint (docs/caching.md)"]


def chat(model: str, part: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    content: Any = [part] if part else "hi"
    return {"model": model, "messages": [{"role": "user", "content": content}], **fields}


MARKED = {"type": "text", "text": "hi", "prompt_cache_breakpoint": MARK}
REFUSED = {
    "breakpoint-on-gpt-5-1": (
        chat("gpt-5.1", MARKED),
        "'prompt_cache_breakpoint' is not supported",
    ),
    "options-on-gpt-5-1": (
        chat("gpt-5.1", prompt_cache_options={"mode": "implicit"}),
        "'prompt_cache_options' is not supported",
    ),
    "options-and-retention": (
        chat("gpt-5.6", prompt_cache_options={"ttl": "30m"}, prompt_cache_retention="24h"),
        "prompt_cache_retention cannot be set with prompt_cache_options",
    ),
    "in-memory-on-gpt-5-5": (
        chat("gpt-5.5", prompt_cache_retention="in_memory"),
        "this model supports only '24h'",
    ),
    "bad-mode": (
        chat("gpt-5.6", prompt_cache_options={"mode": "always"}),
        "'prompt_cache_options.mode'",
    ),
    "bad-ttl": (chat("gpt-5.6", prompt_cache_options={"ttl": "1h"}), "'prompt_cache_options.ttl'"),
    "bad-breakpoint-mode": (
        chat("gpt-5.6", {**MARKED, "prompt_cache_breakpoint": {"mode": "implicit"}}),
        "expected 'explicit'",
    ),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_the_emulator_refuses_what_openai_refuses_of_caching(emulator: Emulator, name: str) -> None:
    body, fragment = REFUSED[name]
    with httpx.Client(base_url=emulator.url, timeout=10) as http:
        answered = http.post(
            "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}
        )
    assert answered.status_code == 400, answered.text
    assert fragment in answered.json()["error"]["message"]


def test_gpt_5_6_in_explicit_mode_without_breakpoints_caches_nothing(emulator: Emulator) -> None:
    body = chat(
        "gpt-5.6", {"type": "text", "text": MANUAL}, prompt_cache_options={"mode": "explicit"}
    )
    implicit = chat("gpt-5.6", {"type": "text", "text": MANUAL + "!"})
    with httpx.Client(base_url=emulator.url, timeout=10) as http:

        def cached(sent: dict[str, Any]) -> int:
            answered = http.post(
                "/v1/chat/completions", json=sent, headers={"authorization": "Bearer k"}
            )
            assert answered.status_code == 200, answered.text
            return int(answered.json()["usage"]["prompt_tokens_details"]["cached_tokens"])

        assert [cached(body), cached(body)] == [0, 0]
        assert [cached(implicit), cached(implicit)][1] > 0  # the implicit breakpoint
