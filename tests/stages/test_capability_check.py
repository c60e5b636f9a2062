"""capability_check: what the model cannot serve is refused before any network call
(docs/catalog.md), and the token estimate behind it."""

from __future__ import annotations

from typing import Any

import pytest

from metis.adapter import build_adapter
from metis.catalog.estimate import PER_IMAGE, estimate_input_tokens
from metis.errors import CapabilityError, ErrorClass
from metis.model import (
    AdapterCapabilities,
    Base64ImageSource,
    CanonicalRequest,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    Role,
    TextBlock,
    TextDelta,
    ThinkingBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    URLImageSource,
)
from metis.pipeline.call import Call
from metis.stages.policy.capability_check import CapabilityCheck, fitted_for, unmet_needs

from ..helpers import FULL_CAPABILITIES, bound, make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)


def _image(media_type: str = "image/png", data: str = "aGk=") -> ImageBlock:
    return ImageBlock(source=Base64ImageSource(media_type=media_type, data=data))


def _request(*messages: Message, **fields: Any) -> CanonicalRequest:
    fields.setdefault("max_output_tokens", 100)
    return CanonicalRequest(
        model="anthropic:claude-x", messages=list(messages) or [Message.user("hi")], **fields
    )


def _lacking(**flags: Any) -> AdapterCapabilities:
    return FULL_CAPABILITIES.model_copy(update=flags)


async def _run(request: CanonicalRequest, caps: AdapterCapabilities) -> tuple[list[Any], list[Any]]:
    """Run the stage; return (requests inner was called with, events out)."""
    calls: list[Any] = []

    async def inner(req: CanonicalRequest, call: Call) -> Any:
        calls.append(req)
        yield TextDelta(0, "ok")

    try:
        stage = bound(CapabilityCheck(), capabilities=caps)
        out = [e async for e in stage(request, make_call(), inner)]
    except CapabilityError:
        assert calls == [], "inner ran before the capability check refused"
        raise
    return calls, out


# One need per capability flag: (flag, a request that needs it, words the error must use)
NEEDS: list[tuple[str, CanonicalRequest, str]] = [
    ("supports_images", _request(Message.user("look", _image())), "images"),
    ("supports_tools", _request(tools=[ToolDefinition(name="lookup")]), "tools"),
    (
        "supports_tools",
        _request(
            Message.user("go"),
            Message.assistant(ToolUseBlock(id="tu_1", name="lookup")),
            Message.tool(ToolResultBlock(tool_use_id="tu_1", content="r")),
        ),
        "tools",
    ),
    (
        "supports_parallel_tool_calls",
        _request(tools=[ToolDefinition(name="lookup")], parallel_tool_calls=True),
        "parallel",
    ),
    ("supports_thinking", _request(thinking=ThinkingConfig(budget_tokens=1024)), "thinking"),
    (
        "supports_structured_output",
        _request(output_schema={"type": "object", "properties": {}}),
        "schema",
    ),
]
SYSTEM_TEXT = [
    _request(system_prompt="Be brief."),
    _request(Message.system("Be brief."), Message.user("hi")),
    _request(Message.system("Be brief."), Message.assistant("Yes?"), system_prompt=" "),
]


@pytest.mark.anyio
async def test_a_missing_tools_images_or_thinking_says_how_to_declare_a_model_that_has_them() -> (
    None
):
    """Such a refusal may be metis's conservative guess (a local model it cannot look up): the
    error says where the capabilities came from and how to declare more."""
    (_, tools, *_rest) = NEEDS
    with pytest.raises(CapabilityError) as refused:
        await _run(tools[1], _lacking(supports_tools=False))
    said = str(refused.value)
    assert "its catalog entry, else its stack's declared capabilities" in said
    assert "capabilities={'supports_tools': True}" in said
    assert "Ollama" not in said  # an Anthropic adapter's (tests/helpers.py)
    with pytest.raises(CapabilityError) as refused:
        await _run(_request(max_output_tokens=10**6), FULL_CAPABILITIES)
    assert "declared capabilities" not in str(refused.value)  # a limit, not a flag


