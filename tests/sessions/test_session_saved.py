"""A session saved as JSON and restored on another worker (its own adapters, tool-id store
and continuation memory): the same conversation goes on, and a stateful API (OpenAI
Responses) is sent only what is new, against the reply it holds, with the tool ids it issued:
from the saved session, or from a shared Redis store."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

from metis.adapter import Adapter
from metis.core.options import UnknownOptionError
from metis.errors import ConfigError
from metis.model import Message, ThinkingConfig, ToolChoice, ToolDefinition, ToolResultBlock
from metis.routing import Router
from metis.sessions import Session
from metis.testing.emulator import Emulator

from ..session_helpers import MODELS, close_all, emulated, get_weather

pytestmark = pytest.mark.usefixtures("no_backoff")  # retries are not waited for

RESPONSES = MODELS["openai_responses"]
WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def test_a_session_round_trips_through_json_without_its_key() -> None:
    session = Session(
        "anthropic:claude-sonnet-4-5",
        [Message.user("Hi"), Message.assistant("Hello!")],
        session_id="ses_1",
        system="Be brief.",
        temperature=0.3,
        max_output_tokens=300,
        thinking=ThinkingConfig(budget_tokens=1024),
        tool_choice=ToolChoice.auto(),
        tools=[get_weather],
        api_key="sk-secret-0123456789",
        context_check="estimate",
    )
    text = session.to_json()
    assert "sk-secret" not in text
    data = json.loads(text)
    assert data["format"] == "metis.session/1" and data["tools"] == ["get_weather"]
    restored = Session.from_json(text, tools=[get_weather])
    assert restored.session_id == "ses_1" and restored.model == session.model
    assert restored.messages == session.messages
    expected = {k: v for k, v in session.options.items() if k != "api_key"}
    assert restored.options == expected
    assert restored.to_dict() == session.to_dict()


def test_what_a_restore_needs_again_is_asked_for() -> None:
    session = Session("anthropic:claude-sonnet-4-5", [Message.user("Hi")], tools=[get_weather])
    with pytest.raises(ConfigError, match=r"give them again.*missing: get_weather"):
        Session.from_json(session.to_json())
    routed = Session(Router(["anthropic:claude-sonnet-4-5"], name="main"), [Message.user("Hi")])
    saved = routed.to_json()
    assert json.loads(saved)["route"] == "main" and "model" not in json.loads(saved)
    with pytest.raises(ConfigError, match="route 'main'; give the router again"):
        Session.from_json(saved)
    again = Session.from_json(saved, model=Router(["openai:gpt-4o"]))
    assert again.messages == routed.messages
    with pytest.raises(UnknownOptionError, match="'modle'; did you mean 'model'"):
        Session.from_json(saved, modle=Router(["openai:gpt-4o"]))  # type: ignore[call-arg]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "a JSON object"),
        ('{"format": "metis.session/0"}', "format 'metis.session/0'"),
        (
            '{"format": "metis.session/1", "session_id": "s", "messages": [{"role": "u"}]}',
            "messages.0",
        ),
        ('{"format": "metis.session/1", "session_id": "s", "messages": [], "x": 1}', "x:"),
        ('{"messages": ' + "[" * 100_000 + "]" * 100_000 + "}", "not JSON"),  # too deep
        (  # read as bytes.fromhex at the next turn: a bare ValueError
            '{"format": "metis.session/1", "session_id": "s", "messages": [], "provider_state": '
            '{"continuation": [{"provider": "p", "model": "m", "response_id": "r", "count": 1, '
            '"digest": "not-hex"}]}}',
            "provider_state.continuation.0.digest",
        ),
    ],
)
def test_a_saved_session_that_is_not_one_is_a_config_error(data: str, says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        Session.from_json(data)


def worker(emulator: Emulator) -> dict[str, Adapter]:
    """A worker's adapters: the Responses stack these sessions call."""
    return emulated(emulator, stacks=["openai_responses"])


async def open_tool_loop(emulator: Emulator, adapters: dict[str, Adapter]) -> tuple[str, list[str]]:
    """A Responses conversation left in a tool call the application answers: its JSON and the
    pending calls' ids."""
    session = Session(RESPONSES, adapters=adapters, tools=[WEATHER])
    await session.asend("Hello")
    result = await session.arun("What's the weather in Paris?")
    assert result.reason == "tool_calls_pending"
    return session.to_json(), [call.id for call in result.pending]


