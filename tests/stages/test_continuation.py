"""The continuation stage: previous_response_id and only the new items, when that is the
same conversation; the whole transcript otherwise. First the stage alone over a fake inner,
then whole conversations through the openai_responses adapter against the emulator in scripted
mode, which rebuilds each request's conversation from the responses it stored, so "the server
saw the same conversation" is checked, not assumed. Swaps to and from Anthropic and OpenAI
Chat are here too: their histories must be accepted by the Responses encoder."""

from __future__ import annotations

import contextlib
import json
import logging
import re
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from metis import AdapterConfig, build_adapter
from metis.adapter import Adapter
from metis.core.ids import derive_provider_tool_id
from metis.errors import AuthError, InvalidRequestError, ServerError, StackError
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    MessageStart,
    Role,
    StreamEvent,
    TextBlock,
    ThinkingConfig,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.response import StopKind, StopReason, TokenUsage
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stacks.loader import load_stack, parse_stack
from metis.stages.edits.continuation import Continuation
from metis.testing.emulator import Emulator, Reply, Script, text, thinking, tools

from ..helpers import lossy_warnings, make_call

pytestmark = [
    pytest.mark.backend_independent,
    pytest.mark.usefixtures("no_backoff"),
]  # stages and mock transports (tests/conftest.py)

PROVIDER, MODEL = "openai_responses", "openai_responses:gpt-5"


# The stage alone ---------------------------------------------------------------------------


def user(text_: str) -> dict[str, Any]:
    return {"type": "message", "role": "user", "content": [{"type": "input_text", "text": text_}]}


def said(text_: str) -> dict[str, Any]:
    """What TextBlock(text_) without provider_raw becomes as an input item."""
    return {"type": "message", "role": "assistant", "content": text_}


def wire(*items: dict[str, Any], store: bool = True) -> WireRequest:
    body = {"model": "gpt-5", "input": list(items), "store": store, "stream": True}
    return WireRequest(url="http://test/v1/responses", body=body, stream=True)


def reply(text_: str, resp_id: str, kind: StopKind = StopKind.END_TURN) -> list[StreamEvent]:
    return [
        MessageStart(resp_id, "gpt-5"),
        MessageComplete([TextBlock(text=text_)], StopReason(kind=kind), TokenUsage(), resp_id),
    ]


class Inner:
    """A fake inside: records each request, answers with the next scripted events; an
    exception in the script is raised (after the events before it)."""

    def __init__(self, *answers: list[Any] | BaseException) -> None:
        self.answers = list(answers)
        self.seen: list[WireRequest] = []

    async def __call__(self, request: WireRequest, call: Call) -> AsyncIterator[StreamEvent]:
        self.seen.append(request)
        answer = self.answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        for event in answer:
            if isinstance(event, BaseException):
                raise event
            yield event


async def run(
    stage: Continuation, request: WireRequest, inner: Inner, call: Call | None = None
) -> list[StreamEvent]:
    call = call or make_call(provider=PROVIDER, model=MODEL)
    return [event async for event in stage(request, call, inner)]


def gone() -> InvalidRequestError:
    return InvalidRequestError(
        "Previous response with id 'resp_1' not found.",
        provider_status=400,
        provider_code="previous_response_not_found",
        provider_message="Previous response with id 'resp_1' not found.",
    )


@pytest.mark.anyio
async def test_the_second_turn_sends_the_reply_id_and_only_the_new_items() -> None:
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), reply("Fine.", "resp_2"), reply("Bye.", "resp_3"))
    await run(stage, wire(user("Hello")), inner)
    await run(stage, wire(user("Hello"), said("Hi!"), user("How are you?")), inner)
    history = [user("Hello"), said("Hi!"), user("How are you?"), said("Fine."), user("Bye")]
    await run(stage, wire(*history), inner)
    first, second, third = (r.body for r in inner.seen)
    assert "previous_response_id" not in first
    assert second["previous_response_id"] == "resp_1" and second["input"] == [user("How are you?")]
    assert third["previous_response_id"] == "resp_2" and third["input"] == [user("Bye")]
    assert {k: v for k, v in second.items() if k not in ("input", "previous_response_id")} == {
        k: v for k, v in first.items() if k != "input"
    }