@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["ollama", "anthropic"])
async def test_only_an_ollama_adapter_is_told_how_to_ask_its_server(stack: str) -> None:
    """Before, every refused flag told of "an Ollama server" (a Claude model's too), and not
    that the adapter is asked only once opened (an adapter never opened keeps the defaults)."""
    adapter = build_adapter(
        stack,
        api_key="k",
        base_url="http://127.0.0.1:9",
        capabilities={"supports_tools": False},
        settings={"model": "qwen3"} if stack == "ollama" else None,
    )
    request = _request(tools=[ToolDefinition(name="lookup")])
    request = request.model_copy(update={"model": f"{stack}:qwen3"})
    with pytest.raises(CapabilityError) as refused:
        await adapter.complete(request)
    said = str(refused.value)
    assert "capabilities={'supports_tools': True}" in said
    ollama = "settings={'model': ...}, and async with or init_on_first_call=True)"
    assert (ollama in said) == (stack == "ollama")
    await adapter.aclose()


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("lacking", "request_", "named"),
    [
        ("supports_images", NEEDS[0][1], "capabilities={'supports_images': True}"),
        ("supports_thinking", NEEDS[4][1], "capabilities={'supports_thinking': True}"),
        ("supports_tools", NEEDS[1][1], "capabilities={'supports_tools': True}"),
    ],
)
async def test_how_to_declare_names_the_capability_the_model_lacked(
    lacking: str, request_: CanonicalRequest, named: str
) -> None:
    """A user refused for images was told to declare supports_tools (a new user's copy of the
    fix would not have helped): the error names the flag of what was refused."""
    with pytest.raises(CapabilityError) as refused:
        await _run(request_, _lacking(**{lacking: False}))
    assert named in str(refused.value)


@pytest.mark.anyio
async def test_how_to_declare_names_every_lacking_capability() -> None:
    request = _request(Message.user("look", _image()), tools=[ToolDefinition(name="lookup")])
    with pytest.raises(CapabilityError) as refused:
        await _run(request, _lacking(supports_images=False, supports_tools=False))
    assert "capabilities={'supports_images': True, 'supports_tools': True}" in str(refused.value)


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("flag", "request_", "words"), NEEDS, ids=[f"{n[0]}-{i}" for i, n in enumerate(NEEDS)]
)
async def test_each_capability_is_refused_before_inner_runs(
    flag: str, request_: CanonicalRequest, words: str
) -> None:
    # the request is fine for a model that has the capability ...
    calls, out = await _run(request_, FULL_CAPABILITIES)
    assert calls == [request_] and calls[0] is request_
    assert len(out) == 1
    # ... and refused, cleanly and before any IO, by one that lacks it
    with pytest.raises(CapabilityError) as info:
        await _run(request_, _lacking(**{flag: False}))
    error = info.value
    assert error.error_class is ErrorClass.CAPABILITY
    assert error.retryable is False
    assert error.provider == "anthropic"
    assert error.request_id == request_.request_id
    assert words in error.message
    assert "anthropic:claude-x" in error.message


@pytest.mark.anyio
@pytest.mark.parametrize(
    "flag", ["supports_streaming", "supports_streaming_tool_calls", "supports_prompt_caching"]
)
async def test_flags_no_request_can_need_do_not_refuse(flag: str) -> None:
    # Streaming falls back to one JSON body (the adapter folds it into the same events);
    # input deltas and caching are the adapter's own business.
    request = _request(tools=[ToolDefinition(name="t")], stream=True)
    calls, _ = await _run(request, _lacking(**{flag: False}))
    assert calls == [request]


def test_parallel_tool_calls_false_is_no_need() -> None:
    request = _request(tools=[ToolDefinition(name="t")], parallel_tool_calls=False)
    assert unmet_needs(request, _lacking(supports_parallel_tool_calls=False)) == []


