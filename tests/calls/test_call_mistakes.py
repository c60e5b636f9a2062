"""A newcomer's mistakes in a one-line call: each a classified error (metis.errors) that says
what to do, raised before anything is sent; never a bare TypeError or pydantic error from deep
inside."""

from __future__ import annotations

import re
import socket
import sys
import typing
from typing import Any

import pydantic
import pytest

import metis
from metis.core.options import UnknownOptionError
from metis.errors import AuthError, ConfigError, InvalidRequestError, NetworkError
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18 C in {city}"


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"temperature": "hot"}, "temperature: expected a number >= 0, got str 'hot'"),
        ({"reasoning": "extreme"}, "reasoning.effort: Input should be 'none'"),
        ({"max_output_tokens": "many"}, "max_output_tokens: expected a whole number of tokens"),
        ({"system": 42}, "system: Input should be a valid string (got 42)"),
        ({"timeout_seconds": "soon"}, "timeout_seconds: expected a number of seconds > 0"),
        ({"max_retries": -1}, "max_retries: expected a number >= 0, got -1"),
        ({"stop_sequences": "END"}, "got str 'END'; give stop_sequences=['END']"),
        ({"reasoning": True}, "(got True): reasoning is an effort ('low', 'medium', 'high', "),
        ({"tool_choice": "required"}, "metis's is tool_choice=metis.ToolChoice.any()"),
        ({"tool_choice": "sometimes"}, "tool_choice is metis.ToolChoice.auto(), .any(), "),
        (
            {"cache": "off"},
            "(got 'off'): cache is a metis.CachePolicy (ttl=, conversation=, ...); ",
        ),
        (  # Anthropic's own form: what the option takes is said for a field inside it too
            {"thinking": {"type": "enabled", "budget_tokens": 2000}},
            "thinking.type: Extra inputs are not permitted (got 'enabled'): thinking is a "
            "metis.ThinkingConfig (effort= or budget_tokens=), an effort ('high') or a token "
            "budget (8000)",
        ),
    ],
)
def test_a_value_of_the_wrong_type_is_an_invalid_request_naming_the_option(
    at_emulator: Emulator, options: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        metis.complete(MODEL, "Hi", **options)
    assert said in str(caught.value)
    assert at_emulator.stats.requests == 0


@pytest.mark.parametrize(
    ("messages", "said"),
    [
        (42, "messages: expected a string, a Message, a message dict or a list of them, got int"),
        (b"Hi", "got bytes"),
        ([42], "messages[0]: expected a Message or a dict, got int"),
        (
            [metis.Message.user("Hi"), "And Rome?"],
            "messages[1]: expected a Message or a dict, got str; a user's text is "
            "metis.Message.user",
        ),
        (
            [[metis.Message.user("Hi")]],
            "messages[0]: expected a Message or a dict, got list; a list",
        ),
        (  # the reply itself appended to the history, in a tool loop written by hand
            [
                metis.Message.user("Hi"),
                metis.CanonicalResponse(
                    request_id="r",
                    model=MODEL,
                    provider="anthropic",
                    content=[metis.TextBlock(text="Hello")],
                    stop_reason=metis.StopReason(kind=metis.StopKind.END_TURN, raw="end_turn"),
                    usage=metis.TokenUsage(input_tokens=1, output_tokens=1),
                    latency_ms=1,
                ),
            ],
            "messages[1]: expected a Message or a dict, got CanonicalResponse; a reply goes "
            "into the history as its .message",
        ),
    ],
)
def test_messages_that_are_no_messages_are_an_invalid_request(
    at_emulator: Emulator, messages: Any, said: str
) -> None:
    with pytest.raises(InvalidRequestError, match=said.replace("[", r"\[").replace("]", r"\]")):
        metis.complete(MODEL, messages)
    assert at_emulator.stats.requests == 0


MISSPELT_MESSAGES: list[tuple[dict[str, Any], str]] = [
    (
        {"role": "user", "content": "Hi", "nmae": "x"},
        "messages[0]: unknown key 'nmae' (a message has role, content, id, cache)",
    ),
    (
        {"role": "user", "content": [{"type": "text", "txt": "Hi"}]},
        "messages[0].content[0]: unknown key 'txt'; did you mean 'text'?",
    ),
    (
        {
            "role": "user",
            "content": [
                {"type": "image", "source": {"type": "url", "url": "https://x/a.png", "ulr": 1}}
            ],
        },
        "messages[0].content[0].source: unknown key 'ulr'; did you mean 'url'?",
    ),
    (
        {"role": "user", "content": [{"type": "text", "text": "Hi", "cache": {"tll": "1h"}}]},
        "messages[0].content[0].cache: unknown key 'tll'; did you mean 'ttl'?",
    ),
]


@pytest.mark.parametrize(("message", "said"), MISSPELT_MESSAGES)
def test_a_misspelt_key_of_a_message_dict_at_any_depth_is_an_invalid_request_naming_it(
    at_emulator: Emulator, message: dict[str, Any], said: str
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        metis.complete(MODEL, [message])
    assert said in str(caught.value)
    with pytest.raises(InvalidRequestError) as in_a_session:
        metis.Session(MODEL).send(message)
    assert said in str(in_a_session.value)
    assert at_emulator.stats.requests == 0


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        (
            get_weather,
            "tools: expected a list of tools, got the function get_weather; give "
            "tools=[get_weather]",
        ),
        ("get_weather", "tools: expected a list of tools, got str 'get_weather'"),
        (
            ["get_weather"],
            "tools[0]: expected a @metis.tool function, a plain function, a "
            "ToolDefinition or a provider tool (metis.WebSearch, ...), got str 'get_weather'",
        ),
        ([{"name": "get_weather"}], "tools[0]: expected a @metis.tool function"),
        (  # a tool in a provider's form, as a user of its SDK writes it
            [{"type": "function", "function": {"name": "get_weather", "parameters": {}}}],
            "a list of a provider's tool dicts is read by metis.histories.from_openai_tools(tools)",
        ),
        ([print], "tool 'print': *args cannot be filled"),
    ],
)
def test_tools_not_given_as_a_list_of_tools_are_an_invalid_request(
    at_emulator: Emulator, tools: Any, said: str
) -> None:
    with pytest.raises((InvalidRequestError, ConfigError)) as caught:
        metis.complete(MODEL, "Weather in Paris?", tools=tools)
    assert said in str(caught.value)
    assert "arbitrary_types_allowed" not in str(caught.value)  # pydantic's advice, not ours
    assert at_emulator.stats.requests == 0