@pytest.mark.anyio
async def test_an_item_with_a_lone_surrogate_is_hashed_and_sent_on() -> None:
    """Hashing it was a bare UnicodeEncodeError, before the transport could refuse the request
    as the InvalidRequestError it is (as it does for a call of no session)."""
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), reply("Fine.", "resp_2"))
    await run(stage, wire(user("Hello \ud800")), inner)
    await run(stage, wire(user("Hello \ud800"), said("Hi!"), user("and \udfff")), inner)
    second = inner.seen[1].body
    assert second["previous_response_id"] == "resp_1" and second["input"] == [user("and \udfff")]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "next_input",
    [
        [user("Hello!"), said("Hi!"), user("more")],  # the user's turn was edited
        [user("Hello"), said("Hi there!"), user("more")],  # so was the reply
        [user("Hello"), user("more")],  # the reply was left out
        [user("Hello"), said("Hi!")],  # nothing new to send
        [user("more")],  # a new conversation in the same session
    ],
)
async def test_anything_but_the_covered_items_then_new_ones_goes_whole(
    next_input: list[dict[str, Any]],
) -> None:
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), reply("ok", "resp_2"))
    await run(stage, wire(user("Hello")), inner)
    await run(stage, wire(*next_input), inner)
    assert inner.seen[1].body["input"] == next_input
    assert "previous_response_id" not in inner.seen[1].body


@pytest.mark.anyio
async def test_no_session_no_store_or_disabled_means_the_whole_transcript() -> None:
    for stage, request, call in [
        (Continuation(), wire(user("a")), make_call(provider=PROVIDER, session_id=None)),
        (Continuation(), wire(user("a"), store=False), None),
        (Continuation(enabled=False), wire(user("a")), None),
    ]:
        inner = Inner(reply("b", "resp_1"), reply("c", "resp_2"))
        await run(stage, request, inner, call)
        follow = wire(user("a"), said("b"), user("c"), store=request.body["store"])
        await run(stage, follow, inner, call)
        assert "previous_response_id" not in inner.seen[1].body
        assert len(stage.memory) == 0


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failure",
    [
        [ServerError("boom", provider_status=500)],  # failed before any event
        [*reply("partial", "resp_x", StopKind.ERROR), ServerError("cut")],  # docs/contract.md §4
        reply("partial", "resp_x", StopKind.CANCELLED),  # cancelled
        [*reply("partial", "resp_x"), ServerError("late")],  # an error after the reply
    ],
    ids=["failed", "error_mid_stream", "cancelled", "error_after_reply"],
)
async def test_a_call_that_did_not_complete_never_advances_the_state(failure: list[Any]) -> None:
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), failure, reply("ok", "resp_2"))
    await run(stage, wire(user("Hello")), inner)
    second = wire(user("Hello"), said("Hi!"), user("again"))
    with contextlib.suppress(ServerError):
        await run(stage, second, inner)
    await run(
        stage, wire(user("Hello"), said("Hi!"), user("again"), said("partial"), user("?")), inner
    )
    # The partial reply was not stored as covered: the third call continues from resp_1.
    assert inner.seen[2].body["previous_response_id"] == "resp_1"
    assert inner.seen[2].body["input"] == [user("again"), said("partial"), user("?")]


@pytest.mark.anyio
async def test_a_caller_that_stops_reading_never_advances_the_state() -> None:
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), reply("ok", "resp_2"), reply("x", "resp_3"))
    await run(stage, wire(user("Hello")), inner)
    events = stage(
        wire(user("Hello"), said("Hi!"), user("more")),
        make_call(provider=PROVIDER, model=MODEL),
        inner,
    )
    await events.__anext__()
    await events.aclose()  # type: ignore[attr-defined]
    await run(stage, wire(user("Hello"), said("Hi!"), user("more"), said("ok"), user("z")), inner)
    assert inner.seen[2].body["previous_response_id"] == "resp_1"


