"""Tools from functions and pydantic models, running a reply's tool calls, structured output."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Annotated, Literal

import anyio
import pytest
from pydantic import BaseModel, Field, field_validator

import metis
from metis.errors import OutputValidationError
from metis.model import (
    CanonicalResponse,
    Message,
    Role,
    StopKind,
    StopReason,
    TextBlock,
    TokenUsage,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.testing.emulator import Emulator
from metis.tools import Tool, arun_tools, run_tools, tool


@tool
def get_weather(
    city: str, unit: Literal["c", "f"] = "c", days: Annotated[int, Field(ge=1)] = 1
) -> str:
    """Current weather for a city.

    More text that is not the summary.

    Args:
        city: The city's name,
            e.g. "Paris".
        unit: Celsius or Fahrenheit.
    """
    return f"{days} day(s) of 18 {unit} in {city}"


@tool(name="lookup")
async def async_lookup(key: str) -> dict[str, int]:
    """Find a key."""
    return {key: len(key)}


def broken(x: int) -> str:
    """Always fails."""
    raise RuntimeError("the backend is down")


class City(BaseModel):
    """A city and how many people live there."""

    name: str
    population: int


def reply_with(*calls: ToolUseBlock) -> CanonicalResponse:
    return CanonicalResponse(
        request_id="r",
        model="anthropic:x",
        provider="anthropic",
        content=[TextBlock(text="Let me check."), *calls],
        stop_reason=StopReason(kind=StopKind.TOOL_USE),
        usage=TokenUsage(),
        latency_ms=1,
    )


def call(name: str, tool_id: str = "tu_1", /, **args: object) -> ToolUseBlock:
    return ToolUseBlock(id=tool_id, name=name, input=dict(args))


def test_a_functions_signature_and_docstring_make_its_definition() -> None:
    definition = get_weather.definition
    assert definition.name == "get_weather"
    assert definition.description == "Current weather for a city."
    schema = definition.input_schema
    assert schema["required"] == ["city"]
    assert schema["properties"]["city"] == {
        "type": "string",
        "description": 'The city\'s name, e.g. "Paris".',
    }
    assert schema["properties"]["unit"]["enum"] == ["c", "f"]
    assert schema["properties"]["days"]["minimum"] == 1
    assert "title" not in schema and "title" not in schema["properties"]["city"]
    assert get_weather("Rome") == "1 day(s) of 18 c in Rome"  # still callable as itself
    assert async_lookup.name == "lookup"


def test_a_pydantic_model_is_a_tool_whose_answer_is_the_validated_instance() -> None:
    city = Tool.from_model(City)
    assert city.name == "city" and city.definition.description.startswith("A city")
    assert city.definition.input_schema["required"] == ["name", "population"]
    results = run_tools(reply_with(call("city", name="Lyon", population=500_000)), [city])
    (block,) = results.content
    assert isinstance(block, ToolResultBlock) and not block.is_error
    assert City.model_validate_json(block.text) == City(name="Lyon", population=500_000)


def test_run_tools_answers_every_call_in_order_and_errors_become_is_error_results() -> None:
    reply = reply_with(
        call("get_weather", "tu_1", city="Paris", days=2),
        call("get_weather", "tu_2", days=0),  # no city, days below 1
        call("broken", "tu_3", x=1),
        call("nope", "tu_4"),
    )
    message = run_tools(reply, [get_weather, broken])
    assert message.role is Role.TOOL
    blocks = [b for b in message.content if isinstance(b, ToolResultBlock)]
    assert [b.tool_use_id for b in blocks] == ["tu_1", "tu_2", "tu_3", "tu_4"]
    assert blocks[0].text == "2 day(s) of 18 c in Paris" and not blocks[0].is_error
    assert blocks[1].is_error and "city" in blocks[1].text and "days" in blocks[1].text
    assert blocks[2].is_error and blocks[2].text == "RuntimeError: the backend is down"
    assert blocks[3].is_error and "no tool named 'nope'" in blocks[3].text


@pytest.mark.anyio
async def test_arun_tools_awaits_async_tools_and_runs_plain_ones_in_a_thread() -> None:
    reply = reply_with(call("lookup", "tu_1", key="abc"), call("get_weather", "tu_2", city="Oslo"))
    message = await arun_tools(reply, [async_lookup, get_weather])
    texts = [b.text for b in message.content if isinstance(b, ToolResultBlock)]
    assert texts == ['{"abc":3}', "1 day(s) of 18 c in Oslo"]


def test_a_reply_continues_the_conversation_in_one_line(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    model = "anthropic:claude-sonnet-4-5"
    history = [Message.user("What is the weather in Paris?")]
    reply = metis.complete(model, history, tools=[get_weather])
    assert reply.tool_calls and reply.message.role is Role.ASSISTANT
    history += [reply.message, run_tools(reply, [get_weather])]
    final = metis.complete(model, history, tools=[get_weather])
    assert final.stop_reason.kind == "end_turn" and final.text


def test_output_type_returns_a_validated_instance(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_BASE_URL", emulator.url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    city = metis.complete("openai:gpt-4o", "Name a big city.", output_type=City)
    assert isinstance(city, City) and city.name and isinstance(city.population, int)


def test_a_reply_that_does_not_validate_is_a_classified_error_with_the_reply(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Strict(BaseModel):
        code: str

        @field_validator("code")
        @classmethod
        def _never(cls, value: str) -> str:  # what the schema cannot say, the reply breaks
            raise ValueError("no code is ever right")

    monkeypatch.setenv("OPENAI_BASE_URL", emulator.url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    with pytest.raises(OutputValidationError) as caught:
        metis.complete("openai:gpt-4o", "Give me a code.", output_type=Strict)
    assert caught.value.partial_response is not None
    assert caught.value.raw_text == caught.value.partial_response.text
    assert "code" in str(caught.value)
    said = str(caught.value)
    assert "Strict: code:" in said and "TypeAdapter" not in said  # as TypeAdapter(...Strict)


@pytest.mark.parametrize("kind", [StopKind.CANCELLED, StopKind.ERROR])
def test_a_reply_cut_short_in_a_tool_call_continues_without_the_unfinished_call(
    kind: StopKind,
) -> None:
    cut = reply_with(call("get_weather", "tu_1", city="Par")).model_copy(
        update={"stop_reason": StopReason(kind=kind)}
    )
    assert cut.tool_calls  # still visible on the reply itself
    assert [b.type for b in cut.message.content] == ["text"]  # not in the next history
    whole = reply_with(call("get_weather", "tu_1", city="Paris"))
    assert [b.type for b in whole.message.content] == ["text", "tool_use"]


class Address(BaseModel):
    city: str
    postcode: int


class Resident(BaseModel):
    name: str
    home: Address
    previous: list[Address]


def test_output_type_with_nested_models_validates_through_refs(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pydantic writes nested models as $defs and $ref; the emulator answers the schema."""
    monkeypatch.setenv("OPENAI_BASE_URL", emulator.url)
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    assert "$defs" in Resident.model_json_schema()
    found = metis.complete("openai:gpt-4o", "Alice lives in Paris 75001.", output_type=Resident)
    assert isinstance(found, Resident) and isinstance(found.home, Address)
    assert found.home.city == "Paris" and found.home.postcode == 75001