async def answer_elsewhere(
    saved: str | dict[str, Any], calls: list[str], adapters: dict[str, Adapter]
) -> Session:
    session = Session.from_json(saved, adapters=adapters, tools=[WEATHER])
    session.add(Message.tool(*(ToolResultBlock(tool_use_id=c, content="sunny") for c in calls)))
    result = await session.arun()
    assert result.reason == "complete" and "sunny" in result.text
    return session


def issued_call_ids(emulator: Emulator) -> set[str]:
    """The call ids the emulator's Responses API issued (in its replies)."""
    ids = set()
    for request in emulator.requests:
        for item in request.json().get("input", []):
            if isinstance(item, dict) and item.get("type") == "function_call_output":
                ids.add(item["call_id"])
    return ids


@pytest.mark.anyio
async def test_a_restored_session_continues_the_stored_reply_with_the_ids_it_issued(
    emulator: Emulator,
) -> None:
    first, second = worker(emulator), worker(emulator)  # two workers
    saved, calls = await open_tool_loop(emulator, first)
    held = json.loads(saved)["provider_state"]["continuation"][0]["response_id"]
    await answer_elsewhere(saved, calls, second)
    sent = emulator.requests[-1].json()
    assert sent["previous_response_id"] == held
    (item,) = sent["input"]  # only what is new
    assert item["type"] == "function_call_output"
    assert (
        item["call_id"]
        == json.loads(saved)["provider_state"]["tool_ids"]["openai_responses"][calls[0]]
    )
    await close_all(first)
    await close_all(second)


@pytest.mark.anyio
async def test_without_the_ids_the_whole_transcript_goes_never_a_wrong_one(
    emulator: Emulator,
) -> None:
    first, second = worker(emulator), worker(emulator)
    saved, calls = await open_tool_loop(emulator, first)
    data = json.loads(saved)
    data["provider_state"]["tool_ids"] = {}  # as a save from before the ids were kept
    await answer_elsewhere(data, calls, second)
    sent = emulator.requests[-1].json()
    assert "previous_response_id" not in sent and len(sent["input"]) == 5
    await close_all(first)
    await close_all(second)


# With Redis ---------------------------------------------------------------------------------

coredis = pytest.importorskip("coredis")

from metis.redis.tool_ids import RedisToolIdStore  # noqa: E402

from ..redis_servers import RedisFactory  # noqa: E402


@pytest.fixture(scope="module")
def redis_url() -> Any:
    if url := os.environ.get("METIS_REDIS_URL"):
        yield url
        return
    factory = RedisFactory()
    process = factory.server()
    yield f"redis://127.0.0.1:{process.port}/0"
    factory.close()


def on_redis(emulator: Emulator, url: str, prefix: str) -> dict[str, Adapter]:
    """A worker's adapters, keeping tool ids in the shared Redis."""
    adapters = worker(emulator)
    store = RedisToolIdStore(url, key_prefix=prefix)
    for adapter in adapters.values():
        adapter.tool_id_store = store
    return adapters


@pytest.mark.anyio
async def test_with_a_shared_redis_store_the_ids_come_from_redis(
    emulator: Emulator, redis_url: str
) -> None:
    prefix = f"metis-test:{uuid.uuid4().hex}:"
    first, second = on_redis(emulator, redis_url, prefix), on_redis(emulator, redis_url, prefix)
    saved, calls = await open_tool_loop(emulator, first)
    data = json.loads(saved)
    data["provider_state"]["tool_ids"] = {}  # the map is Redis's, not the JSON's
    await answer_elsewhere(data, calls, second)
    sent = emulator.requests[-1].json()
    assert "previous_response_id" in sent and len(sent["input"]) == 1
    await close_all(first)
    await close_all(second)