@pytest.mark.anyio
async def test_a_caller_that_stops_once_the_reply_is_complete_still_advances_it() -> None:
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), reply("ok", "resp_2"))
    call = make_call(provider=PROVIDER, model=MODEL)
    events = stage(wire(user("Hello")), call, inner)
    async for event in events:
        if isinstance(event, MessageComplete):
            break
    await events.aclose()  # type: ignore[attr-defined]
    await run(stage, wire(user("Hello"), said("Hi!"), user("more")), inner)
    assert inner.seen[1].body["previous_response_id"] == "resp_1"


@pytest.mark.anyio
async def test_what_outer_stages_do_to_the_reply_afterwards_does_not_matter() -> None:
    """tool_ids gives the MessageComplete canonical ids after it left this stage; what is
    remembered is the content as the provider gave it."""
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), reply("ok", "resp_2"))
    async for event in stage(wire(user("Hello")), make_call(provider=PROVIDER, model=MODEL), inner):
        if isinstance(event, MessageComplete):
            event.final_content = [TextBlock(text="rewritten outside")]
    await run(stage, wire(user("Hello"), said("Hi!"), user("more")), inner)
    assert inner.seen[1].body["previous_response_id"] == "resp_1"


@pytest.mark.anyio
async def test_models_and_sessions_keep_their_own_state() -> None:
    stage = Continuation()
    inner = Inner(*(reply(f"r{i}", f"resp_{i}") for i in range(1, 7)))
    a = make_call(provider=PROVIDER, model="openai_responses:gpt-5")
    b = make_call(provider=PROVIDER, model="openai_responses:gpt-5-mini")
    other = make_call(provider=PROVIDER, model="openai_responses:gpt-5", session_id="s2")
    await run(stage, wire(user("q")), inner, a)
    await run(stage, wire(user("q"), said("r1"), user("q2")), inner, b)  # other model: whole
    await run(stage, wire(user("q"), said("r1"), user("q2")), inner, other)  # other session
    await run(stage, wire(user("q"), said("r1"), user("q2")), inner, a)
    bodies = [r.body for r in inner.seen]
    assert ["previous_response_id" in body for body in bodies] == [False, False, False, True]
    assert bodies[3]["previous_response_id"] == "resp_1"


@pytest.mark.anyio
async def test_memory_is_a_bounded_lru() -> None:
    stage = Continuation(max_entries=2)
    inner = Inner(*(reply("r", f"resp_{i}") for i in range(1, 6)))
    for session in ("s1", "s2", "s1", "s3"):  # s2 is the least recently used when s3 comes
        await run(
            stage, wire(user(session)), inner, make_call(provider=PROVIDER, session_id=session)
        )
    assert len(stage.memory) == 2
    await run(
        stage,
        wire(user("s2"), said("r"), user("x")),
        inner,
        make_call(provider=PROVIDER, session_id="s2"),
    )
    assert "previous_response_id" not in inner.seen[-1].body


@pytest.mark.anyio
async def test_a_reply_the_provider_no_longer_has_is_forgotten_and_the_call_sent_whole() -> None:
    stage = Continuation()
    inner = Inner(reply("Hi!", "resp_1"), gone(), reply("ok", "resp_2"), reply("x", "resp_3"))
    await run(stage, wire(user("Hello")), inner)
    events = await run(stage, wire(user("Hello"), said("Hi!"), user("more")), inner)
    assert [type(e) for e in events] == [MessageStart, MessageComplete]
    continued, whole = inner.seen[1].body, inner.seen[2].body
    assert continued["previous_response_id"] == "resp_1"
    assert "previous_response_id" not in whole and len(whole["input"]) == 3
    # and the reply to the whole request is what the next turn continues from
    await run(stage, wire(user("Hello"), said("Hi!"), user("more"), said("ok"), user("y")), inner)
    assert inner.seen[3].body["previous_response_id"] == "resp_2"