@pytest.mark.anyio
async def test_a_tool_that_outlasts_its_timeout_is_answered_as_an_error_the_others_kept() -> None:
    never = anyio.Event()
    released = threading.Event()

    @tool
    async def wait_forever(key: str) -> str:
        """Waits for an event nobody sets."""
        await never.wait()
        return "unreachable"

    @tool
    def block_thread(key: str) -> str:
        """Blocks its worker thread until the test ends."""
        released.wait()
        return "too late"

    reply = reply_with(
        call("wait_forever", "tu_1", key="a"),
        call("lookup", "tu_2", key="abc"),
        call("block_thread", "tu_3", key="b"),
    )
    try:
        with anyio.fail_after(30):  # a guard: without the timeout this would never end
            message = await arun_tools(
                reply, [wait_forever, async_lookup, block_thread], timeout_seconds=0.05
            )
    finally:
        released.set()
    blocks = [b for b in message.content if isinstance(b, ToolResultBlock)]
    assert [b.is_error for b in blocks] == [True, False, True]
    assert blocks[0].text == "wait_forever did not finish within 0.05 s"
    assert blocks[1].text == '{"abc":3}'
    assert blocks[2].text == "block_thread did not finish within 0.05 s"


@pytest.mark.anyio
async def test_a_call_whose_arguments_did_not_parse_is_answered_as_an_error_never_run() -> None:
    ran: list[str] = []

    @tool
    def record(city: str) -> str:
        """Records the city."""
        ran.append(city)
        return city

    bad = ToolUseBlock(id="tu_1", name="record", input={"city": "Par"}, input_error="cut off")
    reply = reply_with(bad)
    for message in (run_tools(reply, [record]), await arun_tools(reply, [record])):
        (block,) = message.content
        assert isinstance(block, ToolResultBlock) and block.is_error
        assert block.text == "record was not run: cut off"
    assert ran == []


# Results that cannot be made text, exceptions that cannot be printed ------------------------


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no message for you")


class NoStr:
    def __str__(self) -> str:
        raise ValueError("no str for you")


def _circular_list() -> list[object]:
    items: list[object] = []
    items.append(items)
    return items


def _circular_dict() -> dict[str, object]:
    items: dict[str, object] = {}
    items["self"] = items
    return items