@pytest.mark.parametrize(
    ("tools", "said"),
    [
        (metis.tool(get_weather), "got the tool get_weather; give tools=[get_weather]"),
        (get_weather, "got the function get_weather; give tools=[get_weather]"),
        (["get_weather"], "tools[0]: expected a @metis.tool function"),
    ],
)
def test_a_sessions_tools_are_checked_when_given_not_at_its_first_turn(
    at_emulator: Emulator, tools: Any, said: str
) -> None:
    with pytest.raises(InvalidRequestError, match=re.escape(said)):
        metis.Session(MODEL, tools=tools)
    session = metis.Session(MODEL)
    with pytest.raises(InvalidRequestError, match=re.escape(said)):
        session.options = {"tools": tools}
    with pytest.raises(InvalidRequestError, match=re.escape(said)):
        metis.complete(MODEL, "Weather in Paris?", tools=tools)
    assert at_emulator.stats.requests == 0


def test_an_output_type_with_no_json_schema_is_a_config_error(at_emulator: Emulator) -> None:
    with pytest.raises(ConfigError, match=r"output_type socket\.socket has no JSON schema"):
        metis.complete(MODEL, "Hi", output_type=socket.socket)
    session = metis.Session(MODEL)
    with pytest.raises(ConfigError, match=r"output_type socket\.socket has no JSON schema"):
        session.run("Hi", output_type=socket.socket)
    assert at_emulator.stats.requests == 0


def test_output_type_and_output_schema_together_are_a_config_error(at_emulator: Emulator) -> None:
    """output_type's schema replaced the one given, silently: the reply followed another."""

    class City(pydantic.BaseModel):
        name: str

    other = {"type": "object", "properties": {"town": {"type": "string"}}}
    said = "give output_type or output_schema, not both"
    with pytest.raises(ConfigError, match=said):
        metis.complete(MODEL, "A city?", output_type=City, output_schema=other)
    with pytest.raises(ConfigError, match=said):
        metis.Session(MODEL).run("A city?", output_type=City, output_schema=other)
    assert at_emulator.stats.requests == 0
    session = metis.Session(MODEL, output_schema=other)  # the session's: the turn's type wins
    assert isinstance(session.run("A city?", output_type=City).output, City)


