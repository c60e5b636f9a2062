"""The cache policy and hints (docs/caching.md), per wire form: Anthropic ``cache_control``
within four breakpoints, Bedrock ``cachePoint`` on the models that cache, OpenAI
``prompt_cache_key``, Gemini ``cachedContent``, and a warning for a hint with no form."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from metis.model import CacheHint, CachePolicy, CanonicalRequest, Message, TextBlock
from metis.model.cache import RequestedCache
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.stages.edits.cache_control import CacheControl
from metis.wire import anthropic
from metis.wire.bedrock_converse.encode import encode as converse_encode
from metis.wire.cache_points import requested_cache

from ..helpers import make_call

CLAUDE_ON_BEDROCK = "bedrock:us.anthropic.claude-sonnet-4-5-20250929-v1:0"
LLAMA_ON_BEDROCK = "bedrock:meta.llama3-3-70b-instruct-v1:0"


def run(
    body: dict[str, Any],
    asked: RequestedCache | None = None,
    rules: str = "anthropic",
    model: str = "anthropic:claude-sonnet-4-5",
    **options: Any,
) -> tuple[dict[str, Any], Call]:
    call = make_call(provider=model.split(":")[0], model=model)
    request = WireRequest(url="https://x/v1", body=body, cache=asked)
    out = CacheControl(rules=rules, **options).rewrite(request, call)
    return out.body, call


def continuing(policy: CachePolicy | None = None, hints: int = 0) -> RequestedCache:
    return RequestedCache(policy, hints, continuing=True, session_id="sess-1")


def anthropic_body(messages: int = 3, marked: tuple[int, ...] = ()) -> dict[str, Any]:
    out = []
    for i in range(messages):
        block: dict[str, Any] = {"type": "text", "text": f"m{i}"}
        if i in marked:
            block["cache_control"] = {"type": "ephemeral"}
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": [block]})
    tools = [{"name": "t", "input_schema": {"type": "object"}}]
    return {"model": "m", "system": "Be brief.", "tools": tools, "messages": out}


def markers(body: dict[str, Any]) -> list[str]:
    """Where the body's cache_control markers are, in prefix order."""
    found = [f"tools[{i}]" for i, t in enumerate(body["tools"]) if "cache_control" in t]
    system = body["system"] if isinstance(body["system"], list) else []
    found += [f"system[{i}]" for i, b in enumerate(system) if "cache_control" in b]
    for m, message in enumerate(body["messages"]):
        found += [f"messages[{m}]" for b in message["content"] if "cache_control" in b]
    return found


def reasons(call: Call) -> list[str]:
    return [w.reason for w in call.warnings if w.block_type == "cache"]


# --- Anthropic ------------------------------------------------------------------------------


def test_the_default_policy_caches_prefix_and_conversation_of_a_continuing_call() -> None:
    body, call = run(anthropic_body(), continuing())
    assert markers(body) == ["tools[0]", "system[0]", "messages[2]"]
    assert body["system"] == [
        {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}
    ]
    assert reasons(call) == []


def test_a_first_one_shot_call_caches_only_the_stable_prefix() -> None:
    """conversation="auto": no session, no assistant turn; a write nobody reads costs 1.25x."""
    body, _ = run(anthropic_body(1), RequestedCache(None, 0, continuing=False))
    assert markers(body) == ["tools[0]", "system[0]"]


def test_the_policy_off_adds_nothing() -> None:
    original = anthropic_body()
    body, call = run(original, continuing(CachePolicy.off()))
    assert body is original and reasons(call) == []