@pytest.mark.anyio
async def test_other_errors_of_a_continued_call_are_raised_as_they_are() -> None:
    stage = Continuation()
    other = InvalidRequestError("bad temperature", provider_status=400, provider_message="bad")
    inner = Inner(reply("Hi!", "resp_1"), other)
    await run(stage, wire(user("Hello")), inner)
    with pytest.raises(InvalidRequestError, match="bad temperature"):
        await run(stage, wire(user("Hello"), said("Hi!"), user("more")), inner)
    assert len(inner.seen) == 2


def test_the_codec_must_say_what_a_reply_becomes() -> None:
    with pytest.raises(StackError, match="output_items"):
        Continuation(codec="openai_chat")


# Whole conversations through the adapter ---------------------------------------------------

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
USERS = ["What's the weather in Paris?", "And tomorrow?", "Thanks!", "Bye.", "Really.", "!"]


def script() -> list[Reply]:
    return [
        thinking(
            "I should look it up.", tools(("get_weather", {"city": "Paris"}), say="Checking.")
        ),
        text("Sunny in Paris."),
        thinking("Forecast next.", text("Sunny tomorrow too.")),
        text("You're welcome."),
        text("Goodbye."),
    ]


class World:
    """The three providers (the emulator, one for Responses and one for the others),
    answering from one shared script, and their adapters."""

    def __init__(
        self, store: bool = True, continuation: bool = True, replies: list[Reply] | None = None
    ) -> None:
        self.script = Script(replies if replies is not None else script())
        self.responses = Emulator(model=self.script, models="any")
        others = Emulator(model=self.script, models="any")
        ids = InMemoryToolIdStore()
        stack = load_stack("openai_responses")
        if not store:
            data = stack.model_dump(exclude={"source"})
            data["stages"] = [
                {e["name"]: {**e["options"], "settings": {"store": False}}}
                if e["name"] == "encode"
                else {e["name"]: e["options"]}
                for e in data["stages"]
            ]
            stack = parse_stack(data)
        self.adapters: dict[str, Adapter] = {
            "responses": build_adapter(
                stack, self.config(self.responses.client()), tool_id_store=ids
            ),
            **{
                name: build_adapter(name, self.config(others.client()), tool_id_store=ids)
                for name in ("anthropic", "openai")
            },
        }
        if not continuation:
            self.adapters["responses"].pipeline.remove("continuation")
        self.history = [Message.user(USERS[0])]
        self.users = iter(USERS[1:])

    def sent(self) -> list[dict[str, Any]]:
        """The bodies the Responses server was sent."""
        return list(self.responses.bodies())

    def response_id(self, n: int) -> str:
        """The id of the n-th response the server stored (from 0)."""
        return list(self.responses.stored)[n]

    def contexts(self) -> list[Any]:
        """The conversation the Responses server rebuilt for each request it answered."""
        return [normalized(p.items) for p in self.script.prompts if p.provider == PROVIDER]

    @staticmethod
    def config(client: httpx.AsyncClient) -> AdapterConfig:
        return AdapterConfig(api_key="test-key", http_client=client, max_retries=2)

    async def turn(self, name: str, model: str = "m1", stream: bool = True) -> list[Any]:
        adapter = self.adapters[name]
        request = CanonicalRequest(
            model=f"{adapter.name}:{model}",
            session_id="session-1",
            system_prompt="Be brief.",
            messages=self.history,
            tools=[WEATHER],
            max_output_tokens=2048,  # Anthropic: more than the thinking budget
            thinking=ThinkingConfig(budget_tokens=1024) if name != "openai" else None,
            stream=stream,
        )
        if stream:
            final = [event async for event in adapter.stream(request)][-1]
            assert isinstance(final, MessageComplete)
            content = final.final_content
        else:
            content = (await adapter.complete(request)).content
        self.history = [*self.history, Message(role=Role.ASSISTANT, content=content)]
        calls = [b for b in content if isinstance(b, ToolUseBlock)]
        if calls:
            results = [ToolResultBlock(tool_use_id=c.id, content="sunny, 21C") for c in calls]
            self.history.append(Message.tool(*results))
        else:
            self.history.append(Message.user(next(self.users)))
        return content


