"""The official SDKs' higher-level helpers pointed at ``metis serve``, which check the event
sequence strictly (they accumulate the stream into the final message themselves): Anthropic's
``messages.stream`` and its tool runner, OpenAI's ``chat.completions.stream``/``parse`` and
``responses.stream``/``parse`` with pydantic models, the raw responses' headers, and a stream
that fails midway arriving as that SDK's failure. Every call is answered by a model of another
family than the SDK's (emulator-backed).

Slow, as the gateway's other clients beyond the SDKs' plain calls (in the default run:
tests/gateway/test_gateway_sdks.py): each helper's first use builds the SDK's parsing types
(~2 s of CPU for ``responses.stream``)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY

from ..helpers import ImportOnUse

pytestmark = pytest.mark.slow
anthropic = ImportOnUse("anthropic")
openai = ImportOnUse("openai")

LONG = "Tell me a long story about the sea and the ships on it"


class City(BaseModel):
    name: str
    population: int


class GetWeather(BaseModel):
    """Current weather for a city."""

    city: str


def test_anthropic_stream_helper_over_two_tool_turns_answered_by_gpt(claude: Any) -> None:
    tool = {"name": "get_weather", "input_schema": GetWeather.model_json_schema()}
    messages: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    with claude.messages.stream(
        model="gpt", max_tokens=300, messages=messages, tools=[tool]
    ) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_message()
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert "input_json" in kinds and first.stop_reason == "tool_use"
    call = first.content[-1]
    assert call.type == "tool_use" and call.input == {"city": "Oslo"}
    messages += [
        {"role": "assistant", "content": first.content},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "2 C"}],
        },
    ]
    with claude.messages.stream(
        model="gpt", max_tokens=300, messages=messages, tools=[tool]
    ) as stream:
        text = "".join(stream.text_stream)
        answer = stream.get_final_message()
    assert "2 C" in text and answer.content[0].text == text
    assert answer.stop_reason == "end_turn" and answer.usage.output_tokens > 0


def test_anthropic_parse_helpers_answered_by_gemini(claude: Any) -> None:
    said = [{"role": "user", "content": "A city?"}]
    parsed = claude.messages.parse(model="flash", max_tokens=300, messages=said, output_format=City)
    assert isinstance(parsed.parsed_output, City)
    with claude.messages.stream(
        model="flash", max_tokens=300, messages=said, output_format=City
    ) as stream:
        assert isinstance(stream.get_final_message().parsed_output, City)


@pytest.mark.parametrize("model", ["flash", "sonnet"])
@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_tool_runner_answered_by_gemini_and_claude(
    claude: Any, streamed: bool, model: str
) -> None:
    """The runner asks for a server-held thread first; the gateway's refusal in the shape the
    SDK knows makes it send the whole conversation instead. Passed through to Claude, the
    refusal is the provider's (here the emulator's, which holds no threads), its
    ``details.error_code`` given on to the SDK (it was dropped, and the runner failed)."""
    ran: list[str] = []

    @anthropic.beta_tool
    def get_weather(city: str) -> str:
        """Current weather for a city."""
        ran.append(city)
        return f"Cold in {city}"

    runner = claude.beta.messages.tool_runner(
        model=model,
        max_tokens=300,
        tools=[get_weather],
        messages=[{"role": "user", "content": "Weather in Oslo?"}],
        stream=streamed,
    )
    replies = [step.get_final_message() if streamed else step for step in runner]
    assert ran == ["Oslo"] and [r.stop_reason for r in replies] == ["tool_use", "end_turn"]
    assert replies[-1].content[0].text == "According to get_weather: Cold in Oslo."


def test_a_message_thread_is_refused_in_the_shape_the_sdk_reads(claude: Any) -> None:
    with pytest.raises(anthropic.BadRequestError) as refused:
        claude.beta.messages.create(
            model="flash",
            max_tokens=100,
            messages=[{"role": "user", "content": "Hi"}],
            extra_body={"thread": {"type": "create"}},
        )
    assert refused.value.error_code == "thread_unsupported_request"


def test_chat_stream_and_parse_helpers_with_pydantic_answered_by_claude(oai: Any) -> None:
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    messages: list[Any] = [{"role": "user", "content": "Weather in Rome?"}]
    with oai.chat.completions.stream(model="sonnet", messages=messages, tools=[tool]) as stream:
        kinds = {event.type for event in stream}
        first = stream.get_final_completion()
    assert "tool_calls.function.arguments.done" in kinds
    call = first.choices[0].message.tool_calls[0]
    assert call.function.parsed_arguments == GetWeather(city="Rome")
    assert first.choices[0].finish_reason == "tool_calls" and first.usage is None
    messages += [
        first.choices[0].message.model_dump(include={"role", "content", "tool_calls"}),
        {"role": "tool", "tool_call_id": call.id, "content": "Sunny, 24 C"},
    ]
    answer = oai.chat.completions.parse(model="sonnet", messages=messages, tools=[tool])
    assert "Sunny, 24 C" in answer.choices[0].message.content
    parsed = oai.chat.completions.parse(
        model="sonnet", messages=[{"role": "user", "content": "A city?"}], response_format=City
    )
    assert isinstance(parsed.choices[0].message.parsed, City)
    with oai.chat.completions.stream(
        model="flash",
        messages=[{"role": "user", "content": "A city?"}],
        response_format=City,
        stream_options={"include_usage": True},
    ) as stream:
        final = stream.get_final_completion()
    assert isinstance(final.choices[0].message.parsed, City) and final.usage.total_tokens > 0


def test_a_streamed_chat_reply_opens_as_openai_opens_it(oai: Any) -> None:
    """The role comes with the first content: ``content: null`` beside a first tool call
    (no empty text before it), ``content: ""`` before text."""
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    said = [{"role": "user", "content": "Weather in Rome?"}]
    chunks = list(
        oai.chat.completions.create(model="sonnet", messages=said, tools=[tool], stream=True)
    )
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content is None
    assert first.tool_calls[0].function.name == "get_weather"
    assert all(c.choices[0].delta.content is None for c in chunks)
    said = [{"role": "user", "content": "Hi"}]
    chunks = list(oai.chat.completions.create(model="sonnet", messages=said, stream=True))
    first = chunks[0].choices[0].delta
    assert first.role == "assistant" and first.content == "" and not first.tool_calls


def test_responses_stream_and_parse_helpers_answered_by_gemini(oai: Any) -> None:
    tool = {
        "type": "function",
        "name": "get_weather",
        "parameters": {**GetWeather.model_json_schema(), "additionalProperties": False},
        "strict": True,
    }
    with oai.responses.stream(model="flash", input="Weather in Lima?", tools=[tool]) as stream:
        kinds = [event.type for event in stream]
        first = stream.get_final_response()
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    call = next(item for item in first.output if item.type == "function_call")
    assert json.loads(call.arguments) == {"city": "Lima"}
    output = {"type": "function_call_output", "call_id": call.call_id, "output": "Mild"}
    with oai.responses.stream(
        model="flash", previous_response_id=first.id, input=[output], tools=[tool]
    ) as stream:
        answer = stream.get_final_response()
    assert "Mild" in answer.output_text and answer.usage.output_tokens > 0
    with oai.responses.stream(model="sonnet", input="A city?", text_format=City) as stream:
        assert isinstance(stream.get_final_response().output_parsed, City)
    parsed = oai.responses.parse(model="sonnet", input="A city?", text_format=City)
    assert isinstance(parsed.output_parsed, City)


def test_every_answer_names_its_request_in_the_apis_header(claude: Any, oai: Any) -> None:
    said = [{"role": "user", "content": "Hi"}]
    raw = claude.messages.with_raw_response.create(model="gpt", max_tokens=50, messages=said)
    assert raw.headers["request-id"].startswith("req_")
    assert raw.parse()._request_id == raw.headers["request-id"]
    with claude.messages.with_streaming_response.create(
        model="flash", max_tokens=50, messages=said, stream=True
    ) as streamed:
        assert streamed.headers["request-id"].startswith("req_")
    chat = oai.chat.completions.with_raw_response.create(model="sonnet", messages=said)
    assert chat.parse()._request_id == chat.headers["x-request-id"]
    passed = oai.chat.completions.with_raw_response.create(model="gpt", messages=said)
    assert passed.headers["x-metis-path"] == "pass-through" and passed.parse()._request_id
    response = oai.responses.with_raw_response.create(model="flash", input="Hi")
    assert response.parse()._request_id == response.headers["x-request-id"]
    with oai.chat.completions.with_streaming_response.create(
        model="flash", messages=said, stream=True
    ) as chunks:
        assert chunks.headers["x-request-id"].startswith("req_")
        assert "".join(c.choices[0].delta.content or "" for c in chunks.parse()) == "You said: Hi"
    with oai.responses.with_streaming_response.create(model="sonnet", input="Hi") as whole:
        assert whole.parse()._request_id == whole.headers["x-request-id"]
    listed = oai.models.with_raw_response.list()
    assert listed.headers["x-request-id"].startswith("req_") and listed.parse().data
    counted = claude.messages.with_raw_response.count_tokens(model="gpt", messages=said)
    assert counted.headers["request-id"].startswith("req_")


def test_the_thinking_tokens_are_counted_in_each_apis_usage(claude: Any, oai: Any) -> None:
    """Gemini's thought tokens, said where each API says them (part of the output tokens)."""
    thinking = {"type": "enabled", "budget_tokens": 2000}
    said = [{"role": "user", "content": "Hi"}]
    with claude.messages.stream(
        model="flash", max_tokens=4000, thinking=thinking, messages=said
    ) as stream:
        used = stream.get_final_message().usage
    assert 0 < used.output_tokens_details.thinking_tokens < used.output_tokens
    with oai.responses.stream(model="flash", input="Hi", reasoning={"effort": "low"}) as stream:
        usage = stream.get_final_response().usage
    assert 0 < usage.output_tokens_details.reasoning_tokens < usage.output_tokens
    chunks = list(
        oai.chat.completions.create(
            model="flash",
            messages=said,
            reasoning_effort="low",
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    details = chunks[-1].usage.completion_tokens_details
    assert 0 < details.reasoning_tokens < chunks[-1].usage.completion_tokens


def test_one_model_is_retrieved_in_both_sdks(claude: Any, oai: Any) -> None:
    assert oai.models.retrieve("sonnet").id == "sonnet"
    named = "bedrock:anthropic.claude-haiku-4-5-20251001-v1:0"
    assert claude.models.retrieve(named).id == named
    sonnet = claude.models.retrieve("sonnet")  # the limits and lifecycle ModelInfo reads
    assert sonnet.max_input_tokens == oai.models.retrieve("sonnet").context_window > 0
    assert sonnet.max_tokens and sonnet.max_tokens > 0 and sonnet.lifecycle == "active"
    with pytest.raises(openai.NotFoundError):
        oai.models.retrieve("no-such-model")
    with pytest.raises(anthropic.NotFoundError):
        claude.models.retrieve("no-such-model")


def test_a_stream_failing_midway_ends_in_each_apis_error_only(
    claude: Any, oai: Any, emulator: Emulator
) -> None:
    """What arrived before the failure is sent; the ending is the API's error, never a
    successful ending (``message_stop``, ``finish_reason``, ``[DONE]``, ``response.completed``)
    that would pass the cut answer off as whole."""
    said = [{"role": "user", "content": LONG}]
    emulator.push_fault("stream_error=overloaded;after=3", provider="openai")
    with (
        pytest.raises(anthropic.APIStatusError, match="overloaded"),
        claude.messages.stream(model="gpt", max_tokens=300, messages=said) as stream,
    ):
        stream.get_final_message()
    emulator.push_fault("stream_error=overloaded;after=3", provider="gemini")
    chunks: list[Any] = []
    with pytest.raises(openai.APIError, match="overloaded"):
        chunks.extend(oai.chat.completions.create(model="flash", messages=said, stream=True))
    assert not any(c.choices[0].finish_reason for c in chunks if c.choices)
    emulator.push_fault("stream_error=overloaded;after=3", provider="gemini")
    with oai.responses.stream(model="flash", input=LONG) as stream:
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.failed" and "response.completed" not in kinds
    emulator.push_fault("stream_error=overloaded;after=3", provider="gemini")  # a route's
    with oai.responses.stream(model="fallback", input=LONG) as stream:  # first model: Gemini
        kinds = [event.type for event in stream]
    assert kinds[-1] == "response.failed" and "response.completed" not in kinds


def test_the_async_clients_helpers_answered_by_other_families(url: str) -> None:
    """``AsyncOpenAI``'s ``chat.completions.stream`` with a pydantic tool (Claude answers) and
    ``responses.parse`` with one (Gemini), and ``AsyncAnthropic``'s ``messages.stream`` with a
    tool (gpt-5), as an asyncio program uses them."""
    tool = openai.pydantic_function_tool(GetWeather, name="get_weather")
    said: Any = [{"role": "user", "content": "Weather in Rome?"}]

    async def run() -> tuple[Any, Any, Any]:
        oai = openai.AsyncOpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
        claude = anthropic.AsyncAnthropic(api_key=GATEWAY_KEY, base_url=url, max_retries=0)
        async with oai, claude:
            async with oai.chat.completions.stream(
                model="sonnet", messages=said, tools=[tool]
            ) as stream:
                async for _ in stream:
                    pass
                chat = await stream.get_final_completion()
            parsed = await oai.responses.parse(
                model="flash", input="Weather in Rome?", tools=[tool]
            )
            weather = {"name": "get_weather", "input_schema": GetWeather.model_json_schema()}
            async with claude.messages.stream(
                model="gpt5", max_tokens=300, messages=said, tools=[weather]
            ) as streamed:
                message = await streamed.get_final_message()
        return chat, parsed, message

    chat, parsed, message = asyncio.run(run())
    call = chat.choices[0].message.tool_calls[0]
    assert call.function.parsed_arguments == GetWeather(city="Rome")
    (item,) = [i for i in parsed.output if i.type == "function_call"]
    assert item.parsed_arguments == GetWeather(city="Rome")
    assert message.stop_reason == "tool_use" and message.content[-1].input == {"city": "Rome"}