@pytest.mark.anyio
async def test_every_unmet_need_is_listed_in_one_error() -> None:
    request = _request(
        Message.system("sys"),
        Message.user("look", _image()),
        tools=[ToolDefinition(name="t")],
        parallel_tool_calls=True,
        thinking=ThinkingConfig(budget_tokens=1024),
        output_schema={"type": "object"},
        max_output_tokens=9_000,
    )
    caps = AdapterCapabilities(supports_system_prompt=False, max_output_tokens=8_000)
    with pytest.raises(CapabilityError) as info:
        await _run(request, caps)
    message = info.value.message
    for words in ("images", "tools", "parallel", "thinking", "schema", "9000"):
        assert words in message, words
    assert "system" not in message  # the system text is folded into the user turn, not refused
    assert len(unmet_needs(request, caps)) == 7  # as the request is given, it is unmet


@pytest.mark.anyio
@pytest.mark.parametrize("request_", SYSTEM_TEXT)
async def test_a_model_without_a_system_prompt_reads_it_in_the_first_user_turn(
    request_: CanonicalRequest,
) -> None:
    """One fact, one place: where the capabilities say the model takes no system prompt (the
    catalog says so of o1-mini), the stage folds the system text into the first user turn,
    a user turn of its own when there is none, and says so; nothing is refused."""
    calls, _ = await _run(request_, FULL_CAPABILITIES)
    assert calls == [request_]
    call = make_call()
    stage = bound(CapabilityCheck(), capabilities=_lacking(supports_system_prompt=False))

    async def inner(req: CanonicalRequest, _: Call) -> Any:
        calls.append(req)
        yield TextDelta(0, "ok")

    [_ async for _ in stage(request_, call, inner)]
    sent = calls[-1]
    assert sent.system_prompt is None
    assert all(m.role is not Role.SYSTEM for m in sent.messages)
    first = sent.messages[0]
    assert first.role is Role.USER
    text = first.content[0]
    assert isinstance(text, TextBlock) and text.text.startswith("Be brief.")
    assert [(w.block_type, w.message_id) for w in call.warnings] == [("system prompt", None)]
    # a router decides alike: the model can serve it
    lacking = _lacking(supports_system_prompt=False)
    fitted, problems, _ = fitted_for(request_, lacking, "anthropic", None)
    assert problems == [] and fitted.messages == sent.messages


@pytest.mark.anyio
async def test_a_request_within_capabilities_passes_through_unchanged() -> None:
    request = _request(
        Message.system("sys"),
        Message.user("look", _image()),
        Message.assistant(ToolUseBlock(id="tu_1", name="t")),
        Message.tool(ToolResultBlock(tool_use_id="tu_1", content=[_image()])),
        tools=[ToolDefinition(name="t")],
        parallel_tool_calls=True,
        thinking=ThinkingConfig(budget_tokens=1024),
        output_schema={"type": "object"},
        max_output_tokens=8_000,
    )
    calls, out = await _run(request, FULL_CAPABILITIES)
    assert calls[0] is request
    assert out == [TextDelta(0, "ok")]


@pytest.mark.anyio
async def test_images_inside_tool_results_count() -> None:
    request = _request(
        Message.user("go"),
        Message.assistant(ToolUseBlock(id="tu_1", name="screenshot")),
        Message.tool(
            ToolResultBlock(tool_use_id="tu_1", content=[TextBlock(text="here"), _image()])
        ),
    )
    with pytest.raises(CapabilityError, match="images"):
        await _run(request, _lacking(supports_images=False))


@pytest.mark.anyio
async def test_an_image_type_the_model_does_not_accept_is_refused() -> None:
    caps = _lacking(accepted_image_media_types=["image/png", "image/jpeg"])
    request = _request(
        Message.user("look", _image("image/png"), _image("image/bmp"), _image("image/tiff"))
    )
    with pytest.raises(CapabilityError) as info:
        await _run(request, caps)
    assert "image/bmp" in info.value.message and "image/tiff" in info.value.message
    assert "image/png" not in info.value.message
    # inside a tool result too
    nested = _request(
        Message.user("go"),
        Message.assistant(ToolUseBlock(id="tu_1", name="s")),
        Message.tool(ToolResultBlock(tool_use_id="tu_1", content=[_image("image/bmp")])),
    )
    with pytest.raises(CapabilityError, match="image/bmp"):
        await _run(nested, caps)


