"""The pre-flight input-token estimate (docs/contract.md §1): within ±10% of what the provider
reported on every recorded request in ../shared/real-traffic that the canonical form can
express, using the stack's ``token_estimate`` profile; and the profile reaches the adapter and
capability_check. The recordings part is skipped when the folder is absent (a fresh clone).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

import metis
from metis import AdapterConfig, build_adapter
from metis.catalog.estimate import (
    DEFAULT_PROFILE,
    TokenProfile,
    count_text,
    estimate_input_tokens,
    estimate_request_tokens,
)
from metis.catalog.estimate_tools import typescript as _typescript
from metis.errors import CapabilityError, ConfigError
from metis.model import (
    Base64ImageSource,
    CanonicalRequest,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ToolChoice,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.pipeline.call import Call
from metis.stacks.loader import load_stack, parse_stack
from metis.stages.policy.capability_check import CapabilityCheck, unmet_needs

from ..helpers import FULL_CAPABILITIES, bound, make_call
from ..recordings import ROOT, interactions

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

ANTHROPIC = load_stack("anthropic").token_estimate
OPENAI = load_stack("openai").token_estimate
TOLERANCE = 0.10  # docs/contract.md §1

# Recorded requests ----------------------------------------------------------------------------
#
# Exclusion rule: a recorded request is left out when the canonical request cannot express it,
# because the provider then adds hidden prompt text the estimate cannot see. That is:
#   - a request field outside the canonical ones (Anthropic ``mcp_servers``, ``container``...);
#   - an Anthropic tool that is not a plain client tool: a server tool (no ``input_schema``:
#     web_fetch, code_execution, advisor, tool search) or one with extra keys such as
#     ``defer_loading``;
#   - a message block the canonical model has no type for (``server_tool_use``,
#     ``*_tool_result``...);
#   - an OpenAI tool that is not a function.
# Fields that never reach the prompt (stream, stream_options, n, max_tokens, temperature, and
# OpenAI's ``moderation``) do not exclude a request.

ANTHROPIC_FIELDS = {"model", "messages", "max_tokens", "stream", "system", "tools", "tool_choice"}
ANTHROPIC_FIELDS |= {"thinking", "temperature", "stop_sequences", "metadata"}
ANTHROPIC_TOOL_KEYS = {"name", "description", "input_schema"}
ANTHROPIC_BLOCKS = {"text", "tool_use", "tool_result", "thinking", "redacted_thinking", "image"}
OPENAI_FIELDS = {"model", "messages", "stream", "stream_options", "n", "tools", "tool_choice"}
OPENAI_FIELDS |= {"response_format", "moderation", "max_tokens", "temperature"}


@dataclass
class Recorded:
    source: str
    provider: str
    model: str
    reported: int
    body: dict[str, Any]

    def __str__(self) -> str:
        return self.source


def recorded() -> list[Recorded]:
    if not ROOT.is_dir():
        return []
    found = []
    for path in sorted(ROOT.glob("*/*.yaml")):
        for i, interaction in enumerate(interactions(path)):
            uri = interaction["request"]["uri"].split("?")[0]
            body = interaction["request"].get("parsed_body")
            if uri.endswith("api.anthropic.com/v1/messages"):
                provider = "anthropic"
            elif uri.endswith("/v1/chat/completions"):
                provider = "openai"
            else:
                continue
            if not body or interaction["response"]["status"]["code"] != 200:
                continue
            reported = reported_input_tokens(provider, interaction["response"])
            if reported:
                source = f"{path.parent.name}/{path.name}#{i}"
                found.append(Recorded(source, provider, body["model"], reported, body))
    return found


def reported_input_tokens(provider: str, response: dict[str, Any]) -> int | None:
    """Anthropic: input + cache read + cache creation tokens; OpenAI: prompt_tokens."""
    usages: list[dict[str, Any]] = []
    if "parsed_body" in response:
        usages.append(response["parsed_body"].get("usage") or {})
    else:
        for line in response["body"]["string"].splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                event = json.loads(line[5:])
                if event.get("type") == "message_start":
                    usages.append(event["message"].get("usage") or {})
                elif provider == "openai" and event.get("usage"):
                    usages.append(event["usage"])
    if not usages:
        return None
    usage = usages[-1]
    if provider == "openai":
        return int(usage["prompt_tokens"])
    keys = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
    return sum(int(usage.get(key) or 0) for key in keys)


def exclusion(rec: Recorded) -> str | None:
    """Why the canonical form cannot express this request, or None if it can."""
    body = rec.body
    if rec.provider == "anthropic":
        if extra := set(body) - ANTHROPIC_FIELDS:
            return f"request fields {sorted(extra)}"
        for tool in body.get("tools", []):
            if "input_schema" not in tool or set(tool) - ANTHROPIC_TOOL_KEYS:
                return f"tool {tool.get('name')!r} is not a plain client tool"
        for message in body["messages"]:
            if isinstance(message["content"], list):
                for block in message["content"]:
                    if block["type"] not in ANTHROPIC_BLOCKS:
                        return f"block type {block['type']!r}"
        return None
    if extra := set(body) - OPENAI_FIELDS:
        return f"request fields {sorted(extra)}"
    for tool in body.get("tools", []):
        if tool.get("type") != "function":
            return f"tool type {tool.get('type')!r}"
    return None


def canonical(rec: Recorded) -> CanonicalRequest:
    convert = anthropic_request if rec.provider == "anthropic" else openai_request
    return convert(rec.body)


def anthropic_request(body: dict[str, Any]) -> CanonicalRequest:
    messages = []
    for message in body["messages"]:
        content = message["content"]
        raw = [{"type": "text", "text": content}] if isinstance(content, str) else content
        blocks: list[Any] = []
        for block in raw:
            kind = block["type"]
            if kind == "text":
                blocks.append(TextBlock(text=block["text"]))
            elif kind == "tool_use":
                blocks.append(
                    ToolUseBlock(id=block["id"], name=block["name"], input=block["input"])
                )
            elif kind == "tool_result":
                result = block.get("content", "")
                if isinstance(result, list):
                    result = [TextBlock(text=part["text"]) for part in result]
                blocks.append(
                    ToolResultBlock(
                        tool_use_id=block["tool_use_id"],
                        content=result,
                        is_error=block.get("is_error", False),
                    )
                )
            elif kind == "thinking":
                blocks.append(
                    ThinkingBlock(thinking=block["thinking"], signature=block["signature"])
                )
            elif kind == "redacted_thinking":
                blocks.append(RedactedThinkingBlock(data=block["data"]))
            else:
                raise AssertionError(f"excluded block type {kind!r} reached conversion")
        role = Role.USER if message["role"] == "user" else Role.ASSISTANT
        if role is Role.USER and all(isinstance(b, ToolResultBlock) for b in blocks):
            role = Role.TOOL
        messages.append(Message(role=role, content=blocks))
    system = body.get("system")
    if isinstance(system, list):
        system = "\n".join(part["text"] for part in system)
    choice = body.get("tool_choice")
    return CanonicalRequest(
        model=body["model"],
        messages=messages,
        max_output_tokens=body["max_tokens"],
        system_prompt=system,
        tools=[
            ToolDefinition(
                name=t["name"], description=t.get("description", ""), input_schema=t["input_schema"]
            )
            for t in body.get("tools", [])
        ],
        tool_choice=ToolChoice(type=choice["type"], name=choice.get("name")) if choice else None,
        thinking={"budget_tokens": body["thinking"]["budget_tokens"]}
        if (body.get("thinking") or {}).get("type") == "enabled"
        else None,
    )


def openai_request(body: dict[str, Any]) -> CanonicalRequest:
    messages: list[Message] = []
    system = None
    for message in body["messages"]:
        role, content = message["role"], message.get("content")
        text = content if isinstance(content, str) else "".join(p["text"] for p in content or [])
        if role in ("system", "developer"):
            system = f"{system}\n\n{text}" if system else text
        elif role == "tool":
            result = ToolResultBlock(tool_use_id=message["tool_call_id"], content=text)
            if messages and messages[-1].role is Role.TOOL:  # one canonical message holds all
                messages[-1] = Message(role=Role.TOOL, content=[*messages[-1].content, result])
            else:
                messages.append(Message.tool(result))
        else:
            blocks: list[Any] = [TextBlock(text=text)] if text else []
            for call in message.get("tool_calls") or []:
                function = call["function"]
                arguments = json.loads(function["arguments"] or "{}")
                blocks.append(ToolUseBlock(id=call["id"], name=function["name"], input=arguments))
            role_ = Role.USER if role == "user" else Role.ASSISTANT
            messages.append(Message(role=role_, content=blocks))
    choice = body.get("tool_choice")
    tool_choice = (
        ToolChoice.tool(choice["function"]["name"])
        if isinstance(choice, dict)
        else {
            "auto": ToolChoice.auto(),
            "required": ToolChoice.any(),
            "none": ToolChoice.none(),
        }.get(choice or "")
    )
    response_format = body.get("response_format") or {}
    return CanonicalRequest(
        model=body["model"],
        messages=messages,
        max_output_tokens=1000,
        system_prompt=system,
        tools=[
            ToolDefinition(
                name=t["function"]["name"],
                description=t["function"].get("description", ""),
                input_schema=t["function"].get("parameters") or {},
            )
            for t in body.get("tools", [])
        ],
        tool_choice=tool_choice,
        output_schema=(response_format.get("json_schema") or {}).get("schema"),
    )


def profile_for(rec: Recorded) -> TokenProfile:
    profile = ANTHROPIC if rec.provider == "anthropic" else OPENAI
    return profile.for_model(rec.model)


RECORDED = recorded()
INCLUDED = [rec for rec in RECORDED if exclusion(rec) is None]


@pytest.mark.real_traffic
@pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}")
def test_the_recordings_hold_requests_of_both_providers_to_check() -> None:
    assert {rec.provider for rec in INCLUDED} == {"anthropic", "openai"}
    assert len(INCLUDED) >= 20


@pytest.mark.real_traffic
@pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}")
@pytest.mark.parametrize("rec", INCLUDED, ids=str)
def test_the_estimate_is_within_ten_percent_of_the_reported_input_tokens(rec: Recorded) -> None:
    estimate = estimate_request_tokens(canonical(rec), profile_for(rec))
    assert abs(estimate - rec.reported) <= TOLERANCE * rec.reported, (
        f"{rec}: estimated {estimate}, reported {rec.reported} ({estimate / rec.reported:.3f})"
    )


@pytest.mark.real_traffic
@pytest.mark.skipif(not ROOT.is_dir(), reason=f"no recorded traffic at {ROOT}")
def test_excluded_recordings_are_those_with_hidden_provider_prompts() -> None:
    excluded = [rec for rec in RECORDED if exclusion(rec) is not None]
    assert excluded, "the exclusion rule should have something to exclude"
    for rec in excluded:  # server tools and MCP servers carry large prompts of their own
        assert rec.provider == "anthropic", rec


# Text -----------------------------------------------------------------------------------------


@pytest.mark.parametrize("profile", [DEFAULT_PROFILE, ANTHROPIC, OPENAI], ids=["default", "a", "o"])
def test_estimate_is_monotonic_in_text_length(profile: TokenProfile) -> None:
    sizes = [0, 1, 10, 100, 1_000, 10_000]
    texts = ["The quick brown fox jumps over the lazy dog. " * n for n in sizes]
    texts += ['{"id": 12345, "tags": ["a", "b"]}\n' * n for n in sizes]
    for kind in (texts[: len(sizes)], texts[len(sizes) :]):
        estimates = [estimate_input_tokens([Message.user(t)], [], None, profile) for t in kind]
        assert estimates == sorted(estimates) and estimates[-1] > estimates[0]


def test_pieces_follow_a_bpe_pre_split() -> None:
    count = OPENAI.model_copy(update={"tokens_per_piece": 1.0})
    assert count_text("What is the capital of France?", count) == 7
    assert count_text("get_user_country", count) == 3  # get, _user, _country
    assert count_text("1234567", count) == 3  # digits three at a time
    assert count_text('{"a":"b"}', count) == 5  # {" a ":" b "}
    assert count_text("x" * 100, count) == 10  # a long run costs one token per ten letters
    assert count_text("日本語", count) == 3


def test_english_prose_is_about_four_characters_a_token_under_pieces() -> None:
    english = "The quick brown fox jumps over the lazy dog and keeps running far away. " * 50
    got = count_text(english, OPENAI)
    assert abs(got - len(english) / 4) <= len(english) / 4 * 0.25


# Images, tools, thinking ------------------------------------------------------------------


def _image() -> ImageBlock:
    return ImageBlock(source=Base64ImageSource(media_type="image/png", data="aGk="))


@pytest.mark.parametrize("profile", [DEFAULT_PROFILE, ANTHROPIC, OPENAI], ids=["default", "a", "o"])
def test_images_are_counted_flat_wherever_they_are(profile: TokenProfile) -> None:
    def estimate(*messages: Message) -> int:
        return estimate_input_tokens(list(messages), [], None, profile)

    base = estimate(Message.user("look"))
    assert estimate(Message.user("look", _image())) - base == profile.image_tokens
    assert estimate(Message.user("look", _image(), _image())) - base == 2 * profile.image_tokens
    empty = estimate(Message.tool(ToolResultBlock(tool_use_id="t", content=[])))
    pictured = estimate(Message.tool(ToolResultBlock(tool_use_id="t", content=[_image()])))
    assert pictured - empty == profile.image_tokens
    assert ANTHROPIC.image_tokens == 1_600 and OPENAI.image_tokens == 765


WEATHER = ToolDefinition(
    name="get_weather",
    description="Get the weather for a city.",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "The city name."},
            "unit": {"type": "string", "enum": ["c", "f"]},
            "days": {"type": "array", "items": {"type": "integer"}},
        },
        "required": ["city"],
    },
)


@pytest.mark.parametrize("profile", [DEFAULT_PROFILE, ANTHROPIC, OPENAI], ids=["default", "a", "o"])
def test_tools_are_counted_with_the_hidden_prompt_once(profile: TokenProfile) -> None:
    messages = [Message.user("hi")]
    base = estimate_input_tokens(messages, [], None, profile)
    one = estimate_input_tokens(messages, [WEATHER], None, profile)
    two = estimate_input_tokens(messages, [WEATHER, WEATHER], None, profile)
    assert one - base > profile.tools_overhead + 20  # the definition itself costs tokens
    assert two - one == one - base - profile.tools_overhead - _namespace(profile)


def _namespace(profile: TokenProfile) -> int:
    if profile.tool_rendering != "typescript":
        return 0
    return count_text("namespace functions {\n\n} // namespace functions", profile)


def test_anthropic_forced_tool_choice_uses_its_documented_prompt() -> None:
    messages = [Message.user("hi")]
    auto = estimate_input_tokens(
        messages, [WEATHER], None, ANTHROPIC, tool_choice=ToolChoice.auto()
    )
    forced = estimate_input_tokens(
        messages, [WEATHER], None, ANTHROPIC, tool_choice=ToolChoice.any()
    )
    assert auto - forced == 346 - 313
    haiku = ANTHROPIC.for_model("claude-haiku-4-5-20251001")
    assert (haiku.tools_overhead, haiku.tools_overhead_forced) == (264, 340)
    assert ANTHROPIC.for_model("claude-3-opus-latest").tools_overhead == 530
    assert ANTHROPIC.for_model("claude-sonnet-4-5").tools_overhead == 346


def test_openai_tools_are_rendered_as_a_typescript_namespace() -> None:
    assert _typescript(WEATHER) == (
        "// Get the weather for a city.\n"
        "type get_weather = (_: {\n"
        "// The city name.\n"
        "city: string,\n"
        'unit?: "c" | "f",\n'
        "days?: number[],\n"
        "}) => any;\n\n"
    )
    assert _typescript(ToolDefinition(name="ping")) == "type ping = () => any;\n\n"


def test_typescript_rendering_survives_refs_unions_and_recursion() -> None:
    schema = {
        "type": "object",
        "$defs": {"Node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/Node"}}}},
        "properties": {
            "root": {"$ref": "#/$defs/Node"},
            "maybe": {"anyOf": [{"type": "string"}, {"type": "null"}]},
            "kinds": {"type": ["string", "integer"]},
            "missing": {"$ref": "#/$defs/Nowhere"},
        },
    }
    text = _typescript(ToolDefinition(name="walk", input_schema=schema))
    assert "maybe?: string | null," in text and "kinds?: string | number," in text
    assert "missing?: any," in text and text.count("next?:") >= 2


def test_a_tool_call_and_its_result_cost_their_framing() -> None:
    for profile in (ANTHROPIC, OPENAI):
        ask = [Message.user("weather in Paris?")]
        call = ToolUseBlock(id="t1", name="get_weather", input={"city": "Paris"})
        loop = [
            *ask,
            Message.assistant(call),
            Message.tool(ToolResultBlock(tool_use_id="t1", content="sunny")),
        ]
        before = estimate_input_tokens(ask, [WEATHER], None, profile)
        after = estimate_input_tokens(loop, [WEATHER], None, profile)
        assert after - before >= profile.per_tool_call + 2 * profile.per_message + 3


def test_earlier_turns_reasoning_counts_only_where_the_provider_keeps_it() -> None:
    thought = ThinkingBlock(thinking="Let me think about this carefully. " * 40, signature="s")
    done = [
        Message.user("q1"),
        Message.assistant(thought, TextBlock(text="a1")),
        Message.user("q2"),
    ]
    in_loop = [
        Message.user("q1"),
        Message.assistant(thought, ToolUseBlock(id="t1", name="lookup")),
        Message.tool(ToolResultBlock(tool_use_id="t1", content="r")),
    ]

    def without_thought(messages: list[Message]) -> list[Message]:
        return [
            Message(role=m.role, content=[b for b in m.content if b is not thought])
            for m in messages
        ]

    for messages, anthropic_keeps in ((done, False), (in_loop, True)):
        with_it = estimate_input_tokens(messages, [], None, ANTHROPIC)
        stripped = estimate_input_tokens(without_thought(messages), [], None, ANTHROPIC)
        assert (with_it > stripped) is anthropic_keeps
        assert estimate_input_tokens(messages, [], None, OPENAI) == estimate_input_tokens(
            without_thought(messages), [], None, OPENAI
        )  # OpenAI is sent no reasoning at all
        assert estimate_input_tokens(messages, [], None) > estimate_input_tokens(
            without_thought(messages), [], None
        )  # the default counts everything


def test_thinking_and_an_output_schema_add_their_overheads() -> None:
    messages = [Message.user("hi")]
    plain = estimate_input_tokens(messages, [], None, ANTHROPIC)
    assert estimate_input_tokens(messages, [], None, ANTHROPIC, thinking=True) - plain == 29
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    assert estimate_input_tokens(messages, [], None, OPENAI, output_schema=schema) > (
        estimate_input_tokens(messages, [], None, OPENAI) + 5
    )


# The profile in the stack, the adapter and capability_check ----------------------------------


def test_each_builtin_stack_declares_its_profile() -> None:
    assert ANTHROPIC.text_counting == OPENAI.text_counting == "pieces"
    assert ANTHROPIC.tool_rendering == "json" and OPENAI.tool_rendering == "typescript"
    assert (ANTHROPIC.tools_overhead, ANTHROPIC.tools_overhead_forced) == (346, 313)


def _stack(**token_estimate: Any) -> dict[str, Any]:
    return {
        "name": "anthropic",
        "endpoint": {"base_url": "https://api.anthropic.com", "path": "/v1/messages"},
        "token_estimate": token_estimate,
        "stages": ["capability_check", "transport"],
    }


def test_a_stack_without_a_profile_gets_the_default_and_bad_ones_are_refused() -> None:
    spec = parse_stack({k: v for k, v in _stack().items() if k != "token_estimate"})
    assert spec.token_estimate == DEFAULT_PROFILE
    with pytest.raises(ConfigError, match="token_estimate"):
        parse_stack(_stack(per_mesage=3))
    with pytest.raises(ConfigError, match=r"models\.claude-x: per_message"):
        parse_stack(_stack(models={"claude-x": {"per_message": -1}}))


def test_the_adapter_estimates_with_its_stacks_profile() -> None:
    messages, tools = [Message.user("What is the capital of France?")], [WEATHER]
    for name, profile in (("anthropic", ANTHROPIC), ("openai", OPENAI)):
        adapter = build_adapter(name, AdapterConfig(api_key="k"))
        got = adapter.estimate_input_tokens(messages, tools, "Be brief.")
        assert got == estimate_input_tokens(messages, tools, "Be brief.", profile)
        assert got != estimate_input_tokens(messages, tools, "Be brief.")
    adapter = build_adapter("anthropic", AdapterConfig(api_key="k"))
    haiku = adapter.estimate_input_tokens(messages, tools, None, model="anthropic:claude-haiku-4-5")
    assert adapter.estimate_input_tokens(messages, tools, None) - haiku == 346 - 264


@pytest.mark.anyio
async def test_capability_check_estimates_with_the_calls_profile() -> None:
    caps = FULL_CAPABILITIES.model_copy(update={"max_context_tokens": 300})
    request = CanonicalRequest(
        model="anthropic:claude-x",
        messages=[Message.user("hi")],
        max_output_tokens=100,
        tools=[WEATHER],
    )
    assert unmet_needs(request, caps) == []  # the default has no hidden tool prompt
    assert any("context" in p for p in unmet_needs(request, caps, ANTHROPIC))

    async def inner(req: CanonicalRequest, call: Call) -> Any:
        yield TextDelta(0, "ok")

    stage = bound(CapabilityCheck(), capabilities=caps)
    out = [e async for e in stage(request, make_call(), inner)]
    assert len(out) == 1
    counted = bound(CapabilityCheck(), capabilities=caps, token_profile=ANTHROPIC)
    with pytest.raises(CapabilityError, match="context"):
        _ = [e async for e in counted(request, make_call(), inner)]


REPLY = {
    "id": "msg_1",
    "type": "message",
    "role": "assistant",
    "model": "claude-x",
    "content": [{"type": "text", "text": "Hello!"}],
    "stop_reason": "end_turn",
    "usage": {"input_tokens": 9, "output_tokens": 3},
}


@pytest.mark.anyio
async def test_the_adapter_hands_its_yaml_profile_to_capability_check(tmp_path: Path) -> None:
    builtin = Path(metis.__file__).parent / "stacks" / "builtin" / "anthropic.yaml"
    stack = yaml.safe_load(builtin.read_text())
    stack["capabilities"]["max_context_tokens"] = 1_000
    stack["token_estimate"] = {"per_request": 2_000}  # every request looks too big
    greedy = tmp_path / "greedy.yaml"
    greedy.write_text(yaml.safe_dump(stack))
    del stack["token_estimate"]
    plain = tmp_path / "plain.yaml"
    plain.write_text(yaml.safe_dump(stack))
    sent: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json=REPLY)

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    config = AdapterConfig(api_key="k", http_client=client)
    request = CanonicalRequest(
        model="anthropic:claude-x", messages=[Message.user("hi")], max_output_tokens=100
    )
    adapter = build_adapter(greedy, config)
    assert adapter.estimate_input_tokens(request.messages, [], None) > 2_000
    with pytest.raises(CapabilityError, match="about 200"):
        await adapter.complete(request)
    assert sent == []
    response = await build_adapter(plain, config).complete(request)
    assert response.text == "Hello!" and len(sent) == 1


def test_a_models_profile_is_made_once_and_is_its_own() -> None:
    opus = ANTHROPIC.for_model("claude-3-opus-latest")
    assert ANTHROPIC.for_model("claude-3-opus-latest") is opus  # what is kept per profile is found
    assert ANTHROPIC.for_model("claude-sonnet-4-5") is not opus
    assert opus.tools_overhead == 530