def test_the_policys_ttl_goes_on_each_breakpoint() -> None:
    body, _ = run(anthropic_body(), continuing(CachePolicy(ttl="1h")))
    assert body["tools"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert body["messages"][2]["content"][0]["cache_control"]["ttl"] == "1h"


def test_hints_come_first_then_the_conversation_end_then_system_then_tools() -> None:
    """Two hints and three policy breakpoints: the tools' is the one left out."""
    body, call = run(anthropic_body(5, marked=(0, 1)), continuing(CachePolicy()))
    assert markers(body) == ["system[0]", "messages[0]", "messages[1]", "messages[4]"]
    assert reasons(call) == [
        "cache breakpoint on tool definitions not sent: the provider takes at most 4 "
        "cache breakpoints"
    ]


def test_a_default_policys_dropped_breakpoint_is_not_a_warning() -> None:
    """The stack's own default is not a setting the caller asked for."""
    body, call = run(anthropic_body(5, marked=(0, 1, 3)), continuing())
    assert markers(body) == ["messages[0]", "messages[1]", "messages[3]", "messages[4]"]
    assert reasons(call) == []


def test_five_hints_keep_the_latest_four_and_say_which_was_dropped() -> None:
    body, call = run(anthropic_body(6, marked=(0, 1, 2, 3, 4)), continuing(CachePolicy.off()))
    assert markers(body) == ["messages[1]", "messages[2]", "messages[3]", "messages[4]"]
    assert reasons(call) == [
        "cache breakpoint on messages[0].content[0] not sent: the provider takes at most 4 "
        "cache breakpoints"
    ]


def test_a_5m_breakpoint_is_not_put_before_a_1h_hint() -> None:
    body = anthropic_body(3)
    body["messages"][2]["content"][0]["cache_control"] = {"type": "ephemeral", "ttl": "1h"}
    out, call = run(body, continuing(CachePolicy()))
    assert markers(out) == ["messages[2]"]
    assert len(reasons(call)) == 2 and all("1h cache entry" in r for r in reasons(call))


# --- the Anthropic encoder: hints on blocks and messages -------------------------------------


def test_hints_on_blocks_and_messages_become_cache_control() -> None:
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        max_output_tokens=10,
        messages=[
            Message.user(TextBlock(text="doc", cache=CacheHint(ttl="1h")), TextBlock(text="q")),
            Message.assistant("a"),
            Message(role="user", content="next", cache=CacheHint()),
        ],
    )
    call = make_call(model="anthropic:claude-sonnet-4-5")
    body = anthropic.encode(request, call)
    first, _, last = body["messages"]
    assert first["content"][0]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert "cache_control" not in first["content"][1]
    assert last["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert requested_cache(request).hints == 2


def test_a_hint_anthropic_cannot_place_is_a_warning() -> None:
    from metis.model import ThinkingBlock

    thought = ThinkingBlock(thinking="t", signature="sig", cache=CacheHint())
    request = CanonicalRequest(
        model="anthropic:claude-sonnet-4-5",
        max_output_tokens=10,
        messages=[Message.user("q"), Message(role="assistant", content=[thought])],
    )
    call = make_call(model="anthropic:claude-sonnet-4-5")
    body = anthropic.encode(request, call)
    assert "cache_control" not in body["messages"][1]["content"][0]
    assert reasons(call) == ["Anthropic takes no cache breakpoint on a thinking block"]


# --- Bedrock Converse ----------------------------------------------------------------------


def converse_body() -> dict[str, Any]:
    request = CanonicalRequest(
        model=CLAUDE_ON_BEDROCK,
        max_output_tokens=10,
        system_prompt="Be brief.",
        tools=[{"name": "t", "input_schema": {"type": "object"}}],
        messages=[
            Message.user(TextBlock(text="doc", cache=CacheHint()), TextBlock(text="q")),
            Message.assistant("a"),
            Message.user("next"),
        ],
    )
    return converse_encode(request, make_call(model=CLAUDE_ON_BEDROCK))


POINT = {"cachePoint": {"type": "default"}}


def test_converse_hints_and_policy_are_cache_points() -> None:
    body, call = run(converse_body(), continuing(), "bedrock_converse", CLAUDE_ON_BEDROCK)
    assert body["toolConfig"]["tools"][-1] == POINT
    assert body["system"] == [{"text": "Be brief."}, POINT]
    assert body["messages"][0]["content"] == [{"text": "doc"}, POINT, {"text": "q"}]
    assert body["messages"][2]["content"] == [{"text": "next"}, POINT]
    assert reasons(call) == []


def test_converse_takes_the_policys_ttl() -> None:
    asked = continuing(CachePolicy(ttl="1h", conversation=False))
    body, _ = run(converse_body(), asked, "bedrock_converse", CLAUDE_ON_BEDROCK)
    assert body["system"][-1] == {"cachePoint": {"type": "default", "ttl": "1h"}}
    # the caller's 5m hint in messages[0] comes after the 1h system point: kept, it is later
    assert POINT in body["messages"][0]["content"]


def test_a_converse_model_without_caching_gets_no_cache_points() -> None:
    body, call = run(converse_body(), continuing(), "bedrock_converse", LLAMA_ON_BEDROCK)
    assert "cachePoint" not in str(body)
    assert reasons(call) == [
        "meta.llama3-3-70b-instruct-v1:0 has no prompt caching on Bedrock (model catalog)"
    ]


# --- OpenAI, Gemini, the rest ----------------------------------------------------------------


def test_openai_gets_the_session_as_prompt_cache_key() -> None:
    body, call = run({"model": "gpt"}, continuing(), "openai_chat", "openai:gpt-4.1", key=True)
    assert body == {"model": "gpt", "prompt_cache_key": "sess-1"}
    assert reasons(call) == []


def test_openai_takes_the_policys_key_and_retention() -> None:
    policy = CachePolicy(key="tenant-7", retention="24h")
    body, _ = run({"model": "gpt"}, continuing(policy), "openai_responses", "openai:g", key=True)
    assert body["prompt_cache_key"] == "tenant-7" and body["prompt_cache_retention"] == "24h"


def test_a_stack_without_key_sends_no_openai_fields() -> None:
    """OpenAI-compatible servers (Groq, vLLM, ...) may refuse fields they do not know."""
    body, _ = run({"model": "m"}, continuing(CachePolicy(key="k")), "openai_chat", "groq:m")
    assert body == {"model": "m"}


@pytest.mark.parametrize(
    ("rules", "model", "provider"),
    [
        ("openai_chat", "openai:gpt-4.1", "OpenAI"),
        ("gemini", "gemini:gemini-2.5-flash", "Gemini"),
        ("ollama", "ollama:qwen", "ollama"),
    ],
)
def test_a_hint_with_no_form_is_a_warning(rules: str, model: str, provider: str) -> None:
    _, call = run({"model": "m"}, continuing(hints=2), rules, model)
    assert reasons(call) == [f"{provider} has no form for a cache hint (docs/caching.md)"] * 2


def test_gemini_reads_a_cached_content_without_system_and_tools() -> None:
    body = {"contents": [], "systemInstruction": {}, "tools": [], "toolConfig": {}}
    policy = CachePolicy(cached_content="cachedContents/abc123")
    out, call = run(body, continuing(policy), "gemini", "gemini:gemini-2.5-flash")
    assert out == {"contents": [], "cachedContent": "cachedContents/abc123"}
    assert reasons(call) == []


def test_a_cached_content_made_elsewhere_is_read_with_one_warning_naming_what_was_left_out() -> (
    None
):
    """metis cannot know what a cached content it did not make holds: the request's system
    prompt and tools are left out (Gemini refuses them beside it), and a warning says so."""
    system = {"parts": [{"text": "Be brief."}]}
    body = {"contents": [], "systemInstruction": system, "tools": [{"x": 1}], "toolConfig": {}}
    policy = CachePolicy(cached_content="cachedContents/made-elsewhere")
    out, call = run(body, continuing(policy), "gemini", "gemini:gemini-2.5-flash")
    assert out == {"contents": [], "cachedContent": "cachedContents/made-elsewhere"}
    assert reasons(call) == [
        "the request's system prompt and tools were left out, as Gemini refuses them beside "
        "a cached content; cachedContents/made-elsewhere was not made by this process, so "
        "whether it holds the same is not known"
    ]


def test_a_cached_content_asked_of_another_provider_is_a_warning() -> None:
    policy = CachePolicy(cached_content="cachedContents/abc123")
    _, call = run(anthropic_body(), continuing(policy))
    assert reasons(call) == ["Anthropic cannot read a Gemini cached content; it was not used"]


def test_a_bad_policy_is_refused_when_made() -> None:
    with pytest.raises(ValidationError):
        CachePolicy(ttl="2h")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        CachePolicy(cached_content="my-cache")
    with pytest.raises(ValidationError):
        CachePolicy(prefix=True, surprise=1)  # type: ignore[call-arg]


def test_a_long_session_id_is_sent_as_a_64_character_key() -> None:
    """OpenAI refuses a prompt_cache_key over 64 characters; the same session, the same key."""
    long_session = RequestedCache(None, 0, continuing=True, session_id="tenant-" + "x" * 80)
    first, _ = run({"model": "gpt"}, long_session, "openai_chat", "openai:gpt-4.1", key=True)
    again, _ = run({"model": "gpt"}, long_session, "openai_chat", "openai:gpt-4.1", key=True)
    assert len(first["prompt_cache_key"]) == 64
    assert first["prompt_cache_key"].startswith("metis-")
    assert first == again