def test_a_type_given_as_output_schema_says_output_type_is_the_option_for_it(
    at_emulator: Emulator,
) -> None:
    class City(pydantic.BaseModel):
        name: str

    said = (
        "output_schema is a JSON schema (a dict, Model.model_json_schema()); a type is output_type="
    )
    with pytest.raises(InvalidRequestError, match=re.escape(said)):
        list(metis.stream(MODEL, "A city?", output_schema=City))
    with pytest.raises(InvalidRequestError, match=re.escape(said)):
        metis.complete(MODEL, "A city?", output_schema=City)
    assert at_emulator.stats.requests == 0
    reply = metis.complete(MODEL, "A city?", output_schema=City.model_json_schema())
    assert City.model_validate_json(reply.text)


@pytest.mark.parametrize(
    ("option", "setting"),
    [
        ("regoin", "region"),
        ("region", "region"),
        ("project", "project"),
        ("keep_alive", "keep_alive"),
    ],
)
def test_a_provider_setting_given_as_an_option_says_it_goes_in_settings(
    option: str, setting: str
) -> None:
    expected = f"did you mean settings={{{setting!r}: ...}}?"
    with pytest.raises(UnknownOptionError) as caught:
        metis.complete("bedrock:us.amazon.nova-micro-v1:0", "Hi", **{option: "x"})
    assert expected in str(caught.value)
    with pytest.raises(UnknownOptionError) as caught:
        metis.Session("bedrock:us.amazon.nova-micro-v1:0", **{option: "x"})  # type: ignore[call-overload]
    assert expected in str(caught.value)


def test_a_misspelt_call_option_still_names_the_option() -> None:
    with pytest.raises(UnknownOptionError, match="did you mean 'reasoning'"):
        metis.complete(MODEL, "Hi", resoning="high")  # type: ignore[call-overload]


@pytest.mark.parametrize("call", ["complete", "stream", "count_tokens"])
@pytest.mark.parametrize("option", ["prompt", "input", "contents", "message"])
def test_the_prompt_given_as_another_librarys_option_says_messages_is_the_second_argument(
    call: str, option: str
) -> None:
    """``metis.complete(model, prompt="...")`` was Python's 'missing 1 required positional
    argument: messages', not naming the option metis did not take."""
    with pytest.raises(UnknownOptionError) as caught:
        getattr(metis, call)(MODEL, **{option: "Hi"})
    said = str(caught.value)
    assert f"metis.{call}() got an unknown option {option!r}" in said
    assert "messages" in said and "second argument" in said
    with pytest.raises(UnknownOptionError, match="second argument"):
        metis.complete(MODEL, "Hi", **{option: "Hi"})  # with messages too: the same advice


@pytest.mark.anyio
async def test_an_async_call_without_messages_is_refused_by_metis_naming_them() -> None:
    with pytest.raises(UnknownOptionError, match="messages"):
        await metis.acomplete(MODEL, prompt="Hi")  # type: ignore[call-overload]
    with pytest.raises(UnknownOptionError, match="messages"):
        metis.astream(MODEL, prompt="Hi")  # type: ignore[call-arg]
    with pytest.raises(InvalidRequestError, match=r"no messages.*second argument"):
        await metis.acount_tokens(MODEL)  # type: ignore[call-arg]
    with pytest.raises(InvalidRequestError, match=r"metis.complete\(\) got no messages"):
        metis.complete(MODEL)  # type: ignore[call-overload]


def test_a_misspelt_model_refused_by_the_provider_notes_the_catalogs_nearest(
    at_emulator: Emulator,
) -> None:
    with pytest.raises(InvalidRequestError) as caught:
        metis.complete("anthropic:claude-sonet-4-5", "Hi")
    assert caught.value.provider_status == 404  # the provider's own "not found"
    [note] = caught.value.__notes__
    assert note.startswith(
        "metis: 'claude-sonet-4-5' is not in the model catalog for anthropic; the nearest it "
        "has: claude-sonnet-4-5, "
    )