@pytest.mark.anyio
@pytest.mark.parametrize("stream", [True, False], ids=["stream", "complete"])
async def test_a_three_turn_session_sends_only_new_items_on_turns_two_and_three(
    stream: bool,
) -> None:
    world = World()
    for _ in range(3):
        await world.turn("responses", stream=stream)
    first, second, third = world.sent()
    assert "previous_response_id" not in first and len(first["input"]) == 1
    assert second["previous_response_id"] == world.response_id(0)
    [call_id] = world.responses.call_ids()
    assert second["input"] == [
        {"type": "function_call_output", "call_id": call_id, "output": "sunny, 21C"}
    ]
    assert third["previous_response_id"] == world.response_id(1)
    assert third["input"] == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": USERS[1]}]}
    ]
    for body in (second, third):  # what previous_response_id does not carry is sent every time
        assert body["instructions"] == "Be brief." and body["tools"] == first["tools"]


@pytest.mark.anyio
async def test_the_server_sees_the_same_conversation_with_or_without_continuation() -> None:
    worlds = [World(continuation=True), World(continuation=False)]
    for world in worlds:
        for _ in range(4):
            await world.turn("responses")
    contexts = [w.contexts() for w in worlds]
    assert len(contexts[0]) == 4 and contexts[0] == contexts[1]
    assert ["previous_response_id" in b for b in worlds[0].sent()] == [
        False,
        True,
        True,
        True,
    ]
    assert sum(len(b["input"]) for b in worlds[0].sent()) < sum(
        len(b["input"]) for b in worlds[1].sent()
    )


@pytest.mark.anyio
async def test_with_store_false_every_turn_sends_the_whole_transcript() -> None:
    world = World(store=False)
    for _ in range(3):
        await world.turn("responses")
    assert all(b["store"] is False for b in world.sent())
    assert all("previous_response_id" not in b for b in world.sent())
    # Reasoning still went back, as encrypted content, and the server took it (it checks it).
    assert world.sent()[1]["input"][1]["encrypted_content"].startswith("gAAAAAB")
    assert world.responses.stored == {}


def swap_script() -> list[Reply]:
    return [
        thinking("Look it up.", tools(("get_weather", {"city": "Paris"}), say="Checking.")),
        thinking("The tool said sunny.", text("Sunny in Paris.")),  # Anthropic
        text("Tomorrow too."),
        text("You're welcome."),  # Anthropic
        text("Goodbye."),
    ]


