"""What a team moving from LiteLLM writes first, and what metis answers: each habit either
works or is refused before anything is sent, with an error naming what metis takes instead."""

from __future__ import annotations

import dataclasses
import gc
import warnings
from typing import Any

import pydantic
import pytest
from pydantic import BaseModel

import metis
from metis.core.options import UnknownOptionError
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"


class City(BaseModel):
    name: str
    population: int


@dataclasses.dataclass
class Point:
    x: int


OPENAI_FORMAT = {
    "type": "json_schema",
    "json_schema": {"name": "city", "schema": City.model_json_schema()},
}


@pytest.mark.parametrize("option", ["response_format", "response_model", "result_type"])
def test_a_type_given_as_another_librarys_structured_output_option_names_output_type(
    option: str,
) -> None:
    """``completion(..., response_format=City)`` ported as it was said 'did you mean
    output_schema', which refuses a type; ``response_model=`` listed every option but the one."""
    said = r"did you mean 'output_type'\? \(output_type=City"
    with pytest.raises(UnknownOptionError, match=said):
        metis.complete(MODEL, "Hi", **{option: City})  # type: ignore[call-overload]
    with pytest.raises(UnknownOptionError, match="did you mean 'output_type'"):
        metis.Session(MODEL).run("Hi", **{option: City})  # type: ignore[call-overload]


@pytest.mark.parametrize(
    ("value", "schema"),
    [(City, "City.model_json_schema()"), (Point, "pydantic.TypeAdapter(Point).json_schema()")],
)
def test_a_type_given_where_only_output_schema_is_taken_says_how_to_give_its_schema(
    value: type, schema: str
) -> None:
    for call in (metis.stream, metis.count_tokens):
        with pytest.raises(UnknownOptionError) as caught:
            call(MODEL, "Hi", response_format=value)  # type: ignore[call-arg]
        assert f"here give its JSON schema: output_schema={schema}" in str(caught.value)
        assert "output_type=, which complete(), acomplete() and Session.run() take" in str(
            caught.value
        )


@pytest.mark.parametrize("value", [OPENAI_FORMAT, {"type": "json_object"}])
def test_openais_response_format_dict_says_output_schema_takes_the_schema_inside(
    value: dict[str, Any],
) -> None:
    for call in (metis.complete, metis.stream):
        with pytest.raises(UnknownOptionError) as caught:
            call(MODEL, "Hi", response_format=value)  # type: ignore[call-overload]
        said = str(caught.value)
        assert "did you mean 'output_schema'? It takes the JSON schema itself" in said
        assert "response_format['json_schema']['schema']" in said


def test_another_value_of_response_format_still_names_the_nearest() -> None:
    with pytest.raises(UnknownOptionError, match=r"did you mean 'output_schema'\?$"):
        metis.complete(MODEL, "Hi", response_format={"type": "text"})  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "value",
    [OPENAI_FORMAT, {"type": "json_object"}, {"type": "json_schema", "schema": {}}],
    ids=["openai", "json_mode", "anthropic"],
)
def test_an_apis_response_format_given_as_output_schema_is_refused_naming_the_schema_inside(
    value: dict[str, Any],
) -> None:
    """It was sent as the schema itself: no reply was held to it (the emulator's was a bare
    string), and nothing said so."""
    said = r"output_schema: .*is an API's response format, not a JSON schema"
    with pytest.raises(metis.InvalidRequestError, match=said):
        metis.complete(MODEL, "Hi", output_schema=value, api_key="k")
    with pytest.raises(metis.InvalidRequestError, match=said):
        metis.Session(MODEL, output_schema=value, api_key="k").send("Hi")
    with pytest.raises(pydantic.ValidationError, match="response_format"):
        metis.CanonicalRequest(model=MODEL, messages=[], max_output_tokens=1, output_schema=value)
    assert (
        metis.CanonicalRequest(
            model=MODEL, messages=[], max_output_tokens=1, output_schema=City.model_json_schema()
        ).output_schema
        == City.model_json_schema()
    )


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18 C in {city}"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