def test_a_session_moved_to_a_misspelt_model_notes_the_catalogs_nearest_too(
    at_emulator: Emulator,
) -> None:
    session = metis.Session(MODEL)
    session.model = "anthropic:claude-sonet-4-5"
    with pytest.raises(InvalidRequestError) as caught:
        session.send("Hi")
    [note] = caught.value.__notes__
    assert "the nearest it has: claude-sonnet-4-5" in note


def test_no_catalog_guess_for_a_model_the_catalog_knows() -> None:
    from metis.calls.notes import unknown_model_note

    adapter = metis.build_adapter("anthropic", api_key="k")
    assert unknown_model_note(adapter, "anthropic:claude-sonnet-4-5") is None
    assert unknown_model_note(adapter, "anthropic:claude-sonet-4-5") is not None


def test_a_misspelt_run_option_names_runs_own_and_send_says_whose_it_is() -> None:
    session = metis.Session(MODEL)
    with pytest.raises(UnknownOptionError, match="did you mean 'max_steps'"):
        session.run("Hi", max_step=3)  # type: ignore[call-arg]
    with pytest.raises(UnknownOptionError, match=r"max_steps is an option of run\(\)"):
        session.send("Hi", max_steps=3)  # type: ignore[call-arg]


def test_a_refused_key_says_where_it_came_from(monkeypatch: pytest.MonkeyPatch) -> None:
    with Emulator(api_keys=["right-key"]) as emulator:
        monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
        monkeypatch.setenv("ANTHROPIC_API_KEY", "wrong-key")
        with pytest.raises(AuthError) as caught:
            metis.complete(MODEL, "Hi")
        assert caught.value.__notes__ == [
            "metis: the key sent was $ANTHROPIC_API_KEY's (or pass api_key=...)"
        ]
        with pytest.raises(AuthError) as caught:
            metis.Session(MODEL, api_key="also-wrong").send("Hi")
        assert caught.value.__notes__ == ["metis: the key sent was the call's api_key="]
        assert metis.complete(MODEL, "Hi", api_key="right-key").text


