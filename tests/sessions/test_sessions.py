"""Session turns: what the history keeps after a reply, a stream left early, a cancel (the
session's, or the caller's own cancel scope), a failure midway or before anything arrived;
one turn at a time; options checked as the one-line calls check theirs; the model swapped
between turns; the synchronous forms."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import metis
from metis.core.options import UnknownOptionError
from metis.errors import ConfigError, InvalidRequestError, NetworkError
from metis.model import MessageComplete, Role, StopKind, TextDelta
from metis.routing import Router
from metis.sessions import RunComplete, Session, SessionBusyError
from metis.testing.emulator import Emulator

from ..fakes import (
    DROP,
    STALL,
    FakePeer,
    Reply,
    anthropic_error,
    anthropic_start,
    anthropic_text,
    sse,
)
from ..session_helpers import MODELS, close_all, emulated

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

CLAUDE = "anthropic:claude-sonnet-4-5"


def stalled_reply(*pieces: str) -> Reply:
    """Text that arrives, then a stream that never goes on."""
    events = sse(anthropic_start(), *anthropic_text(*pieces)[:-1])  # the block never closes
    return Reply(chunks=[*events, STALL])


def dropped_reply(*pieces: str) -> Reply:
    events = sse(anthropic_start(), *anthropic_text(*pieces)[:-1])
    return Reply(chunks=[*events, DROP])


def on_peer(peer: FakePeer, **options: Any) -> Session:
    return Session(
        CLAUDE, adapters={"anthropic": peer.adapter("anthropic", max_retries=0)}, **options
    )


@pytest.mark.anyio
async def test_a_reply_is_appended_after_the_message_and_its_usage_counted(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(CLAUDE, adapters=adapters, system="Be brief.")
    reply = await session.asend("Hello there")
    assert reply.stop_reason.kind is StopKind.END_TURN and reply.provider == "anthropic"
    assert [m.role for m in session.messages] == [Role.USER, Role.ASSISTANT]
    assert session.messages[1].text == reply.text
    assert session.usage == reply.usage
    sent = emulator.requests[-1].json()
    assert sent["system"] and sent["messages"][0]["content"][0]["text"] == "Hello there"
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_streamed_turn_yields_the_events_and_appends_the_reply_when_it_ends(
    emulator: Emulator,
) -> None:
    adapters = emulated(emulator, stacks=["anthropic"])
    session = Session(CLAUDE, adapters=adapters)
    seen: list[str] = []
    async for event in session.astream("Count to three."):
        seen.append(event.type)
        if event.type == "message.start":
            assert [m.role for m in session.messages] == [Role.USER]  # the reply is not in yet
    assert seen[0] == "message.start" and seen[-1] == "message.complete"
    assert [m.role for m in session.messages] == [Role.USER, Role.ASSISTANT]
    await close_all(adapters)


@pytest.mark.anyio
async def test_a_stream_left_early_keeps_the_text_that_arrived() -> None:
    peer = FakePeer(stalled_reply("Hello", " there"))
    session = on_peer(peer)
    texts = 0
    async with session.astream("Hi") as events:
        async for event in events:
            texts += isinstance(event, TextDelta)
            if texts == 2:
                break
    assert [m.text for m in session.messages] == ["Hi", "Hello there"]
    assert peer.closed == 1  # the connection closed with the stream
    assert not session.busy


@pytest.mark.anyio
async def test_cancel_ends_the_reply_as_cancelled_with_the_text_that_arrived() -> None:
    peer = FakePeer(stalled_reply("Hello", " there"))
    session = on_peer(peer)
    assert not session.cancel()  # nothing in flight

    async def cancel_when_stalled() -> None:
        await peer.stalled.wait()
        assert session.cancel()

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_when_stalled)
        reply = await session.asend("Hi")
    assert reply.stop_reason.kind is StopKind.CANCELLED and reply.text == "Hello there"
    assert [m.text for m in session.messages] == ["Hi", "Hello there"]
    assert peer.closed == 1


@pytest.mark.anyio
async def test_cancel_from_another_thread_ends_the_turn() -> None:
    peer = FakePeer(stalled_reply("Hello"))
    session = on_peer(peer)

    async def cancel_from_a_thread() -> None:
        await peer.stalled.wait()
        assert await anyio.to_thread.run_sync(session.cancel)

    async with anyio.create_task_group() as group:
        group.start_soon(cancel_from_a_thread)
        events = [event async for event in session.astream("Hi")]
    final = events[-1]
    assert isinstance(final, MessageComplete) and final.stop_reason.kind is StopKind.CANCELLED
    assert session.messages[-1].text == "Hello"


@pytest.mark.anyio
async def test_the_callers_own_cancel_scope_keeps_what_arrived_and_propagates() -> None:
    peer = FakePeer(stalled_reply("Hello", " there"))
    session = on_peer(peer)
    with anyio.CancelScope() as scope:

        async def cancel_when_stalled() -> None:
            await peer.stalled.wait()
            scope.cancel()

        async with anyio.create_task_group() as group:
            group.start_soon(cancel_when_stalled)
            await session.asend("Hi")
    assert scope.cancelled_caught
    assert [m.text for m in session.messages] == ["Hi", "Hello there"]
    assert not session.busy


@pytest.mark.anyio
async def test_a_stream_that_breaks_midway_keeps_what_arrived_and_raises() -> None:
    session = on_peer(FakePeer(dropped_reply("Hello", " there")))
    with pytest.raises(NetworkError) as caught:
        await session.asend("Hi")
    assert caught.value.partial_response is not None
    assert caught.value.partial_response.text == "Hello there"
    assert [m.text for m in session.messages] == ["Hi", "Hello there"]


@pytest.mark.anyio
async def test_a_call_refused_before_anything_arrived_leaves_the_history_as_it_was() -> None:
    refused = anthropic_error(400, "invalid_request_error", "bad request")
    answered = Reply(chunks=sse(anthropic_start(), *anthropic_text("Fine."), *_end()))
    session = on_peer(FakePeer(refused, answered))
    with pytest.raises(InvalidRequestError):
        await session.asend("Hi")
    assert session.messages == []  # the turn can be sent again as it was
    reply = await session.asend("Hi")
    assert reply.text == "Fine." and [m.text for m in session.messages] == ["Hi", "Fine."]


def _end() -> list[dict[str, Any]]:
    from ..fakes import anthropic_end

    return anthropic_end()


@pytest.mark.anyio
async def test_one_turn_at_a_time() -> None:
    peer = FakePeer(stalled_reply("Hello"))
    session = on_peer(peer)
    stream = session.astream("Hi")
    await anext(stream)
    assert session.busy
    with pytest.raises(SessionBusyError, match="one turn at a time"):
        await session.asend("And?")
    with pytest.raises(SessionBusyError):
        session.add(metis.Message.user("And?"))
    with pytest.raises(SessionBusyError):
        session.to_json()
    await stream.aclose()  # before any text: the turn is taken back
    assert not session.busy and session.messages == []


def test_options_are_checked_as_the_one_line_calls_check_theirs() -> None:
    with pytest.raises(UnknownOptionError, match="did you mean 'max_output_tokens'"):
        Session(CLAUDE, max_tokens=10)  # type: ignore[call-arg]
    session = Session(CLAUDE, temperature=0.2)
    with pytest.raises(TypeError, match=r"Session.send\(\) got an unknown option 'stop'"):
        session.send("Hi", stop=["x"])  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"Session\(session_id=...\)"):
        session.send("Hi", session_id="other")  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="did you mean 'system'"):
        session.options = {"system_prompt": "Be brief."}
    assert session.options == {"temperature": 0.2}


@pytest.mark.parametrize(
    ("misspelt", "meant"), [("compat", "compact"), ("context_chek", "context_check")]
)
def test_a_misspelt_constructor_keyword_names_the_keyword(misspelt: str, meant: str) -> None:
    with pytest.raises(UnknownOptionError, match=f"did you mean '{meant}'"):
        Session(CLAUDE, **{misspelt: 1})  # type: ignore[arg-type]


def test_a_model_is_a_model_string_or_a_router() -> None:
    adapter = metis.build_adapter("anthropic", api_key="k")
    with pytest.raises(ConfigError, match="adapters="):
        Session(adapter)  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="'provider:model'"):
        Session("claude-sonnet-4-5")
    session = Session(CLAUDE)
    with pytest.raises(ConfigError):
        session.model = "gpt-4o"
    assert session.model == CLAUDE


@pytest.mark.anyio
async def test_nothing_to_send_is_an_invalid_request() -> None:
    with pytest.raises(InvalidRequestError, match="nothing to send"):
        await Session(CLAUDE).asend()


@pytest.mark.anyio
async def test_the_model_is_swapped_between_turns(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["anthropic", "openai", "gemini"])
    session = Session(CLAUDE, adapters=adapters)
    first = await session.asend("Hello")
    session.model = MODELS["openai"]
    second = await session.asend("And again?")
    session.model = MODELS["gemini"]
    third = await session.asend("Once more?")
    assert [first.provider, second.provider, third.provider] == ["anthropic", "openai", "gemini"]
    assert len(session.messages) == 6
    await close_all(adapters)


def test_the_synchronous_forms_run_where_no_loop_runs(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    session = Session(CLAUDE)  # the one-line calls' adapter, key and URL from the variables
    assert session.send("Hello").text
    kinds = [event.type for event in session.stream("Count to three.")]
    assert kinds[-1] == "message.complete"
    result = session.run("What's the weather in Paris?", tools=[_weather])
    assert result.reason == "complete" and result.steps == 2
    assert len(session.messages) == 8


def test_stream_run_yields_a_runs_events_where_no_loop_runs(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The synchronous twin of ``astream_run``, as ``stream`` is of ``astream``."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    session = Session(CLAUDE, tools=[_weather])
    events = list(session.stream_run("What's the weather in Paris?"))
    kinds = [
        event.type for event in events if event.type.startswith(("step.", "tool.result", "run."))
    ]
    assert kinds == [
        "step.start",
        "tool.result",
        "step.complete",
        "step.start",
        "step.complete",
        "run.complete",
    ]
    assert isinstance(events[-1], RunComplete) and events[-1].result.reason == "complete"
    for event in session.stream_run("And in Rome?"):
        if event.type == "tool.result":
            break  # leaving early ends the run; the session takes the next turn
    assert session.send("Thanks.").text and not session.busy


@metis.tool
def _weather(city: str) -> str:
    """Current weather for a city."""
    return f"sunny in {city}"


@pytest.mark.anyio
async def test_a_synchronous_form_is_refused_where_it_would_wait_for_itself(
    emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    session = Session(CLAUDE)
    inner = Session(CLAUDE)
    errors: list[BaseException] = []

    def nested(event: object) -> None:
        if getattr(event, "type", "") == "run.complete":
            try:
                inner.send("Hi")
            except metis.BlockingCallError as error:
                errors.append(error)

    await anyio.to_thread.run_sync(lambda: session.run("Hello", on_event=nested))
    assert errors and "wait for itself" in str(errors[0])


@pytest.mark.anyio
async def test_a_session_over_a_router_runs_on_the_model_that_serves(emulator: Emulator) -> None:
    adapters = emulated(emulator, stacks=["anthropic", "openai"])
    route = Router([CLAUDE, MODELS["openai"]], adapters=adapters, max_retries=0, name="main")
    session = Session(route, tools=[_weather])
    emulator.push_fault("overloaded", provider="anthropic")
    result = await session.arun("What's the weather in Paris?")
    assert result.reason == "complete" and result.steps == 2
    assert result.response.provider == "route:main"
    assert result.response.model == MODELS["openai"]  # the route's model that answered
    assert [r.path for r in emulator.requests][:2] == ["/v1/messages", "/v1/chat/completions"]
    assert all(cost.priced for cost in result.costs)
    saved = session.to_json()
    again = Session.from_json(saved, model=route, tools=[_weather])
    assert (await again.asend("Thanks!")).text
    await close_all(adapters)


def test_the_history_is_the_applications_to_edit_between_turns() -> None:
    session = Session(CLAUDE, [{"role": "user", "content": "Hi"}])
    session.add({"role": "assistant", "content": "Hello!"}, metis.Message.user("Bye"))
    assert [m.text for m in session.messages] == ["Hi", "Hello!", "Bye"]
    copy = session.messages
    copy.clear()  # a copy: the session's history is untouched
    assert len(session.messages) == 3
    session.messages = [metis.Message.user("Start again")]
    assert [m.text for m in session.messages] == ["Start again"]
    with pytest.raises(InvalidRequestError, match="unknown role"):
        session.add({"role": "usr", "content": "x"})  # type: ignore[typeddict-item]


class Connection:
    def __init__(self, fails: bool = False) -> None:
        self.closed = False
        self.fails = fails

    async def aclose(self) -> None:
        self.closed = True
        if self.fails:
            raise OSError("already gone")


@pytest.mark.anyio
async def test_closing_a_session_releases_what_providers_keep_open_for_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The slot a provider with a live connection per conversation keeps it in (none of
    today's stacks does): closed with the session, one failing to close not stopping the rest."""
    held = {"a": Connection(fails=True), "b": Connection()}
    async with Session(CLAUDE, [metis.Message.user("Hi")]) as session:
        session._conversation.connections.update(held)
    assert all(c.closed for c in held.values()) and session._conversation.connections == {}
    assert [r.getMessage() for r in caplog.records if "closing" in r.getMessage()]
    assert session.messages[0].text == "Hi"  # the history stays


def test_cancel_from_the_thread_reading_a_synchronous_stream() -> None:
    peer = FakePeer(stalled_reply("Hello", " there"))
    session = on_peer(peer)
    kinds = []
    for event in session.stream("Hi"):
        kinds.append(event.type)
        if isinstance(event, TextDelta) and event.text == " there":
            assert session.cancel()  # the stream stalls after this: the cancel ends it
    assert kinds[-1] == "message.complete"
    assert [m.text for m in session.messages] == ["Hi", "Hello there"]