def test_accepted_types_allow_their_images_and_an_empty_list_allows_any() -> None:
    request = _request(Message.user("look", _image("image/png"), _image("image/bmp")))
    assert unmet_needs(request, _lacking(accepted_image_media_types=[])) == []
    png = _request(Message.user("look", _image("image/png")))
    assert unmet_needs(png, _lacking(accepted_image_media_types=["image/png"])) == []


def test_url_images_have_no_known_type_to_refuse() -> None:
    url = ImageBlock(source=URLImageSource(url="https://example.com/cat.bmp"))
    request = _request(Message.user("look", url))
    assert unmet_needs(request, _lacking(accepted_image_media_types=["image/png"])) == []
    assert unmet_needs(request, _lacking(supports_images=False)) != []


@pytest.mark.anyio
async def test_max_output_tokens_above_the_limit_is_refused() -> None:
    with pytest.raises(CapabilityError) as info:
        await _run(_request(max_output_tokens=8_001), FULL_CAPABILITIES)
    assert "8001" in info.value.message and "8000" in info.value.message
    calls, _ = await _run(_request(max_output_tokens=8_000), FULL_CAPABILITIES)
    assert len(calls) == 1


@pytest.mark.anyio
async def test_an_input_estimated_above_the_context_is_refused() -> None:
    caps = _lacking(max_context_tokens=1_000)
    with pytest.raises(CapabilityError, match="context"):
        await _run(_request(Message.user("x" * 8_000)), caps)
    calls, _ = await _run(_request(Message.user("x" * 2_000)), caps)
    assert len(calls) == 1


@pytest.mark.anyio
async def test_the_context_estimate_counts_the_system_prompt_and_tools() -> None:
    caps = _lacking(max_context_tokens=1_000)
    with pytest.raises(CapabilityError, match="context"):
        await _run(_request(system_prompt="s" * 8_000), caps)
    big_tool = ToolDefinition(name="t", description="d" * 8_000)
    with pytest.raises(CapabilityError, match="context"):
        await _run(_request(tools=[big_tool]), caps)


def test_a_plain_text_request_needs_nothing_special() -> None:
    assert unmet_needs(_request(), AdapterCapabilities()) == []


# estimate_input_tokens (docs/contract.md §1: ±10% is acceptable) ---------------------------


def _estimate(*messages: Message, tools: list[ToolDefinition] | None = None) -> int:
    return estimate_input_tokens(list(messages), tools or [], None)


@pytest.mark.parametrize("chars", [4_000, 40_000, 400_000])
def test_estimate_grows_with_text_length(chars: int) -> None:
    expected = chars / 4
    got = _estimate(Message.user("a" * chars))
    assert abs(got - expected) <= expected * 0.10


def test_estimate_is_monotonic_in_text() -> None:
    sizes = [0, 10, 100, 1_000, 10_000]
    estimates = [_estimate(Message.user("word " * n)) for n in sizes]
    assert estimates == sorted(estimates)
    assert estimates[-1] > estimates[0]


def test_json_and_english_are_about_four_characters_a_token() -> None:
    english = "The quick brown fox jumps over the lazy dog. " * 100
    got = _estimate(Message.user(english))
    assert abs(got - len(english) / 4) <= len(english) / 4 * 0.10


def test_images_add_a_flat_cost() -> None:
    base = _estimate(Message.user("look"))
    small = _estimate(Message.user("look", _image(data="aGk=")))
    large = _estimate(Message.user("look", _image(data="A" * 400_000)))
    assert small - base == large - base == PER_IMAGE
    two = _estimate(Message.user("look", _image(), _image()))
    assert two - base == 2 * PER_IMAGE