def test_a_refused_call_that_sent_no_key_says_which_variable_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A server's key is optional for openai_compatible: none is sent when its variable is unset,
    and a server that wants one is told so, not that the unset variable's key was wrong."""
    monkeypatch.delenv("OPENAI_COMPATIBLE_API_KEY", raising=False)
    with Emulator() as emulator, pytest.raises(AuthError) as caught:
        metis.complete("openai_compatible:gpt-4o", "Hi", base_url=f"{emulator.url}/v1")
    assert caught.value.__notes__ == [
        "metis: no key was sent: $OPENAI_COMPATIBLE_API_KEY is not set (or pass api_key=...)"
    ]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (
            {"provider_options": {"service_tier": "flex"}},
            "provider_options: the options for 'service_tier' must be a mapping, got 'flex'; "
            "provider_options is keyed by provider: "
            "provider_options={'openai': {'service_tier': 'flex'}}",
        ),
        ({"extra_headers": {"x-tag": "a"}}, "extra_headers: the options for 'x-tag'"),
        ({"extra_query": "a=1"}, "extra_query: expected a mapping of provider names"),
        (
            {"provider_options": {"antropic": {"service_tier": "auto"}}},
            "provider_options: 'antropic' names no provider; did you mean 'anthropic'",
        ),
        ({"extra_headers": {"opnai": {"x-tag": "a"}}}, "extra_headers: 'opnai' names no provider"),
    ],
)
def test_options_keyed_by_provider_given_unkeyed_say_the_form_they_take(
    at_emulator: Emulator, options: dict[str, Any], said: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        metis.complete(MODEL, "Hi", **options)
    assert said in str(caught.value)
    with pytest.raises(ConfigError, match=re.escape(said)):
        metis.Session(MODEL, **options).send("Hi")
    assert at_emulator.stats.requests == 0


def test_an_unreachable_server_says_which_variable_chose_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """$OPENAI_BASE_URL left pointing at an emulator that is gone: the NetworkError named only
    the address; it now says the variable chose it (not when the call gave base_url=)."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")  # nothing listens there
    with pytest.raises(NetworkError) as caught:
        metis.complete("openai:gpt-4o", "Hi", max_retries=0)
    assert caught.value.__notes__ == [
        "metis: the base URL http://127.0.0.1:9/v1 is $OPENAI_BASE_URL's (unset it for "
        "https://api.openai.com, or pass base_url=...)"
    ]
    with pytest.raises(NetworkError) as caught:
        metis.Session("openai:gpt-4o", max_retries=0).send("Hi")
    assert "$OPENAI_BASE_URL's" in caught.value.__notes__[0]
    with pytest.raises(NetworkError) as caught:
        metis.complete("openai:gpt-4o", "Hi", max_retries=0, base_url="http://127.0.0.1:9/v1")
    assert not hasattr(caught.value, "__notes__")


def test_two_tools_of_one_name_are_refused_and_one_tool_given_twice_is_sent_once(
    at_emulator: Emulator,
) -> None:
    """Anthropic answered 400 'Tool names must be unique' (others kept one of the two,
    unsaid); two different tools of one name are now refused before sending, naming it, and
    a list that holds one tool twice (two lists joined) sends it once."""

    def other_weather(city: str) -> str:
        """Weather from another service."""
        return city

    other = metis.tool(name="get_weather")(other_weather)
    for model in (MODEL, "openai:gpt-4o"):
        with pytest.raises(InvalidRequestError, match="two different tools are named"):
            metis.complete(model, "Weather in Paris?", tools=[get_weather, other], api_key="k")
    assert at_emulator.stats.requests == 0
    weather = metis.tool(get_weather)
    reply = metis.complete(MODEL, "Weather in Paris?", tools=[weather, weather, get_weather])
    assert reply.tool_calls
    assert [t["name"] for t in at_emulator.bodies("anthropic")[0]["tools"]] == ["get_weather"]


def test_an_input_over_the_window_is_a_context_overflow_as_in_a_session(
    at_emulator: Emulator,
) -> None:
    """A one-line call over the window was a CapabilityError (class capability) and a session's
    a ContextOverflowError: code that trims a history on ContextOverflowError missed the first.
    It is now both, class context_overflow, before anything is sent."""
    long = "word " * 300_000
    with pytest.raises(metis.ContextOverflowError) as caught:
        metis.complete(MODEL, long)
    assert isinstance(caught.value, metis.CapabilityError)  # as the README has said
    assert caught.value.error_class == "context_overflow"
    with pytest.raises(metis.ContextOverflowError):
        metis.Session(MODEL).send(long)
    assert at_emulator.stats.requests == 0
    with pytest.raises(metis.CapabilityError) as other:  # more than the window wrong: not it
        metis.complete("anthropic:claude-sonnet-4-5", long, max_output_tokens=10**7)
    assert not isinstance(other.value, metis.ContextOverflowError)


class Movie(typing.TypedDict):
    title: str


def rate(movie: Movie) -> str:
    """Rate a movie."""
    return movie["title"]


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="pydantic reads typing.TypedDict there")
def test_a_typing_typed_dict_before_python_3_12_says_to_take_typing_extensions(
    at_emulator: Emulator,
) -> None:
    """The error said 'use ... a TypedDict' to a user who had given one (typing's, which
    pydantic refuses before Python 3.12), for an output_type and a tool's parameter alike."""
    said = "from typing_extensions import TypedDict"
    with pytest.raises(ConfigError, match=said):
        metis.complete(MODEL, "Hi", output_type=Movie)
    with pytest.raises(ConfigError, match=said):
        metis.tool(rate)
    assert at_emulator.stats.requests == 0


@pytest.mark.parametrize("choice", [metis.ToolChoice.any(), metis.ToolChoice.tool("get_weather")])
def test_a_tool_forced_with_no_tools_given_is_refused(
    at_emulator: Emulator, choice: metis.ToolChoice
) -> None:
    """tool_choice forcing a call with tools= forgotten was left out without a word: the
    model answered in text, and the application waited for a call that never came."""
    with pytest.raises(InvalidRequestError, match="no tools were given; pass tools="):
        metis.complete(MODEL, "Weather in Paris?", tool_choice=choice)
    session = metis.Session(MODEL, tool_choice=choice)
    with pytest.raises(InvalidRequestError, match="no tools were given"):
        session.send("Weather in Paris?")
    assert at_emulator.stats.requests == 0
    reply = metis.complete(MODEL, "Hi", tool_choice=metis.ToolChoice.none())  # nothing forced
    assert reply.text
