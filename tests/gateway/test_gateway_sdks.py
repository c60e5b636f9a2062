"""The official SDKs pointed at ``metis serve`` (a real uvicorn server on loopback) with
emulator-backed models of every family behind it: streamed and not, tools over several
turns with the model swapped between turns, structured output, and each error class arriving
as the SDK's own exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import FAMILIES, GATEWAY_KEY, WEATHER_MESSAGES_TOOL

from ..helpers import ImportOnUse

anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")

ALIASES = [alias for _, _, alias in FAMILIES.values()] + ["fallback"]
WEATHER = WEATHER_MESSAGES_TOOL


@pytest.mark.parametrize("model", ALIASES)
def test_every_family_through_every_api_streamed_and_not(model: str, claude: Any, oai: Any) -> None:
    said = [{"role": "user", "content": "Hi"}]
    message = claude.messages.create(model=model, max_tokens=200, messages=said)
    assert message.content[0].text == "You said: Hi" and message.model == model
    assert message.stop_reason == "end_turn" and message.usage.output_tokens > 0
    with claude.messages.stream(model=model, max_tokens=200, messages=said) as stream:
        assert stream.get_final_text() == "You said: Hi"
    completion = oai.chat.completions.create(model=model, messages=said)
    assert completion.choices[0].message.content == "You said: Hi"
    chunks = list(
        oai.chat.completions.create(
            model=model, messages=said, stream=True, stream_options={"include_usage": True}
        )
    )
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == (
        "You said: Hi"
    )
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens > 0
    assert oai.responses.create(model=model, input="Hi").output_text == "You said: Hi"
    with oai.responses.stream(model=model, input="Hi") as stream:
        assert stream.get_final_response().output_text == "You said: Hi"


def test_anthropic_tools_over_turns_swapping_model(claude: Any) -> None:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = claude.messages.create(
        model="flash", max_tokens=300, messages=messages, tools=[WEATHER]
    )
    call = next(block for block in first.content if block.type == "tool_use")
    assert first.stop_reason == "tool_use" and call.name == "get_weather"
    assert call.input == {"city": "Oslo"}
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Cold, 2 C"}],
        },
    ]
    with claude.messages.stream(
        model="gpt", max_tokens=300, messages=messages, tools=[WEATHER]
    ) as stream:
        answer = stream.get_final_message()
    assert answer.stop_reason == "end_turn" and "Cold, 2 C" in answer.content[0].text


def test_chat_tools_streamed_over_turns_swapping_model(oai: Any) -> None:
    tool = {
        "type": "function",
        "function": {
            "name": WEATHER["name"],
            "description": WEATHER["description"],
            "parameters": WEATHER["input_schema"],
        },
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Rome?"}]
    chunks = list(
        oai.chat.completions.create(model="sonnet", messages=messages, tools=[tool], stream=True)
    )
    fragments = [c.choices[0].delta.tool_calls for c in chunks if c.choices]
    calls = [call for found in fragments if found for call in found]
    call_id, name = calls[0].id, calls[0].function.name
    arguments = "".join(c.function.arguments or "" for c in calls)
    assert name == "get_weather" and json.loads(arguments) == {"city": "Rome"}
    assert chunks[-1].choices[0].finish_reason == "tool_calls"
    messages += [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": arguments},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": "Sunny, 24 C"},
    ]
    reply = oai.chat.completions.create(model="haiku", messages=messages, tools=[tool])
    assert "Sunny, 24 C" in reply.choices[0].message.content


def test_responses_tools_with_previous_response_id(oai: Any) -> None:
    tool = {"type": "function", **{k: WEATHER[k] for k in ("name", "description")}}
    tool["parameters"] = WEATHER["input_schema"]
    first = oai.responses.create(model="gpt5", input="Weather in Lima?", tools=[tool])
    call = next(item for item in first.output if item.type == "function_call")
    assert json.loads(call.arguments) == {"city": "Lima"}
    second = oai.responses.create(
        model="llama",
        previous_response_id=first.id,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "Mild, 18 C"}],
        tools=[tool],
    )
    assert "Mild, 18 C" in second.output_text
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="gpt5", previous_response_id="resp_unknown", input="Hi")
    assert refused.value.code == "previous_response_not_found"


def test_structured_output_through_chat_and_responses(oai: Any) -> None:
    schema = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "population": {"type": "integer"}},
        "required": ["name", "population"],
        "additionalProperties": False,
    }
    fmt = {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}}
    reply = oai.chat.completions.create(
        model="flash", messages=[{"role": "user", "content": "A city?"}], response_format=fmt
    )
    assert set(json.loads(reply.choices[0].message.content)) == {"name", "population"}
    text = {"format": {"type": "json_schema", "name": "city", "schema": schema, "strict": True}}
    answered = oai.responses.create(model="gpt5", input="A city?", text=text)
    assert set(json.loads(answered.output_text)) == {"name", "population"}


def test_errors_arrive_as_each_sdks_own_classes(url: str, emulator: Emulator) -> None:
    said = [{"role": "user", "content": "Hi"}]
    wrong = anthropic.Anthropic(api_key="wrong", base_url=url, max_retries=0)
    with pytest.raises(anthropic.AuthenticationError):
        wrong.messages.create(model="gpt", max_tokens=10, messages=said)
    wrong_oai = openai.OpenAI(api_key="wrong", base_url=url + "/v1", max_retries=0)
    with pytest.raises(openai.AuthenticationError):
        wrong_oai.chat.completions.create(model="gpt", messages=said)
    claude = anthropic.Anthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
    oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
    with pytest.raises(anthropic.NotFoundError):
        claude.messages.create(model="no-such-model", max_tokens=10, messages=said)
    with pytest.raises(openai.NotFoundError):
        oai.chat.completions.create(model="no-such-model", messages=said)
    emulator.push_fault("rate_limit")
    with pytest.raises(anthropic.RateLimitError):
        claude.messages.create(model="flash", max_tokens=10, messages=said)
    emulator.push_fault("rate_limit")
    with pytest.raises(openai.RateLimitError):
        oai.responses.create(model="sonnet", input="Hi")
    emulator.push_fault("overloaded")
    with pytest.raises(anthropic.InternalServerError) as overloaded:
        claude.messages.create(model="gpt", max_tokens=10, messages=said)
    assert overloaded.value.status_code == 529
    emulator.push_fault("server_error")
    with pytest.raises(openai.InternalServerError):
        oai.chat.completions.create(model="llama", messages=said, stream=True)


def test_what_the_model_cannot_honour_is_left_out_and_named(claude: Any) -> None:
    raw = claude.messages.with_raw_response.create(
        model="gpt",
        max_tokens=100,
        extra_body={"top_k": 5},
        thinking={"type": "enabled", "budget_tokens": 2048},
        messages=[{"role": "user", "content": "Hi"}],
    )
    dropped = raw.headers["x-metis-dropped"]
    assert "top_k" in dropped and "thinking" in dropped
    assert raw.parse().content[0].text == "You said: Hi"


def test_the_model_list_reads_in_both_sdks(claude: Any, oai: Any) -> None:
    """OpenAI's list is one page; Anthropic's comes in pages of ``limit`` (its API's cursors,
    which the SDK follows as the list is read)."""
    listed = [model.id for model in oai.models.list()]
    assert {"sonnet", "anthropic:claude-sonnet-4-5", "fallback"} <= set(listed)
    assert [model.id for model in claude.models.list()] == listed
    first = claude.models.list(limit=2)
    assert [m.id for m in first.data] == listed[:2] and first.has_more
    assert [model.id for model in first] == listed  # the next pages, after its last_id
    before = claude.models.list(before_id=listed[3], limit=2)
    assert [m.id for m in before.data] == listed[1:3] and before.has_more
    last = claude.models.list(after_id=listed[-3])
    assert [m.id for m in last.data] == listed[-2:] and not last.has_more
    with pytest.raises(anthropic.BadRequestError, match="limit"):
        claude.models.list(limit=0)
    with pytest.raises(anthropic.BadRequestError, match="after_id"):
        claude.models.list(after_id="no-such-model")


def test_a_route_is_listed_with_its_models_and_the_limits_all_of_them_keep(
    claude: Any, oai: Any
) -> None:
    """A client sizing its request by the list (``max_input_tokens``, ``context_window``)
    fits whichever of the route's models answers: the smallest of their limits (they were
    None for a route, which lists no model)."""
    flash, gpt = oai.models.retrieve("flash"), oai.models.retrieve("gpt")
    route = oai.models.retrieve("fallback")
    assert route.kind == "route" and route.models == ["flash", "gpt"]
    assert route.context_window == min(flash.context_window, gpt.context_window)
    assert route.max_output_tokens == min(flash.max_output_tokens, gpt.max_output_tokens)
    listed = claude.models.retrieve("fallback")
    assert listed.max_input_tokens == route.context_window
    assert listed.max_tokens == route.max_output_tokens


def test_thinking_goes_back_signed_to_the_model_that_wrote_it(
    claude: Any, emulator: Emulator
) -> None:
    thinking = {"type": "enabled", "budget_tokens": 2000}
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    with claude.messages.stream(
        model="sonnet", max_tokens=4000, thinking=thinking, messages=messages, tools=[WEATHER]
    ) as stream:
        first = stream.get_final_message()
    assert [block.type for block in first.content] == ["thinking", "tool_use"]
    call = first.content[1]
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in first.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "2 C"}],
        },
    ]
    raw = claude.messages.with_raw_response.create(
        model="sonnet", max_tokens=4000, thinking=thinking, messages=messages, tools=[WEATHER]
    )
    assert "x-metis-dropped" not in raw.headers and "2 C" in raw.parse().content[-1].text
    sent = emulator.bodies("anthropic")[-1]["messages"][1]["content"][0]
    assert sent["type"] == "thinking" and not sent["signature"].startswith("metis1.")
    elsewhere = claude.messages.with_raw_response.create(
        model="flash", max_tokens=4000, messages=messages, tools=[WEATHER]
    )
    assert "thinking" in elsewhere.headers["x-metis-dropped"]  # not Gemini's to read


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_reasoning_items_carry_thinking_back_to_the_model_that_wrote_it(
    oai: Any, emulator: Emulator, streamed: bool
) -> None:
    """A Responses client that keeps no state on the server (``store: false``, ``include:
    ["reasoning.encrypted_content"]``: Codex CLI, the OpenAI Agents SDK) sends the reasoning
    items back: they carry Claude's signed thinking back to it in the tool loop (the gateway
    left them out, and Claude's thinking was off until the loop closed), and to no other."""
    tool = {"type": "function", **{k: WEATHER[k] for k in ("name", "description")}}
    tool["parameters"] = WEATHER["input_schema"]
    asked: dict[str, Any] = {
        "tools": [tool],
        "reasoning": {"effort": "low"},
        "max_output_tokens": 4000,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    said: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    if streamed:
        with oai.responses.stream(model="sonnet", input=said, **asked) as stream:
            first = stream.get_final_response()
    else:
        first = oai.responses.create(model="sonnet", input=said, **asked)
    reasoning, call = first.output
    assert reasoning.type == "reasoning" and reasoning.encrypted_content.startswith("metis1.")
    assert reasoning.summary == []  # none asked: the thinking rides in the encrypted content
    said += [item.model_dump(exclude_none=True) for item in first.output]
    said.append({"type": "function_call_output", "call_id": call.call_id, "output": "2 C"})
    raw = oai.responses.with_raw_response.create(model="sonnet", input=said, **asked)
    assert "x-metis-dropped" not in raw.headers and "2 C" in raw.parse().output_text
    sent = emulator.bodies("anthropic")[-1]["messages"][1]["content"][0]
    assert sent["type"] == "thinking" and sent["thinking"].startswith("The user wrote")
    assert not sent["signature"].startswith("metis1.")
    elsewhere = oai.responses.with_raw_response.create(model="flash", input=said, **asked)
    assert "thinking" in elsewhere.headers["x-metis-dropped"]  # not Gemini's to read


def streamed_turn(claude: Any, model: str, messages: list[Any], **asked: Any) -> Any:
    """One turn of ``messages.create(..., stream=True)`` put together from its raw events
    (each thinking block must end with its ``signature_delta``, as Anthropic's do): its
    content blocks as a client sends them back, and its stop reason."""
    blocks: dict[int, dict[str, Any]] = {}
    stop, signed = None, set()
    for event in claude.messages.create(model=model, messages=messages, stream=True, **asked):
        if event.type == "content_block_start":
            blocks[event.index] = event.content_block.model_dump(exclude_none=True)
        elif event.type == "content_block_delta":
            block, delta = blocks[event.index], event.delta
            if delta.type == "signature_delta":
                block["signature"], _ = delta.signature, signed.add(event.index)
            for kind, field in (("thinking", "thinking"), ("text", "text")):
                if delta.type == f"{kind}_delta":
                    block[field] += getattr(delta, field)
            if delta.type == "input_json_delta":
                block["json"] = block.get("json", "") + delta.partial_json
        elif event.type == "content_block_stop" and blocks[event.index]["type"] == "thinking":
            assert event.index in signed
        elif event.type == "message_delta":
            stop = event.delta.stop_reason
    content = [blocks[i] for i in sorted(blocks)]
    for block in content:
        if block["type"] == "tool_use":
            block["input"] = json.loads(block.pop("json", "") or "{}")
    return content, stop


def test_streamed_thinking_and_tools_over_turns_swapping_model(
    claude: Any, emulator: Emulator
) -> None:
    """Gemini's thinking comes with no signature: handed out with its maker in its place, it
    goes back to Gemini alone. Handed out empty, it read as the client's own and went to
    Claude, which refuses an unsigned thinking block (a 400 on the turn after the swap)."""
    asked = {"max_tokens": 4000, "thinking": {"type": "enabled", "budget_tokens": 2000}}
    asked["tools"] = [WEATHER]
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    stops = []
    for turn, model in enumerate(["flash", "sonnet", "sonnet", "sonnet", "flash"]):
        content, stop = streamed_turn(claude, model, messages, **asked)
        stops.append(stop)
        thought = [b["signature"] for b in content if b["type"] == "thinking"]
        # the turn closing a tool loop Gemini began: Claude's thinking is off until it closes
        assert len(thought) == (turn != 1) and all(thought)
        messages.append({"role": "assistant", "content": content})
        if stop == "tool_use":
            result = {"type": "tool_result", "tool_use_id": content[-1]["id"], "content": "2 C"}
            messages.append({"role": "user", "content": [result]})
        else:
            assert "2 C" in content[-1]["text"]
            messages.append({"role": "user", "content": "Weather in Rome?"})
        if model == "sonnet":  # Claude is sent no thinking but its own, signed as it signed it
            sent = emulator.bodies("anthropic")[-1]["messages"]
            blocks = [b for m in sent if isinstance(m["content"], list) for b in m["content"]]
            own = [b["signature"] for b in blocks if b["type"] == "thinking"]
            assert all(s and not s.startswith("metis1.") for s in own)
            assert len(own) == (turn == 3)
    assert stops == ["tool_use", "end_turn", "tool_use", "end_turn", "tool_use"]


def test_reasoning_items_the_gateway_named_are_not_sent_to_openai_unkept(
    oai: Any, emulator: Emulator
) -> None:
    """``store: false`` without the encrypted content (the OpenAI Agents SDK's
    ``ModelSettings(store=False)``): Claude's reasoning item comes back by the gateway's id
    alone, which nothing can give back. Passed through to gpt-5 as it came, OpenAI refused
    the request (its "Item with id ... not found"); it is left out and named, as the
    translated path leaves it."""
    tool = {"type": "function", **{k: WEATHER[k] for k in ("name", "description")}}
    tool["parameters"] = WEATHER["input_schema"]
    asked: dict[str, Any] = {"tools": [tool], "reasoning": {"effort": "low"}, "store": False}
    said: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    first = oai.responses.create(model="sonnet", input=said, **asked)
    assert [item.type for item in first.output] == ["reasoning", "function_call"]
    said += [item.model_dump(exclude_none=True) for item in first.output]
    call = first.output[1].call_id
    said.append({"type": "function_call_output", "call_id": call, "output": "2 C"})
    raw = oai.responses.with_raw_response.create(model="gpt5", input=said, **asked)
    assert raw.headers["x-metis-path"] == "pass-through"
    assert raw.headers["x-metis-dropped"] == "input[1] (reasoning)"
    assert "2 C" in raw.parse().output_text
    sent = emulator.bodies("openai_responses")[-1]["input"]
    assert [item.get("type") for item in sent] == [None, "function_call", "function_call_output"]


def test_prompt_caching_marks_reach_each_model_in_its_own_form(
    claude: Any, emulator: Emulator
) -> None:
    """``cache_control`` on the system prompt, a tool and a message's blocks: passed through
    to Claude as the client wrote them (the second call reads what the first wrote); for
    another model a message block's mark is its cache hint, in that provider's form (Bedrock's
    ``cachePoint`` after the block, with its TTL) or named where it has none (OpenAI caches
    prefixes itself), and the system prompt's and a tool's are named (each stack caches them
    at its own breakpoints). Either way the second call's cache read is said in Anthropic's
    usage fields."""
    marked, hour = {"type": "ephemeral"}, {"type": "ephemeral", "ttl": "1h"}
    system = {"type": "text", "text": "You answer weather questions. " * 300, "cache_control": hour}
    said = [
        {"type": "text", "text": "Weather?", "cache_control": hour},
        {"type": "text", "text": "Hi"},
    ]
    asked: dict[str, Any] = {
        "max_tokens": 100,
        "system": [system],
        "tools": [{**WEATHER, "cache_control": marked}],
        "messages": [{"role": "user", "content": said}],
    }
    named = "system[0].cache_control; tools[0].cache_control"
    for model in ("sonnet", "gpt", "haiku"):
        wrote = claude.messages.with_raw_response.create(model=model, **asked)
        read = claude.messages.with_raw_response.create(model=model, **asked).parse().usage
        assert read.cache_read_input_tokens > 1000 and read.input_tokens < 100
        if model == "sonnet":
            assert "x-metis-dropped" not in wrote.headers
            assert wrote.parse().usage.cache_creation_input_tokens == read.cache_read_input_tokens
            sent = emulator.bodies("anthropic")[-1]
            assert sent["messages"][0]["content"][0]["cache_control"] == hour
        elif model == "gpt":
            dropped = wrote.headers["x-metis-dropped"]
            assert dropped.startswith(f"{named}; cache (OpenAI has no form for a cache hint")
        else:
            assert wrote.headers["x-metis-dropped"] == named
            sent = emulator.bodies("bedrock")[-1]["messages"][0]["content"]
            assert sent[1] == {"cachePoint": {"type": "default", "ttl": "1h"}}


@pytest.mark.parametrize("model", ["flash", "gpt5", "haiku", "gpt"])
def test_count_tokens_counts_the_system_and_tools_for_another_model(
    claude: Any, model: str
) -> None:
    """``messages.count_tokens`` for a model of another family counts what the message would
    send it: the system prompt and tools too. Gemini and gpt-5 are counted by their providers'
    own counting, so the count is the input the message then uses; the others are estimated."""
    said = [{"role": "user", "content": "Weather in Oslo, please, and tell me more about it"}]
    full: dict[str, Any] = {"system": "You are a weather bot. Answer briefly.", "tools": [WEATHER]}
    bare = claude.messages.count_tokens(model=model, messages=said).input_tokens
    counted = claude.messages.count_tokens(model=model, messages=said, **full).input_tokens
    assert 0 < bare < counted
    if model in ("flash", "gpt5"):
        used = claude.messages.create(model=model, messages=said, max_tokens=50, **full).usage
        assert counted == used.input_tokens


@pytest.mark.parametrize("streamed", [False, True], ids=["whole", "streamed"])
def test_geminis_unsigned_reasoning_items_carry_their_maker(oai: Any, streamed: bool) -> None:
    """Gemini gives its thinking no signature: asked for the encrypted content, its reasoning
    item carries Gemini as its maker (it had none, as OpenAI always gives one), so sent back it
    returns to Gemini, which needs nothing of it (no word in ``x-metis-dropped``), and is
    named as Gemini's anywhere else."""
    tool = {"type": "function", **{k: WEATHER[k] for k in ("name", "description")}}
    tool["parameters"] = WEATHER["input_schema"]
    asked: dict[str, Any] = {
        "tools": [tool],
        "reasoning": {"effort": "low"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    said: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    if streamed:
        with oai.responses.stream(model="flash", input=said, **asked) as stream:
            first = stream.get_final_response()
    else:
        first = oai.responses.create(model="flash", input=said, **asked)
    reasoning, call = first.output
    assert reasoning.encrypted_content.startswith("metis1.")
    said += [item.model_dump(exclude_none=True) for item in first.output]
    said.append({"type": "function_call_output", "call_id": call.call_id, "output": "2 C"})
    back = oai.responses.with_raw_response.create(model="flash", input=said, **asked)
    assert "x-metis-dropped" not in back.headers and "2 C" in back.parse().output_text
    elsewhere = oai.responses.with_raw_response.create(model="haiku", input=said, **asked)
    assert "produced by gemini" in elsewhere.headers["x-metis-dropped"]