def test_images_inside_tool_results_cost_the_same() -> None:
    without = _estimate(Message.tool(ToolResultBlock(tool_use_id="tu_1", content="")))
    with_image = _estimate(Message.tool(ToolResultBlock(tool_use_id="tu_1", content=[_image()])))
    assert with_image - without == PER_IMAGE


def test_tools_count() -> None:
    base = _estimate(Message.user("hi"))
    schema = {"type": "object", "properties": {"q": {"type": "string", "description": "x" * 400}}}
    tool = ToolDefinition(name="search", description="d" * 400, input_schema=schema)
    one = _estimate(Message.user("hi"), tools=[tool])
    two = _estimate(Message.user("hi"), tools=[tool, tool])
    assert one - base >= 200  # 800+ characters of description and schema
    assert two - base == 2 * (one - base)


def test_tool_calls_results_thinking_and_the_system_prompt_count() -> None:
    base = estimate_input_tokens([Message.user("hi")], [], None)
    assert estimate_input_tokens([Message.user("hi")], [], "s" * 400) - base >= 90
    for block in (
        ToolUseBlock(id="tu_1", name="t", input={"q": "x" * 400}),
        ToolResultBlock(tool_use_id="tu_1", content="x" * 400),
        ToolResultBlock(tool_use_id="tu_1", content=[TextBlock(text="x" * 400)]),
        TextBlock(text="x" * 400),
        ThinkingBlock(thinking="x" * 400, signature="s"),
        RedactedThinkingBlock(data="x" * 800),
    ):
        message = Message(role=Role.ASSISTANT, content=[block])
        assert _estimate(Message.user("hi"), message) - base >= 90, block.type


def test_an_empty_conversation_costs_little() -> None:
    assert estimate_input_tokens([], [], None) == 0
    assert 0 < _estimate(Message.user("")) < 10


def test_stop_sequences_need_a_model_that_takes_them() -> None:
    from metis.model import AdapterCapabilities, CanonicalRequest, Message
    from metis.stages.policy.capability_check import unmet_needs

    request = CanonicalRequest(
        model="m", messages=[Message.user("hi")], max_output_tokens=10, stop_sequences=["END"]
    )
    caps = AdapterCapabilities(supports_stop_sequences=False)
    assert unmet_needs(request, caps) == ["stop sequences were given and the model takes none"]
    assert unmet_needs(request, AdapterCapabilities()) == []


# A conversation that used tools, moved to a model without tool calling ----------------------

CALLED = [
    Message.user("weather in Oslo?"),
    Message.assistant("Checking.", ToolUseBlock(id="tu_1", name="weather", input={"city": "Oslo"})),
    Message.tool(ToolResultBlock(tool_use_id="tu_1", content="rain")),
    Message.assistant("Rain in Oslo."),
]


@pytest.mark.anyio
async def test_the_calls_of_earlier_turns_reach_a_model_without_tool_calling_as_text() -> None:
    """As a file of an earlier turn the model cannot read is left out with a WARN, not refused
    (docs/contract.md §8): the conversation moves there, its calls and results as text."""
    stage = bound(CapabilityCheck(), capabilities=_lacking(supports_tools=False))
    call = make_call()
    sent = stage.rewrite(_request(*CALLED, Message.user("and Rome?")), call)
    assert [m.role for m in sent.messages] == [Role.USER, Role.ASSISTANT] * 2 + [Role.USER]
    said, answered = sent.messages[1].text, sent.messages[2].text
    call_text = '{"name": "weather", "arguments": {"city": "Oslo"}}'
    assert said == f"Checking.\n<tool_call>{call_text}</tool_call>"
    assert answered == '<tool_result name="weather" id="tu_1">rain</tool_result>'
    assert [(w.block_type, w.message_id) for w in call.drops.warnings] == [
        ("tool_use", "messages[1]"),
        ("tool_result", "messages[2]"),
    ]


@pytest.mark.anyio
async def test_results_in_the_turn_sent_to_a_model_without_tool_calling_are_still_refused() -> None:
    with pytest.raises(CapabilityError, match="has no tool calling"):
        await _run(_request(*CALLED[:3]), _lacking(supports_tools=False))