def _deep(levels: int = 5000) -> list[object]:
    outer: list[object] = []
    inner = outer
    for _ in range(levels):
        inner.append([])
        inner = inner[0]  # type: ignore[assignment]
    return outer


class Looped(BaseModel):
    items: list[object]


UNTEXTABLE = [
    pytest.param(_circular_list, "Circular reference", id="circular list"),
    pytest.param(_circular_dict, "Circular reference", id="circular dict"),
    pytest.param(lambda: b"\xff\xfe not utf-8", "utf-8", id="bytes that are not UTF-8"),
    pytest.param(lambda: {"text": "half \ud83d"}, "encode", id="a lone surrogate inside"),
    pytest.param(_deep, "depth", id="nested too deep"),
    pytest.param(lambda: {"when": NoStr()}, "no str for you", id="an object str() fails on"),
    pytest.param(lambda: Looped(items=_circular_list()), "Circular", id="a model with a loop"),
]


def _returning(make: Callable[[], object]) -> tuple[Tool, Tool]:
    """Two tools that return what ``make`` makes: a plain one and an async one."""

    def result() -> object:
        return make()

    async def async_result() -> object:
        return make()

    return Tool.from_function(result), Tool.from_function(async_result)


@pytest.mark.parametrize(("make", "says"), UNTEXTABLE)
def test_a_result_that_cannot_be_made_text_is_an_is_error_result(
    make: Callable[[], object], says: str
) -> None:
    plain, _ = _returning(make)
    (block,) = run_tools(reply_with(call("result")), [plain]).content
    assert isinstance(block, ToolResultBlock) and block.is_error
    assert block.text.startswith("the result of result could not be made text (")
    assert says in block.text
    block.text.encode("utf-8")  # sendable as it is


@pytest.mark.anyio
@pytest.mark.parametrize(("make", "says"), UNTEXTABLE)
async def test_arun_tools_makes_the_same_is_error_results(
    make: Callable[[], object], says: str
) -> None:
    plain, asynchronous = _returning(make)
    reply = reply_with(call("result", "tu_1"), call("async_result", "tu_2"))
    message = await arun_tools(reply, [plain, asynchronous])
    blocks = [b for b in message.content if isinstance(b, ToolResultBlock)]
    assert [b.tool_use_id for b in blocks] == ["tu_1", "tu_2"]
    assert all(b.is_error and says in b.text for b in blocks)


def raises_unprintable() -> str:
    """Fails with an exception whose message cannot be printed."""
    raise Unprintable()


def raises_surrogates() -> str:
    """Fails with a message holding a lone surrogate."""
    raise RuntimeError("half an emoji: \ud83d")


@pytest.mark.anyio
async def test_an_exception_that_cannot_be_printed_is_an_is_error_result() -> None:
    reply = reply_with(call("raises_unprintable", "tu_1"), call("raises_surrogates", "tu_2"))
    tools = [raises_unprintable, raises_surrogates]
    for message in (run_tools(reply, tools), await arun_tools(reply, tools)):
        first, second = (b for b in message.content if isinstance(b, ToolResultBlock))
        assert first.is_error and first.text == "Unprintable: <its message could not be printed>"
        assert second.is_error and second.text == "RuntimeError: half an emoji: \ufffd"


def test_a_string_result_with_a_lone_surrogate_keeps_its_text() -> None:
    def half() -> str:
        return "half an emoji: \ud83d"

    (block,) = run_tools(reply_with(call("half")), [half]).content
    assert isinstance(block, ToolResultBlock) and not block.is_error
    assert block.text == "half an emoji: \ufffd"


PNG = bytes.fromhex("89504e470d0a1a0a0000000d49484452") + bytes(16)


@tool
def chart(city: str) -> metis.ImageBlock:
    """A chart of the city's weather."""
    return metis.ImageBlock.from_bytes(PNG, "image/png")


@tool
async def captioned_chart(city: str) -> list[str | metis.ImageBlock]:
    """A chart of the city's weather, with its caption."""
    return [f"{city}, this week:", metis.ImageBlock.from_bytes(PNG, "image/png")]


def test_a_tool_that_returns_an_image_answers_with_the_image_not_its_base64_as_text() -> None:
    (block,) = run_tools(reply_with(call("chart", city="Oslo")), [chart]).content
    assert isinstance(block, ToolResultBlock) and not block.is_error
    assert isinstance(block.content, list) and [part.type for part in block.content] == ["image"]

    def said() -> TextBlock:
        return TextBlock(text="18 C")

    (block,) = run_tools(reply_with(call("said")), [said]).content  # a text block is its text
    assert isinstance(block, ToolResultBlock) and block.text == "18 C"