@pytest.mark.anyio
async def test_a_swap_away_and_back_continues_from_the_last_reply_made_here(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Turns made elsewhere are new items after the last reply made here, so continuing from
    it is the same conversation: the server rebuilds exactly the whole transcript."""
    caplog.set_level(logging.WARNING, logger="metis")
    order = ["responses", "anthropic", "responses", "anthropic", "responses"]
    world = World(replies=swap_script())
    for name in order:
        await world.turn(name)
    _first, second, third = world.sent()
    assert second["previous_response_id"] == world.response_id(0)
    assert [i["type"] for i in second["input"]] == ["function_call_output", "message", "message"]
    assert second["input"][1]["content"] == "Sunny in Paris."  # Anthropic's turn
    assert third["previous_response_id"] == world.response_id(1)
    assert [i["role"] for i in third["input"]] == ["user", "assistant", "user"]
    assert third["input"][1]["content"] == "You're welcome."  # Anthropic's again
    # Anthropic's thinking is dropped each time it is sent to OpenAI, with one WARN in all.
    drops = [r.__dict__ for r in lossy_warnings(caplog)]
    assert [d["block_type"] for d in drops if d["adapter"] == PROVIDER] == ["thinking"]
    # and the server's view is the whole conversation, turn by turn
    whole = World(replies=swap_script(), continuation=False)
    for name in order:
        await whole.turn(name)
    assert len(world.contexts()) == 3 and world.contexts() == whole.contexts()


@pytest.mark.anyio
@pytest.mark.parametrize("elsewhere", ["anthropic", "openai"])
async def test_history_made_elsewhere_is_accepted_with_consistent_tool_ids(
    elsewhere: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    world = World()
    await world.turn(elsewhere)  # thinks (Anthropic only) and calls the tool
    await world.turn("responses")  # gets that history whole: nothing was made here yet
    await world.turn(elsewhere)
    await world.turn("responses")
    body = world.sent()[0]
    assert "previous_response_id" not in body
    call = next(i for i in body["input"] if i["type"] == "function_call")
    answer = next(i for i in body["input"] if i["type"] == "function_call_output")
    canonical = next(b for m in world.history for b in m.content if isinstance(b, ToolUseBlock))
    assert call["call_id"] == answer["call_id"] == derive_provider_tool_id(canonical.id, "call_")
    assert "id" not in call  # not an item OpenAI made
    assert all(i["type"] != "reasoning" for i in body["input"])
    # Anthropic's two thinking blocks: one drop of one kind, logged once in the session.
    drops = [r.__dict__ for r in lossy_warnings(caplog)]
    thinking = [d["block_type"] for d in drops if d["adapter"] == PROVIDER]
    assert thinking == (["thinking"] if elsewhere == "anthropic" else [])
    # The second Responses turn continues from the first reply made here.
    assert world.sent()[1]["previous_response_id"] == world.response_id(0)


@pytest.mark.anyio
async def test_a_retried_call_sends_the_same_continued_body_and_advances_once() -> None:
    world = World()
    await world.turn("responses")
    world.responses.push_fault("server_error")
    await world.turn("responses")
    await world.turn("responses")
    failed, retried, third = world.sent()[1:]
    assert failed == retried and retried["previous_response_id"] == world.response_id(0)
    assert [r.status for r in world.responses.requests] == [200, 500, 200, 200]
    assert third["previous_response_id"] == world.response_id(1)  # the attempt that answered


@pytest.mark.anyio
async def test_a_failed_call_leaves_the_state_where_it_was() -> None:
    world = World()
    await world.turn("responses")
    world.responses.push_fault("auth")  # a failure that is not retried
    with pytest.raises(AuthError):
        await world.turn("responses")
    await world.turn("responses")  # the caller tries again with the same history
    assert world.sent()[2]["previous_response_id"] == world.response_id(0)
    assert world.sent()[2]["input"] == world.sent()[1]["input"]


@pytest.mark.anyio
async def test_another_model_sends_the_whole_transcript() -> None:
    world = World()
    await world.turn("responses", model="gpt-5")
    await world.turn("responses", model="gpt-5-mini")
    await world.turn("responses", model="gpt-5")
    _first, other, back = world.sent()
    assert "previous_response_id" not in other
    # gpt-5-mini may not read gpt-5's reasoning: thinking_filter left it out
    assert [i["type"] for i in other["input"]].count("reasoning") == 0
    assert back["previous_response_id"] == world.response_id(0)


def normalized(items: list[Any]) -> list[Any]:
    """A conversation as the model reads it: without what only describes an item (``status``,
    ``logprobs``), arguments parsed, and every id (made per request, so different in two runs
    of one conversation) replaced by its order of appearance."""
    plain = [{"type": "message", **_described(item)} for item in items]
    dumped = json.dumps(plain)
    found = re.findall(r"\b(?:call|fc|rs|msg|tu)_[0-9A-Za-z]+", dumped)
    for n, made in enumerate(dict.fromkeys(found)):
        dumped = dumped.replace(made, f"id-{n}")
    return json.loads(dumped)  # type: ignore[no-any-return]


def _described(value: Any) -> Any:
    if isinstance(value, list):
        return [_described(v) for v in value]
    if not isinstance(value, dict):
        return value
    kept = {k: _described(v) for k, v in value.items() if k not in ("status", "logprobs")}
    if isinstance(kept.get("arguments"), str):
        kept["arguments"] = json.loads(kept["arguments"] or "{}")
    return kept