WORKER = textwrap.dedent(
    """
    import sys, anyio
    from metis import AdapterConfig, Message, build_adapter
    from metis.model import ToolDefinition, ToolResultBlock
    from metis.redis.tool_ids import RedisToolIdStore
    from metis.sessions import Session

    saved, base_url, redis_url, prefix, call = sys.argv[1:6]
    WEATHER = ToolDefinition(name="get_weather", description="Current weather for a city",
                             input_schema={"type": "object",
                                           "properties": {"city": {"type": "string"}}})

    async def main() -> None:
        store = RedisToolIdStore(redis_url, key_prefix=prefix)
        config = AdapterConfig(api_key="test-key", base_url=base_url)
        adapter = build_adapter("openai_responses", config, tool_id_store=store)
        session = Session.from_json(open(saved).read(), adapters={"openai_responses": adapter},
                                    tools=[WEATHER])
        session.add(Message.tool(ToolResultBlock(tool_use_id=call, content="sunny")))
        result = await session.arun()
        print(result.reason, result.text)

    anyio.run(main)
    """
)


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_session_goes_on_in_another_process_with_the_redis_store(
    emulator: Emulator, redis_url: str, tmp_path: Path
) -> None:
    prefix = f"metis-test:{uuid.uuid4().hex}:"
    saved, calls = await open_tool_loop(emulator, on_redis(emulator, redis_url, prefix))
    (tmp_path / "session.json").write_text(saved)
    args = [str(tmp_path / "session.json"), emulator.base_url("openai_responses")]
    with anyio.fail_after(120):
        done = await anyio.run_process(
            [sys.executable, "-c", WORKER, *args, redis_url, prefix, calls[0]], check=False
        )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.decode().startswith("complete According to get_weather: sunny")
    sent = emulator.requests[-1].json()
    assert "previous_response_id" in sent and len(sent["input"]) == 1


class BrokenStore:
    """A tool-id store whose every call fails with ``failure``."""

    def __init__(self, failure: type[BaseException] = RuntimeError) -> None:
        self.failure = failure

    async def provider_ids(self, session_id: str, provider: str, canonical_ids: Any) -> Any:
        raise self.failure("the store is down")

    async def remember(self, session_id: str, provider: str, pairs: Any) -> None:
        raise self.failure("the store is down")

    async def forget(self, session_id: str) -> None:
        raise self.failure("the store is down")


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failure",
    [
        RuntimeError,
        # of a task the store awaited, cancelled elsewhere (a Redis client's); no one
        # cancelled the turn: it ended the turn with it after the reply had arrived
        pytest.param(asyncio.CancelledError, marks=pytest.mark.backend_independent),
    ],
)
async def test_a_store_that_fails_never_fails_the_turn(
    emulator: Emulator, caplog: pytest.LogCaptureFixture, failure: type[BaseException]
) -> None:
    first = worker(emulator)
    saved, calls = await open_tool_loop(emulator, first)  # the saved state holds tool ids
    broken = worker(emulator)
    for adapter in broken.values():
        adapter.tool_id_store = BrokenStore(failure)
    session = await answer_elsewhere(saved, calls, broken)  # installing them fails: skipped
    await session.arun("And the weather in Rome?", tools=[get_weather])  # copying out too
    skipped = [
        r for r in caplog.records if getattr(r, "event", "") == "metis.session_store_skipped"
    ]
    assert skipped and "the store is down" in skipped[0].getMessage()
    await close_all(first)
    await close_all(broken)


class SlowSave:
    """saved_session held inside until released: a save in flight, made certain."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        import threading

        from metis.sessions import saving

        self.inside, self.release = threading.Event(), threading.Event()
        self.real = saving.saved_session
        monkeypatch.setattr(saving, "saved_session", self)

    def __call__(self, conversation: Any) -> Any:
        self.inside.set()
        assert self.release.wait(30)
        return self.real(conversation)


def test_a_save_waits_for_another_save_in_flight(monkeypatch: pytest.MonkeyPatch) -> None:
    """Saving reads the session: a save beside another (a checkpoint thread beside a
    request's) waits for it; it was a SessionBusyError saying a turn was in flight."""
    import threading

    slow = SlowSave(monkeypatch)
    session = Session("openai:gpt-4o", "Hello")
    first = threading.Thread(target=session.to_json)
    first.start()
    assert slow.inside.wait(30)
    threading.Timer(0.05, slow.release.set).start()
    assert json.loads(session.to_json())["messages"][0]["content"][0]["text"] == "Hello"
    first.join()


def test_an_edit_waits_for_a_save_in_flight_and_a_save_does_not_make_the_session_busy(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import threading

    slow = SlowSave(monkeypatch)
    session = Session("openai:gpt-4o", "Hello")
    saver = threading.Thread(target=session.to_json)
    saver.start()
    assert slow.inside.wait(30)
    assert not session.busy  # no turn is in flight
    threading.Timer(0.05, slow.release.set).start()
    session.add(Message.user("And another thing"))  # waits for the save, then goes in
    saver.join()
    assert [m.text for m in session.messages] == ["Hello", "And another thing"]