@pytest.mark.usefixtures("at_emulator")
def test_a_streamed_tool_loop_continues_from_the_streams_last_event() -> None:
    """LiteLLM's streaming loop ported: the stream's ``message.complete`` was refused by
    ``run_tools`` ('expected a CanonicalResponse or an assistant Message'), and had no
    ``.message`` to append, so a streamed agent had to fold its own reply."""
    history: list[Any] = [{"role": "user", "content": "What's the weather in Paris?"}]
    printed: list[str] = []
    for _ in range(2):
        final = None
        for event in metis.stream(MODEL, history, tools=[get_weather]):
            if isinstance(event, metis.TextDelta):
                printed.append(event.text)
            elif isinstance(event, metis.MessageComplete):
                final = event
        assert final is not None
        history.append(final.message)
        if not final.tool_calls:
            break
        assert [c.input for c in final.tool_calls] == [{"city": "Paris"}]
        history.append(metis.run_tools(final, [get_weather]))
    assert final.text == "".join(printed) and "18 C in Paris" in final.text
    assert [m.role for m in history[1:]] == ["assistant", "tool", "assistant"]


def test_a_cancelled_streams_message_keeps_its_text_not_its_unfinished_tool_calls() -> None:
    call = metis.ToolUseBlock(id="tu_1", name="get_weather", input={})
    final = metis.MessageComplete(
        final_content=[metis.TextBlock(text="Let me look"), call],
        stop_reason=metis.StopReason(kind=metis.StopKind.CANCELLED, raw="cancelled"),
        usage=metis.TokenUsage(input_tokens=1, output_tokens=1),
    )
    assert final.message.content == [metis.TextBlock(text="Let me look")]
    assert final.tool_calls == [call] and final.text == "Let me look"
    assert metis.run_tools(final, [get_weather]).content == []


UNREAD = "dropped before it was read: its call was never sent"


def test_a_stream_dropped_unread_warns_that_nothing_was_sent() -> None:
    """``session.stream("first")`` never iterated, then ``session.send("second")``: the first
    turn never happened, and nothing said so (a coroutine never awaited warns as much)."""
    session = metis.Session(MODEL, api_key="k")
    with pytest.warns(RuntimeWarning, match=UNREAD):
        session.stream("first")
        gc.collect()
    assert session.messages == []
    with pytest.warns(RuntimeWarning, match=UNREAD):
        metis.stream(MODEL, "Hi", api_key="k")
        gc.collect()


@pytest.mark.anyio
async def test_an_async_stream_dropped_unread_warns_and_a_closed_one_does_not() -> None:
    with pytest.warns(RuntimeWarning, match=UNREAD):
        metis.astream(MODEL, "Hi", api_key="k")
        gc.collect()
    with pytest.warns(RuntimeWarning, match=UNREAD):
        metis.Session(MODEL, api_key="k").astream("Hi")
        gc.collect()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        async with metis.astream(MODEL, "Hi", api_key="k"):
            pass  # closed unread: the caller chose to end it
        gc.collect()


@pytest.mark.usefixtures("at_emulator")
def test_a_stream_read_to_its_end_or_closed_does_not_warn() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert list(metis.stream(MODEL, "Hi"))
        with metis.stream(MODEL, "Hi"):
            pass
        gc.collect()


def test_a_null_content_as_openai_chat_writes_it_names_the_reader_of_that_form() -> None:
    """``{"role": "assistant", "content": None}``, as LiteLLM's and OpenAI's replies write an
    assistant turn, was refused without saying which reader takes it."""
    messages: list[Any] = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None},
        {"role": "user", "content": "b"},
    ]
    said = r"messages\[1\]\.content: expected .* got NoneType None; .*from_openai_chat"
    with pytest.raises(metis.InvalidRequestError, match=said):
        metis.complete(MODEL, messages, api_key="k")
    assert [m.role for m in metis.histories.from_openai_chat(messages)] == [
        "user",
        "assistant",
        "user",
    ]


@pytest.mark.parametrize(
    ("option", "said"),
    [
        ("user", "provider_options={'openai': {'user': ...}}, sent to that provider only"),
        ("metadata", "provider_options={'openai': {'metadata': ...}}"),
        ("extra_body", "did you mean 'provider_options'?"),
        ("fallbacks", "a metis.routing.Router of models stands where the model goes"),
        ("custom_llm_provider", "the provider is the model string's stack"),
        ("stream_options", "usage included"),
    ],
)
def test_litellms_other_options_say_where_their_value_goes(option: str, said: str) -> None:
    """``extra_body=`` was told 'did you mean extra_query' (a URL's query, not the body), and
    ``stream_options=`` 'provider_options'; a provider's own field (``user=``) got the list of
    options and no word of provider_options, which carries it."""
    for call in (metis.complete, metis.stream):
        with pytest.raises(UnknownOptionError) as caught:
            call(MODEL, "Hi", **{option: "x"})  # type: ignore[call-overload]
        assert said in str(caught.value)