@pytest.mark.anyio
async def test_an_image_and_text_a_tool_returns_go_to_each_provider_as_the_result(
    emulator: Emulator,
) -> None:
    reply = reply_with(
        call("chart", "tu_1", city="Oslo"), call("captioned_chart", "tu_2", city="Oslo")
    )
    message = await arun_tools(reply, [chart, captioned_chart])
    first, second = (b for b in message.content if isinstance(b, ToolResultBlock))
    assert isinstance(first.content, list) and isinstance(second.content, list)
    assert [part.type for part in second.content] == ["text", "image"]
    assert second.text == "Oslo, this week:" and "iVBOR" not in first.text
    for model in ("anthropic:claude-sonnet-4-5", "openai:gpt-4o"):  # each wire's own way
        stack = model.split(":")[0]
        async with metis.build_adapter(
            stack, api_key="k", base_url=emulator.base_url(stack)
        ) as adapter:
            request = metis.CanonicalRequest(
                model=model,
                messages=[Message.user("Weather charts for Oslo?"), reply.message, message],
                tools=[chart.definition, captioned_chart.definition],
                max_output_tokens=64,
            )
            assert (await adapter.complete(request)).text


class _Doubler:
    def __call__(self, x: int) -> int:
        return 2 * x


def _weather(city: str, unit: str) -> str:
    """Current weather for a city."""
    return f"18 {unit} in {city}"


@pytest.mark.parametrize(
    ("function", "says"),
    [
        (lambda city: city, "named '<lambda>' needs a name a provider takes"),
        (_Doubler(), "_Doubler with no __name__ needs a name"),
    ],
    ids=["lambda", "callable object"],
)
def test_a_tool_without_a_name_a_provider_takes_says_to_give_one(
    function: Callable[..., object], says: str
) -> None:
    """A lambda was a tool named '<lambda>' (every provider refused it at the first call) and a
    callable object an AttributeError ('no attribute __name__')."""
    with pytest.raises(metis.ConfigError, match=says) as caught:
        tool(function)
    assert "metis.tool(name='get_weather')" in str(caught.value)
    assert tool(name="zero")(lambda city: city).definition.name == "zero"


def test_a_partial_is_a_tool_named_after_its_function() -> None:
    """``functools.partial`` was an AttributeError; its bound arguments are defaults."""
    import functools

    made = tool(functools.partial(_weather, unit="C"))
    assert made.definition.name == "_weather"
    assert made.definition.input_schema["required"] == ["city"]
    assert made(city="Oslo") == "18 C in Oslo"


def test_a_tool_of_star_args_is_a_config_error() -> None:
    """``*args`` made the input schema an array, which no provider takes as a tool's input."""

    def total(*numbers: int) -> int:
        return sum(numbers)

    with pytest.raises(metis.ConfigError, match=r"tool 'total': \*numbers cannot be filled"):
        tool(total)


def test_a_tool_that_raises_is_logged_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    """The model was told and the application nothing: a bug in a tool showed only in the
    model's words. Arguments the model got wrong are the model's to fix, and not logged."""
    import logging

    def lookup(key: str) -> str:
        raise KeyError(key)

    reply = reply_with(call("lookup", "tu_1", key="a"), call("lookup", "tu_2", key=[3]))
    with caplog.at_level(logging.WARNING, logger="metis"):
        message = run_tools(reply, [lookup])
    assert [b.is_error for b in message.content if isinstance(b, ToolResultBlock)] == [True] * 2
    (record,) = [r for r in caplog.records if getattr(r, "event", "") == "metis.tool_failed"]
    assert record.tool == "lookup" and record.tool_use_id == "tu_1"  # type: ignore[attr-defined]
    said = record.getMessage()
    assert "tool 'lookup' raised KeyError" in said and ", in lookup\nKeyError: 'a'" in said


def test_a_method_is_a_tool_once_bound_not_in_its_class() -> None:
    """``@metis.tool`` on a method asked the model for ``self`` (a required parameter of no
    type), and the call then failed inside the method; it is a ConfigError saying to bind it."""

    class Weather:
        unit = "C"

        def get(self, city: str) -> str:
            """Current weather for a city."""
            return f"18 {self.unit} in {city}"

    with pytest.raises(metis.ConfigError, match=r"self cannot be filled .*metis\.tool\(obj\.get\)"):
        tool(Weather.get)
    bound = tool(Weather().get)
    assert list(bound.definition.input_schema["properties"]) == ["city"]
    assert bound(city="Oslo") == "18 C in Oslo"


def test_a_tool_naming_a_type_no_string_annotation_finds_is_a_config_error() -> None:
    """This module's annotations are strings (``from __future__ import annotations``): a type
    defined here, in the function, cannot be found from them; it was a bare NameError."""

    class Place(BaseModel):
        city: str

    def weather(place: Place) -> str:
        """Current weather for a place."""
        return place.city

    with pytest.raises(metis.ConfigError, match=r"'Place' is not defined.*define it at module"):
        tool(weather)
