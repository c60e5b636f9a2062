"""OpenAI Responses over WebSocket (docs/websocket.md), against the emulator's WebSocket mode
on real sockets, under asyncio and trio: a turn on the session's connection; a tool loop whose
later turns send only the new items; a connection dropped mid-turn and between turns; a server
that never answers; cancel mid-stream; errors classified as over HTTP; the fallback to HTTP;
the session's connection released with it."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

import metis
from metis.adapter import Adapter
from metis.errors import AuthError, InvalidRequestError, NetworkError
from metis.model import StopKind, TextDelta
from metis.sessions import Session
from metis.testing.emulator import Emulator
from metis.transport.ws_stage import WebSocketTransport

STACK = "openai_responses_ws"
MODEL = f"{STACK}:gpt-5"


@metis.tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"18 C and sunny in {city}"


@metis.tool
def get_time(city: str) -> str:
    """The local time in a city."""
    return f"12:00 in {city}"


def ws_adapter(
    server: Emulator, stack: str | Path = STACK, api_key: str = "k", **transport: Any
) -> Adapter:
    adapter = metis.build_adapter(stack, api_key=api_key, base_url=server.url, max_retries=0)
    if transport:
        adapter.pipeline.replace("websocket_transport", WebSocketTransport(**transport))
    return adapter


def transport_of(adapter: Adapter) -> WebSocketTransport:
    stage = adapter.pipeline["websocket_transport"]
    assert isinstance(stage, WebSocketTransport)
    return stage


def session_on(adapter: Adapter, **options: Any) -> Session:
    return Session(MODEL, adapters={STACK: adapter}, **options)


def turns(server: Emulator) -> list[Any]:
    return [r for r in server.requests if r.method == "POST" and r.path.endswith("/responses")]


@pytest.fixture
async def adapter(emulator: Emulator) -> AsyncIterator[Adapter]:
    adapter = ws_adapter(emulator)
    yield adapter
    await adapter.aclose()


@pytest.mark.anyio
async def test_a_turn_goes_on_the_sessions_connection_and_closing_the_session_releases_it(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    async with session_on(adapter) as session:
        reply = await session.asend("Hello there")
        assert reply.text == "You said: Hello there"
        assert transport_of(adapter).holds(session.session_id)
        again = await session.asend("And again")
        assert again.text == "You said: And again"
    assert not transport_of(adapter).holds(session.session_id)
    sent = turns(emulator)
    assert [r.websocket for r in sent] == [1, 1] or len({r.websocket for r in sent}) == 1
    assert all(r.websocket for r in sent)
    assert [m.role.value for m in session.messages] == ["user", "assistant"] * 2


@pytest.mark.anyio
async def test_a_tool_loop_sends_only_the_new_items_on_one_connection(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    async with session_on(adapter, tools=[get_weather, get_time]) as session:
        result = await session.arun("What's the weather in Paris?")
        assert result.reason == "complete" and result.steps == 2
        await session.arun("And the time in Rome?")
    sent = turns(emulator)
    assert len(sent) == 4 and len({r.websocket for r in sent}) == 1 and sent[0].websocket
    bodies = [r.json() for r in sent]
    assert "previous_response_id" not in bodies[0]
    for before, body in itertools.pairwise(bodies):
        assert body["previous_response_id"]  # each continues the reply before it
        assert len(body["input"]) == 1  # a tool's result, or the next user message
        assert body["input"][0]["type"] in ("function_call_output", "message")
        assert len(body["input"]) < len(before["input"]) + 2
    assert bodies[1]["input"][0]["type"] == "function_call_output"


@pytest.mark.anyio
async def test_a_call_without_a_session_goes_over_http(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    request = metis.CanonicalRequest(
        model=MODEL, messages=[metis.Message.user("Hi")], max_output_tokens=100
    )
    response = await adapter.complete(request)
    assert response.text == "You said: Hi"
    assert [r.websocket for r in turns(emulator)] == [0]


@pytest.mark.anyio
async def test_a_connection_dropped_mid_turn_fails_the_turn_and_the_next_resends_everything(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    async with session_on(adapter) as session:
        await session.asend("First message")
        emulator.push_fault("drop=4")
        with pytest.raises(NetworkError, match="WebSocket connection"):
            await session.asend("Second message, a longer one to cut")
        assert session.messages[-1].role.value == "assistant"  # what arrived is kept
        assert not transport_of(adapter).holds(session.session_id)
        reply = await session.asend("Third")
        assert reply.text == "You said: Third"
    first, dropped, third = turns(emulator)
    assert first.websocket == dropped.websocket != third.websocket
    body = third.json()
    assert "previous_response_id" not in body  # a new connection: the whole transcript
    assert len(body["input"]) == len(session.messages) - 1


@pytest.mark.anyio
async def test_a_connection_closed_between_turns_is_replaced_and_the_turn_sent_whole(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    async with session_on(adapter) as session:
        await session.asend("First message")
        emulator.drop_connections()
        await anyio.lowlevel.checkpoint()
        reply = await session.asend("Second")
        assert reply.text == "You said: Second"
    first, second = turns(emulator)
    assert first.websocket != second.websocket
    assert "previous_response_id" not in second.json()
    assert len(second.json()["input"]) == 3  # message, reply, message


@pytest.mark.anyio
async def test_an_error_message_is_classified_as_over_http_and_the_connection_stays(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    async with session_on(adapter) as session:
        await session.asend("Hello")
        session.model = f"{STACK}:no-such-model"
        with pytest.raises(InvalidRequestError, match="does not exist") as raised:
            await session.asend("Again")
        assert raised.value.provider_status == 400
        assert len(session.messages) == 2  # the refused turn was taken back out
        session.model = MODEL
        await session.asend("Once more")
    numbers = {r.websocket for r in turns(emulator)}
    assert len(numbers) == 1 and 0 not in numbers


@pytest.mark.anyio
async def test_a_server_that_never_answers_ends_in_the_first_event_timeout(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator, first_event_timeout=0.3, idle_timeout=0.3)
    async with adapter, session_on(adapter) as session:
        emulator.push_fault("stall=30;after=0")
        with pytest.raises(NetworkError, match=r"nothing arrived within 0\.3 s"):
            await session.asend("Hello")
        assert session.messages == []
        emulator.push_fault("stall=30;after=3")
        with pytest.raises(NetworkError, match=r"stalled for 0\.3 s"):
            await session.asend("Hello")


@pytest.mark.anyio
async def test_a_server_that_never_completes_the_upgrade_ends_in_the_connect_timeout() -> None:
    async def accept_and_wait(stream: Any) -> None:
        await anyio.sleep_forever()

    async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as group:
            group.start_soon(listener.serve, accept_and_wait)
            adapter = metis.build_adapter(
                STACK, api_key="k", base_url=f"http://127.0.0.1:{port}", max_retries=0
            )
            adapter.pipeline.replace("websocket_transport", WebSocketTransport(connect_timeout=0.3))
            async with adapter, session_on(adapter) as session:
                with pytest.raises(NetworkError, match=r"no WebSocket connection within 0\.3 s"):
                    await session.asend("Hello")
            group.cancel_scope.cancel()


@pytest.mark.anyio
async def test_cancel_mid_stream_keeps_what_arrived_and_closes_the_connection(
    emulator: Emulator,
    adapter: Adapter,
) -> None:
    async with session_on(adapter) as session:
        await session.asend("First")
        emulator.push_fault("stall=30;after=8")
        seen: list[Any] = []
        cancelled: list[bool] = []

        async def cancel_while_it_waits() -> None:
            await anyio.sleep(0.2)  # the stream is waiting in the stall by then
            cancelled.append(session.cancel())

        async with (
            anyio.create_task_group() as group,
            session.astream("Tell me a long story about the sea") as events,
        ):
            async for event in events:
                seen.append(event)
                if isinstance(event, TextDelta) and not cancelled:
                    cancelled.append(False)
                    group.start_soon(cancel_while_it_waits)
        assert cancelled == [False, True]
        final = seen[-1]
        assert isinstance(final, metis.MessageComplete)
        assert final.stop_reason.kind is StopKind.CANCELLED
        assert session.messages[-1].text  # the text that arrived
        assert not transport_of(adapter).holds(session.session_id)
        reply = await session.asend("After the cancel")
        assert reply.text == "You said: After the cancel"
    last = turns(emulator)[-1]
    assert "previous_response_id" not in last.json()


@pytest.mark.anyio
async def test_without_the_mode_the_calls_fall_back_to_http() -> None:
    with Emulator(websocket=False) as server:
        adapter = ws_adapter(server)
        async with adapter, session_on(adapter, tools=[get_weather]) as session:
            result = await session.arun("What's the weather in Paris?")
            assert result.reason == "complete"
            await session.asend("Thanks")
        sent = turns(server)
        assert len(sent) == 3 and [r.websocket for r in sent] == [0, 0, 0]
        assert sent[-1].json()["previous_response_id"]  # HTTP continues a stored reply
        upgrades = [r for r in server.requests if r.method == "GET"]
        assert len(upgrades) == 1  # tried once, then HTTP for fallback_seconds


@pytest.mark.anyio
async def test_a_refused_key_on_the_upgrade_is_an_authentication_error() -> None:
    with Emulator(api_keys=["right"]) as server:
        adapter = ws_adapter(server, api_key="wrong")
        async with adapter, session_on(adapter) as session:
            with pytest.raises(AuthError):
                await session.asend("Hello")


@pytest.mark.anyio
async def test_store_false_continues_on_the_connection_and_sends_whole_over_http(
    emulator: Emulator,
    tmp_path: Path,
) -> None:
    stack = tmp_path / "zdr.yaml"
    stack.write_text(f"name: zdr\nextends: {STACK}\ncodec_settings: {{store: false}}\n")
    adapter = ws_adapter(emulator, stack)
    async with adapter, Session("zdr:gpt-5", adapters={"zdr": adapter}) as session:
        await session.asend("First")
        await session.asend("Second")  # continues the reply the connection holds
        assert emulator.stored == {}
        transport_of(adapter)._unavailable_until = float("inf")  # the mode gone
        await session.asend("Third")
    _, second, third = turns(emulator)
    assert second.json()["previous_response_id"] and len(second.json()["input"]) == 1
    assert third.websocket == 0 and "previous_response_id" not in third.json()
    assert len(third.json()["input"]) == 5


@pytest.mark.slow
@pytest.mark.anyio
async def test_two_hundred_concurrent_sessions_over_websocket_without_an_error() -> None:
    with Emulator() as server:
        adapter = ws_adapter(server)
        failures: list[BaseException] = []

        async def conversation(n: int) -> None:
            try:
                async with session_on(adapter, tools=[get_weather]) as session:
                    result = await session.arun(f"What's the weather in city {n}?")
                    assert result.reason == "complete"
                    reply = await session.asend(f"Thanks {n}")
                    assert reply.text == f"You said: Thanks {n}"
            except Exception as exc:  # every failure counted, none hidden
                failures.append(exc)

        async with adapter, anyio.create_task_group() as group:
            for n in range(200):
                group.start_soon(conversation, n)
        assert failures == []
        sent = turns(server)
        assert len(sent) == 600 and all(r.websocket for r in sent)
        assert len({r.websocket for r in sent}) == 200


@pytest.mark.anyio
async def test_a_connection_past_the_servers_age_limit_is_replaced_and_the_turn_sent_whole() -> (
    None
):
    with Emulator(websocket_max_seconds=0.2) as server:
        adapter = ws_adapter(server)
        async with adapter, session_on(adapter) as session:
            await session.asend("First")
            await anyio.sleep(0.3)  # the server now refuses turns on this connection
            reply = await session.asend("Second")
            assert reply.text == "You said: Second"
        first, second = turns(server)
        assert first.websocket != second.websocket
        assert "previous_response_id" not in second.json()


@pytest.mark.anyio
async def test_a_connection_older_than_max_connection_seconds_is_replaced_before_a_turn(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator, max_connection_seconds=0.1)
    async with adapter, session_on(adapter) as session:
        await session.asend("First")
        await anyio.sleep(0.2)
        await session.asend("Second")
    first, second = turns(emulator)
    assert first.websocket != second.websocket
    assert len(second.json()["input"]) == 3


@pytest.mark.anyio
async def test_past_max_connections_the_least_recent_sessions_connection_is_closed(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator, max_connections=1)
    transport = transport_of(adapter)
    async with adapter, session_on(adapter) as one, session_on(adapter) as two:
        await one.asend("One")
        await two.asend("Two")
        assert transport.holds(two.session_id) and not transport.holds(one.session_id)
        reply = await one.asend("One again")
        assert reply.text == "You said: One again"
    numbers = [r.websocket for r in turns(emulator)]
    assert len(set(numbers)) == 3 and 0 not in numbers
    assert "previous_response_id" not in turns(emulator)[-1].json()


@pytest.mark.anyio
async def test_a_restored_session_starts_a_connection_with_the_whole_transcript(
    emulator: Emulator,
) -> None:
    adapter = ws_adapter(emulator)
    async with adapter, session_on(adapter) as session:
        await session.asend("First")
        saved = session.to_json()
    other = ws_adapter(emulator)  # another worker
    async with other, Session.from_json(saved, adapters={STACK: other}) as again:
        reply = await again.asend("Second")
        assert reply.text == "You said: Second"
        await again.asend("Third")
    _, second, third = turns(emulator)
    assert second.websocket != turns(emulator)[0].websocket
    assert "previous_response_id" not in second.json() and len(second.json()["input"]) == 3
    assert third.json()["previous_response_id"] and len(third.json()["input"]) == 1


@pytest.mark.anyio
async def test_without_fallback_an_endpoint_without_the_mode_is_the_calls_error() -> None:
    with Emulator(websocket=False) as server:
        adapter = ws_adapter(server, fallback=False)
        async with adapter, session_on(adapter) as session:
            with pytest.raises(metis.errors.AdapterError) as raised:
                await session.asend("Hello")
            assert raised.value.provider_status == 405
        assert turns(server) == []


def test_the_synchronous_forms_keep_the_connection_and_close_it(emulator: Emulator) -> None:
    adapter = ws_adapter(emulator)
    with session_on(adapter) as session:
        session.send("One")
        assert session.send("Two").text == "You said: Two"
        assert transport_of(adapter).holds(session.session_id)
    assert not transport_of(adapter).holds(session.session_id)
    first, second = turns(emulator)
    assert first.websocket == second.websocket != 0
    assert second.json()["previous_response_id"] and len(second.json()["input"]) == 1


@pytest.mark.anyio
async def test_a_call_of_a_session_whose_connection_is_busy_goes_over_http(
    emulator: Emulator, adapter: Adapter
) -> None:
    def ask(text: str) -> metis.CanonicalRequest:
        return metis.CanonicalRequest(
            model=MODEL,
            messages=[metis.Message.user(text)],
            max_output_tokens=100,
            session_id="ses_shared",
        )

    emulator.push_fault("stall=0.5;after=3")  # the first call stays in flight a while
    arrived: list[Any] = []

    async def first() -> None:
        async for event in adapter.stream(ask("First")):
            arrived.append(event)

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        while not arrived:  # noqa: ASYNC110 (the first call is streaming, then stalls)
            await anyio.sleep(0.01)
        second = await adapter.complete(ask("Second"))
    assert second.text == "You said: Second"
    assert isinstance(arrived[-1], metis.MessageComplete)
    numbers = [r.websocket for r in turns(emulator)]
    assert numbers[0] != 0 and numbers[1] == 0


@pytest.mark.anyio
async def test_an_adapter_on_an_in_process_client_sends_every_turn_over_it(
    emulator: Emulator,
) -> None:
    adapter = metis.build_adapter(
        STACK, api_key="k", base_url="http://emulated.invalid", http_client=emulator.client()
    )
    async with adapter, session_on(adapter) as session:
        await session.asend("One")
        await session.asend("Two")
        assert not transport_of(adapter).holds(session.session_id)
    assert [r.websocket for r in turns(emulator)] == [0, 0]
