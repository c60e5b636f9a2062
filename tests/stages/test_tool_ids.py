"""tool_ids: canonical tu_<ulid> ids outside, each provider's own ids inside (docs/contract.md §6,
§10.1 item 3, §10.2 item 3; docs/contract.md §6)."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any

import anyio
import pytest

from metis import AdapterConfig, build_adapter
from metis.core.ids import derive_provider_tool_id, new_tool_id
from metis.errors import ConfigError, NetworkError, StackError
from metis.model import (
    CanonicalRequest,
    Message,
    MessageComplete,
    MessageStart,
    StopKind,
    StopReason,
    StreamEvent,
    TextBlock,
    TextDelta,
    TokenUsage,
    ToolDefinition,
    ToolResultBlock,
    ToolUseBlock,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.pipeline.call import Call
from metis.pipeline.stores import InMemoryToolIdStore
from metis.stages.policy.invariants import StreamChecker
from metis.stages.policy.tool_ids import ToolIds
from metis.telemetry import (
    CallCompleted,
    CallStarted,
    ListSink,
    LoggingSink,
    OpenTelemetrySink,
    ToolIdStoreFailed,
)
from metis.testing.emulator import Emulator, tools

from ..helpers import bound, drive, make_call

pytestmark = pytest.mark.backend_independent  # stages and mock transports (tests/conftest.py)

CANONICAL = re.compile(r"^tu_[0-9A-HJKMNP-TV-Z]{26}$")  # a ULID in Crockford base32


def _tool_events(*calls: tuple[str, str, dict[str, Any]], text: str | None = None) -> list[Any]:
    """What a provider's normalize stage yields for a reply that calls ``calls`` (provider ids),
    optionally after some text."""
    events: list[StreamEvent] = [MessageStart("msg_1", "claude-x")]
    content: list[Any] = []
    index = 0
    if text is not None:
        events.append(TextDelta(0, text))
        content.append(TextBlock(text=text))
        index = 1
    for pid, name, args in calls:
        events += [
            ToolUseStart(index, pid, name),
            ToolUseInputDelta(index, pid, "{}" if not args else str(args).replace("'", '"')),
            ToolUseEnd(index, pid, name, args),
        ]
        content.append(ToolUseBlock(id=pid, name=name, input=args))
        index += 1
    events.append(
        MessageComplete(content, StopReason(kind=StopKind.TOOL_USE), TokenUsage(), "msg_1")
    )
    return events


def _request(*messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        model="anthropic:claude-x", messages=list(messages), max_output_tokens=100
    )


def _history(cid: str) -> CanonicalRequest:
    return _request(
        Message.user("weather?"),
        Message.assistant("checking", ToolUseBlock(id=cid, name="weather", input={"city": "Oslo"})),
        Message.tool(ToolResultBlock(tool_use_id=cid, content="rain")),
    )


def _wire_ids(request: CanonicalRequest) -> tuple[list[str], list[str]]:
    """(tool call ids, tool result ids) as the provider would see them."""
    uses = [b.id for m in request.messages for b in m.content if isinstance(b, ToolUseBlock)]
    results = [
        b.tool_use_id for m in request.messages for b in m.content if isinstance(b, ToolResultBlock)
    ]
    return uses, results


def _ids_out(events: list[Any]) -> list[str]:
    return [e.tool_use_id for e in events if hasattr(e, "tool_use_id")]


def _final_tool_ids(events: list[Any]) -> list[str]:
    [complete] = [e for e in events if isinstance(e, MessageComplete)]
    return [b.id for b in complete.final_content if isinstance(b, ToolUseBlock)]


async def _mint(call: Call, pid: str, stage: ToolIds | None = None) -> str:
    """Run one reply in which the provider issues ``pid``; return the canonical id it got."""
    _, out = await drive(
        stage or bound(ToolIds(prefix="toolu_")),
        _request(Message.user("go")),
        call,
        _tool_events((pid, "weather", {})),
    )
    [cid] = _final_tool_ids(out)
    return cid


# Responses: provider ids become canonical ids ---------------------------------------------------


@pytest.mark.anyio
async def test_provider_ids_become_one_canonical_id_per_tool() -> None:
    _, out = await drive(
        bound(ToolIds(prefix="toolu_")),
        _request(Message.user("go")),
        make_call(),
        _tool_events(("toolu_A", "weather", {"city": "Oslo"})),
    )
    ids = _ids_out(out)
    assert len(ids) == 3  # start, input delta, end
    assert len(set(ids)) == 1
    assert CANONICAL.match(ids[0])
    assert _final_tool_ids(out) == ids[:1]


@pytest.mark.anyio
async def test_an_input_delta_is_made_anew_with_every_field_it_had(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A call's input comes in many deltas: each is made directly with the canonical id, not
    through dataclasses.replace (several microseconds a delta), keeping its other fields."""
    from dataclasses import fields

    from metis.stages.policy import tool_ids

    copied = ("content_block_index", "tool_use_id", "partial_json")
    assert tuple(f.name for f in fields(ToolUseInputDelta)) == copied  # a new field: copy it too

    def replaced(event: Any, **changes: Any) -> Any:
        assert not isinstance(event, ToolUseInputDelta)
        return real(event, **changes)

    real = tool_ids.replace
    monkeypatch.setattr(tool_ids, "replace", replaced)
    _, out = await drive(
        bound(ToolIds(prefix="toolu_")),
        _request(Message.user("go")),
        make_call(),
        _tool_events(("call_A", "weather", {"city": "Oslo"})),
    )
    [delta] = [e for e in out if isinstance(e, ToolUseInputDelta)]
    assert CANONICAL.match(delta.tool_use_id)
    assert (delta.content_block_index, delta.partial_json) == (0, '{"city": "Oslo"}')


@pytest.mark.anyio
async def test_each_tool_gets_its_own_canonical_id() -> None:
    _, out = await drive(
        bound(ToolIds(prefix="toolu_")),
        _request(Message.user("go")),
        make_call(),
        _tool_events(("toolu_A", "a", {}), ("toolu_B", "b", {"x": 1}), text="two calls"),
    )
    starts = [e.tool_use_id for e in out if isinstance(e, ToolUseStart)]
    ends = [e.tool_use_id for e in out if isinstance(e, ToolUseEnd)]
    deltas = [e.tool_use_id for e in out if isinstance(e, ToolUseInputDelta)]
    assert len(set(starts)) == 2
    assert starts == ends == deltas
    assert all(CANONICAL.match(i) for i in starts)
    assert _final_tool_ids(out) == starts
    assert "toolu_A" not in _ids_out(out) and "toolu_B" not in _ids_out(out)


@pytest.mark.anyio
async def test_other_events_pass_through_untouched() -> None:
    events = _tool_events(("toolu_A", "a", {}), text="hello")
    _, out = await drive(bound(ToolIds()), _request(Message.user("go")), make_call(), events)
    assert [type(e) for e in out] == [type(e) for e in events]
    assert out[1] is events[1]
    assert out[1] == TextDelta(0, "hello")
    [complete] = [e for e in out if isinstance(e, MessageComplete)]
    assert complete.final_content[0] == TextBlock(text="hello")
    assert complete.stop_reason.kind is StopKind.TOOL_USE


@pytest.mark.anyio
async def test_a_tool_call_only_in_final_content_still_gets_a_canonical_id() -> None:
    # A reply whose tool call reached final_content with no tool.use_start must not leak the
    # provider's id to the application.
    events = [
        MessageStart(),
        MessageComplete(
            [ToolUseBlock(id="toolu_Q", name="a")], StopReason(kind=StopKind.TOOL_USE), TokenUsage()
        ),
    ]
    store = InMemoryToolIdStore()
    call = make_call()
    _, out = await drive(
        bound(ToolIds(prefix="toolu_"), store=store), _request(Message.user("go")), call, events
    )
    [cid] = _final_tool_ids(out)
    assert CANONICAL.match(cid)
    assert await store.provider_ids("s1", "anthropic", [cid]) == {cid: "toolu_Q"}


@pytest.mark.anyio
async def test_a_provider_id_used_twice_still_names_two_calls() -> None:
    # Some OpenAI-compatible servers number every call "call_0".
    store = InMemoryToolIdStore()
    events = _tool_events(("call_0", "a", {"x": 1}), ("call_0", "b", {"y": 2}))
    _, out = await drive(
        bound(ToolIds(prefix="call_"), store=store),
        _request(Message.user("go")),
        make_call(),
        events,
    )
    starts = [e.tool_use_id for e in out if isinstance(e, ToolUseStart)]
    ends = [e.tool_use_id for e in out if isinstance(e, ToolUseEnd)]
    assert len(set(starts)) == 2
    assert starts == ends
    assert _final_tool_ids(out) == starts  # matched in order, not by the shared provider id
    checker = StreamChecker()
    for event in out:
        checker.check(event)
    checker.check_ended()
    assert await store.provider_ids("s1", "anthropic", starts) == dict.fromkeys(starts, "call_0")


@pytest.mark.anyio
async def test_an_echoed_history_id_is_not_given_to_two_calls() -> None:
    cid = new_tool_id()
    echoed = "toolu_" + cid[3:]
    _, out = await drive(
        bound(ToolIds(prefix="toolu_")),
        _history(cid),
        make_call(),
        _tool_events((echoed, "a", {}), (echoed, "b", {})),
    )
    starts = [e.tool_use_id for e in out if isinstance(e, ToolUseStart)]
    assert starts[0] == cid
    assert starts[1] != cid and CANONICAL.match(starts[1])
    assert _final_tool_ids(out) == starts


# docs/contract.md §6: the per-session map round-trips -------------------------------------------


@pytest.mark.anyio
async def test_tool_id_round_trip_through_the_session_map() -> None:
    store = InMemoryToolIdStore()
    call = make_call()
    stage = bound(ToolIds(prefix="toolu_"), store=store)
    # 1. the provider issues toolu_X; the application sees a canonical id
    cid = await _mint(call, "toolu_X", stage)
    assert CANONICAL.match(cid)
    # 2. the canonical history goes back: the provider sees its own id again, everywhere
    seen, _ = await drive(stage, _history(cid), make_call(), [])
    assert _wire_ids(seen[0]) == (["toolu_X"], ["toolu_X"])
    # 3. the provider names toolu_X again: the application gets the same canonical id back
    _, out = await drive(
        stage, _history(cid), make_call(), _tool_events(("toolu_X", "weather", {}))
    )
    assert set(_ids_out(out)) == {cid}
    assert _final_tool_ids(out) == [cid]


@pytest.mark.anyio
async def test_the_pair_is_remembered_only_when_the_message_completes() -> None:
    store = InMemoryToolIdStore()
    events = _tool_events(("toolu_X", "weather", {}))

    async def inner(req: CanonicalRequest, c: Call) -> Any:
        for event in events:
            yield event

    stream = bound(ToolIds(prefix="toolu_"), store=store)(
        _request(Message.user("go")), make_call(), inner
    )
    cid = None
    for _ in range(len(events) - 1):
        event = await stream.__anext__()
        cid = getattr(event, "tool_use_id", cid)
    assert cid is not None
    assert await store.provider_ids("s1", "anthropic", [cid]) == {}
    await stream.__anext__()  # message.complete
    assert await store.provider_ids("s1", "anthropic", [cid]) == {cid: "toolu_X"}
    with pytest.raises(StopAsyncIteration):
        await stream.__anext__()


@pytest.mark.anyio
async def test_a_reply_that_never_completes_remembers_nothing() -> None:
    store = InMemoryToolIdStore()
    events = _tool_events(("toolu_X", "weather", {}))[:-1]
    _, out = await drive(
        bound(ToolIds(), store=store), _request(Message.user("go")), make_call(), events
    )
    cid = out[1].tool_use_id
    assert CANONICAL.match(cid)
    assert await store.provider_ids("s1", "anthropic", [cid]) == {}


# Requests: history ids become provider ids ---------------------------------------------------


@pytest.mark.anyio
async def test_history_ids_are_rewritten_consistently_without_a_session() -> None:
    store = InMemoryToolIdStore()
    call = make_call(session_id=None)
    cid = new_tool_id()
    seen, _ = await drive(bound(ToolIds(prefix="toolu_"), store=store), _history(cid), call, [])
    uses, results = _wire_ids(seen[0])
    assert uses == results == ["toolu_" + cid[3:]]
    # and the reply's ids are still canonical and consistent, but nothing is stored
    _, out = await drive(
        bound(ToolIds(prefix="toolu_"), store=store),
        _history(cid),
        call,
        _tool_events(("toolu_N", "a", {})),
    )
    assert len(set(_ids_out(out))) == 1
    assert _final_tool_ids(out) == _ids_out(out)[:1]
    assert store._sessions == {}


@pytest.mark.anyio
async def test_parallel_calls_and_their_results_are_rewritten_pairwise() -> None:
    a, b = new_tool_id(), new_tool_id()
    request = _request(
        Message.user("go"),
        Message.assistant(ToolUseBlock(id=a, name="x"), ToolUseBlock(id=b, name="y")),
        Message.tool(ToolResultBlock(tool_use_id=b), ToolResultBlock(tool_use_id=a)),
    )
    seen, _ = await drive(bound(ToolIds(prefix="call_")), request, make_call(), [])
    uses, results = _wire_ids(seen[0])
    assert uses == ["call_" + a[3:], "call_" + b[3:]]
    assert results == ["call_" + b[3:], "call_" + a[3:]]


@pytest.mark.anyio
async def test_the_input_request_is_not_changed() -> None:
    cid = new_tool_id()
    request = _history(cid)
    before = request.model_dump()
    seen, _ = await drive(bound(ToolIds(prefix="toolu_")), request, make_call(), [])
    assert request.model_dump() == before
    assert seen[0] is not request
    # blocks other than tool calls and results are kept as they were
    assert seen[0].messages[0] is request.messages[0]
    assert seen[0].messages[1].content[0] is request.messages[1].content[0]


@pytest.mark.anyio
async def test_a_request_without_tool_blocks_is_passed_on_as_is() -> None:
    request = _request(Message.user("hi"), Message.assistant("hello"))
    seen, _ = await drive(bound(ToolIds()), request, make_call(), [])
    assert seen[0] is request


@pytest.mark.anyio
async def test_another_provider_gets_a_deterministic_id_with_its_own_prefix() -> None:
    store = InMemoryToolIdStore()
    cid = await _mint(make_call(), "toolu_X", bound(ToolIds(prefix="toolu_"), store=store))
    openai = bound(ToolIds(prefix="call_"), store=store)
    first, _ = await drive(openai, _history(cid), make_call("openai", "openai:gpt"))
    second, _ = await drive(openai, _history(cid), make_call("openai", "openai:gpt"))
    expected = "call_" + cid[3:]
    assert _wire_ids(first[0]) == ([expected], [expected])
    assert _wire_ids(second[0]) == ([expected], [expected])
    # ... and the provider that issued the id still gets its own back
    back, _ = await drive(bound(ToolIds(prefix="toolu_"), store=store), _history(cid), make_call())
    assert _wire_ids(back[0]) == (["toolu_X"], ["toolu_X"])


@pytest.mark.anyio
async def test_mid_session_swap_keeps_each_providers_ids() -> None:
    # docs/contract.md §6: Anthropic mints, OpenAI answers, each sees its own ids.
    store = InMemoryToolIdStore()
    anthropic, openai = (
        bound(ToolIds(prefix="toolu_"), store=store),
        bound(ToolIds(prefix="call_"), store=store),
    )
    a_cid = await _mint(make_call(), "toolu_A", anthropic)
    b_cid = await _mint(make_call("openai", "openai:gpt"), "call_B", openai)
    request = _request(
        Message.user("go"),
        Message.assistant(ToolUseBlock(id=a_cid, name="x")),
        Message.tool(ToolResultBlock(tool_use_id=a_cid)),
        Message.assistant(ToolUseBlock(id=b_cid, name="y")),
        Message.tool(ToolResultBlock(tool_use_id=b_cid)),
    )
    to_a, _ = await drive(anthropic, request, make_call())
    to_b, _ = await drive(openai, request, make_call("openai", "openai:gpt"))
    assert _wire_ids(to_a[0]) == (["toolu_A", "toolu_" + b_cid[3:]],) * 2
    assert _wire_ids(to_b[0]) == (["call_" + a_cid[3:], "call_B"],) * 2


@pytest.mark.anyio
async def test_ids_that_are_not_canonical_are_hashed_the_same_way_each_time() -> None:
    request = _history("my tool call #1")
    first, _ = await drive(bound(ToolIds(prefix="call_")), request, make_call())
    second, _ = await drive(bound(ToolIds(prefix="call_")), request, make_call(session_id="other"))
    uses, results = _wire_ids(first[0])
    assert uses == results == _wire_ids(second[0])[0]
    assert re.fullmatch(r"call_[0-9a-f]{26}", uses[0])


@pytest.mark.anyio
async def test_the_stage_options_limit_the_length() -> None:
    seen, _ = await drive(
        bound(ToolIds(prefix="toolu_", max_length=12)), _history("x" * 80), make_call()
    )
    uses, results = _wire_ids(seen[0])
    assert uses == results
    assert len(uses[0]) == 12 and uses[0].startswith("toolu_")


MISTRAL_RULE = {"prefix": "", "max_length": 9}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("model", "pattern"),
    [
        ("bedrock:mistral.mistral-large-2402-v1:0", r"[a-zA-Z0-9]{9}"),
        ("bedrock:us.mistral.pixtral-large-2502-v1:0", r"[a-zA-Z0-9]{9}"),
        ("bedrock:us.anthropic.claude-sonnet-4-5-v1:0", r"tooluse_[0-9A-Z]{26}"),
        ("bedrock:us.mistralish", r"tooluse_[0-9A-Z]{26}"),  # "us.mistral." is not its start
    ],
)
async def test_a_model_with_a_rule_of_its_own_gets_ids_by_it(model: str, pattern: str) -> None:
    """Bedrock's stack: Mistral's models, as such or in a cross-region profile, get Mistral's
    9 of [a-zA-Z0-9]; the others Converse's ids; the reply's ids still come back canonical."""
    rules = {"mistral.": MISTRAL_RULE, "us.mistral.": MISTRAL_RULE}
    stage = bound(ToolIds(prefix="tooluse_", max_length=64, models=rules))
    call = make_call("bedrock", model)
    seen, out = await drive(
        stage, _history(new_tool_id()), call, _tool_events(("aB3xK9mP2", "f", {}))
    )
    uses, results = _wire_ids(seen[0])
    assert uses == results and re.fullmatch(pattern, uses[0])
    [cid] = _final_tool_ids(out)
    assert cid.startswith("tu_")


@pytest.mark.anyio
async def test_the_longest_model_key_wins() -> None:
    rules = {"mistralai/": MISTRAL_RULE, "mistralai/codestral": {"prefix": "c", "max_length": 12}}
    stage = bound(ToolIds(models=rules))
    seen, _ = await drive(
        stage, _history("x"), make_call("openrouter", "openrouter:mistralai/codestral-2")
    )
    assert re.fullmatch(r"c[0-9a-f]{11}", _wire_ids(seen[0])[0][0])


@pytest.mark.anyio
async def test_ids_another_model_issued_never_reach_a_model_with_a_rule_of_its_own() -> None:
    """OpenRouter: an OpenAI model's ``call_...`` ids are remembered for the session, then the
    conversation goes to a Mistral model, which is sent ids by Mistral's rule; each model gets
    back the ids it issued."""
    store = InMemoryToolIdStore()
    stage = bound(ToolIds(prefix="call_", models={"mistralai/": MISTRAL_RULE}), store=store)
    gpt, mistral = (
        make_call("openrouter", "openrouter:openai/gpt-4o"),
        make_call("openrouter", "openrouter:mistralai/mistral-large"),
    )
    g_cid = await _mint(gpt, "call_B", stage)
    m_cid = await _mint(mistral, "aB3xK9mP2", stage)
    request = _request(
        Message.user("go"),
        Message.assistant(ToolUseBlock(id=g_cid, name="x")),
        Message.tool(ToolResultBlock(tool_use_id=g_cid)),
        Message.assistant(ToolUseBlock(id=m_cid, name="y")),
        Message.tool(ToolResultBlock(tool_use_id=m_cid)),
    )
    to_mistral, _ = await drive(stage, request, mistral)
    to_gpt, _ = await drive(stage, request, gpt)
    assert _wire_ids(to_mistral[0]) == ([derive_provider_tool_id(g_cid, "", 9), "aB3xK9mP2"],) * 2
    assert _wire_ids(to_gpt[0]) == (["call_B", "call_" + m_cid[3:]],) * 2


def test_bad_options_are_refused_at_assembly() -> None:
    with pytest.raises(StackError, match="max_length"):
        ToolIds(max_length=3)
    with pytest.raises(StackError, match="unknown option"):
        ToolIds(prefx="call_")
    with pytest.raises(StackError, match="max_length"):
        ToolIds(models={"mistralai/": {"max_length": 3}})
    with pytest.raises(StackError, match="prefx"):
        ToolIds(models={"mistralai/": {"prefx": "", "max_length": 9}})


@pytest.mark.anyio
async def test_sessions_do_not_share_maps() -> None:
    store = InMemoryToolIdStore()
    cid = await _mint(
        make_call(session_id="A"), "toolu_X", bound(ToolIds(prefix="toolu_"), store=store)
    )
    in_a, _ = await drive(
        bound(ToolIds(prefix="toolu_"), store=store), _history(cid), make_call(session_id="A")
    )
    in_b, _ = await drive(
        bound(ToolIds(prefix="toolu_"), store=store), _history(cid), make_call(session_id="B")
    )
    assert _wire_ids(in_a[0])[0] == ["toolu_X"]
    assert _wire_ids(in_b[0])[0] == ["toolu_" + cid[3:]]
    assert await store.provider_ids("B", "anthropic", [cid]) == {}


@pytest.mark.anyio
async def test_a_provider_echoing_a_history_id_gets_its_canonical_id() -> None:
    cid = new_tool_id()  # from elsewhere; this provider knows it as toolu_<ulid>
    _, out = await drive(
        bound(ToolIds(prefix="toolu_")),
        _history(cid),
        make_call(),
        _tool_events(("toolu_" + cid[3:], "weather", {})),
    )
    assert set(_ids_out(out)) == {cid}


# The store -----------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_store_keeps_providers_apart_within_a_session() -> None:
    store = InMemoryToolIdStore()
    await store.remember("s", "anthropic", {"tu_1": "toolu_1"})
    await store.remember("s", "openai", {"tu_1": "call_1"})
    await store.remember("s", "openai", {"tu_2": "call_2"})
    assert await store.provider_ids("s", "anthropic", ["tu_1", "tu_2"]) == {"tu_1": "toolu_1"}
    assert await store.provider_ids("s", "openai", ["tu_1", "tu_2", "tu_3"]) == {
        "tu_1": "call_1",
        "tu_2": "call_2",
    }
    assert await store.provider_ids("s", "gemini", ["tu_1"]) == {}
    assert await store.provider_ids("nope", "openai", ["tu_1"]) == {}


@pytest.mark.anyio
async def test_store_evicts_the_least_recently_used_session() -> None:
    store = InMemoryToolIdStore(max_sessions=2)
    await store.remember("s1", "p", {"c1": "p1"})
    await store.remember("s2", "p", {"c2": "p2"})
    assert await store.provider_ids("s1", "p", ["c1"]) == {"c1": "p1"}  # s1 is now the newest
    await store.remember("s3", "p", {"c3": "p3"})
    assert await store.provider_ids("s2", "p", ["c2"]) == {}
    assert await store.provider_ids("s1", "p", ["c1"]) == {"c1": "p1"}
    assert await store.provider_ids("s3", "p", ["c3"]) == {"c3": "p3"}
    await store.remember("s1", "p", {"c1b": "p1b"})  # writing also refreshes
    await store.remember("s4", "p", {"c4": "p4"})
    assert await store.provider_ids("s3", "p", ["c3"]) == {}
    assert await store.provider_ids("s1", "p", ["c1", "c1b"]) == {"c1": "p1", "c1b": "p1b"}
    assert len(store._sessions) == 2


@pytest.mark.anyio
async def test_store_ignores_empty_writes_and_forgets_on_request() -> None:
    store = InMemoryToolIdStore(max_sessions=1)
    await store.remember("s1", "p", {"c1": "p1"})
    await store.remember("s2", "p", {})  # nothing to keep: must not evict s1
    assert await store.provider_ids("s1", "p", ["c1"]) == {"c1": "p1"}
    await store.forget("s1")
    await store.forget("never-seen")
    assert await store.provider_ids("s1", "p", ["c1"]) == {}


@pytest.mark.parametrize("max_sessions", [0, -1, "10", True, 2.5])
def test_store_refuses_a_size_that_is_no_whole_number_of_sessions(max_sessions: Any) -> None:
    """``max_sessions=-1`` was taken, and the first write emptied the store, then raised a
    bare KeyError ('dictionary is empty'); ``"10"`` a TypeError at the first write."""
    with pytest.raises(ConfigError, match="max_sessions is a whole number of sessions >= 1"):
        InMemoryToolIdStore(max_sessions=max_sessions)


@pytest.mark.anyio
async def test_store_says_how_full_it_is() -> None:
    store = InMemoryToolIdStore(max_sessions=5)
    await store.remember("s1", "p", {"c1": "p1"})
    assert repr(store) == "InMemoryToolIdStore(1 of at most 5 sessions)"


# derive_provider_tool_id and new_tool_id -------------------------------------------------------


def test_new_tool_ids_are_canonical_and_unique() -> None:
    ids = {new_tool_id() for _ in range(200)}
    assert len(ids) == 200
    assert all(CANONICAL.match(i) for i in ids)


def test_a_canonical_id_keeps_its_ulid() -> None:
    cid = new_tool_id()
    assert derive_provider_tool_id(cid, "toolu_") == "toolu_" + cid[3:]
    assert derive_provider_tool_id(cid, "call_") == "call_" + cid[3:]


@pytest.mark.parametrize(
    "cid",
    [
        "call_abc123",
        "toolu_01-xyz",
        "has spaces and / slashes",
        "tu_with-dash",
        "tu_",
        "",
        "x" * 500,
        "tu_é1",  # alphanumeric, but not ASCII
        "tu_١٢٣",  # Arabic-Indic digits: str.isalnum() says yes
        "ünïcödé",
    ],
)
def test_other_ids_are_hashed_into_the_providers_charset(cid: str) -> None:
    for prefix, limit in (("call_", 40), ("toolu_", 64), ("", 10), ("call_", 8)):
        pid = derive_provider_tool_id(cid, prefix, limit)
        assert pid == derive_provider_tool_id(cid, prefix, limit)  # deterministic
        assert pid.startswith(prefix)
        assert re.fullmatch(r"[A-Za-z0-9_]+", pid), pid
        assert len(pid) <= limit
        assert pid.isascii()


def test_different_ids_derive_different_provider_ids() -> None:
    ids = ["a", "b", "call_1", "call_2", "tu_x-1", "tu_x-2", *(new_tool_id() for _ in range(20))]
    derived = {derive_provider_tool_id(i, "call_") for i in ids}
    assert len(derived) == len(ids)


def test_long_canonical_ids_that_share_a_prefix_do_not_collide() -> None:
    a = "tu_" + "A" * 60 + "1"
    b = "tu_" + "A" * 60 + "2"
    pa, pb = derive_provider_tool_id(a, "call_", 40), derive_provider_tool_id(b, "call_", 40)
    assert pa != pb
    assert len(pa) <= 40 and len(pb) <= 40


def test_the_default_limit_is_forty() -> None:
    assert len(derive_provider_tool_id("z" * 100, "call_")) <= 40


# A failing store never costs an answer ------------------------------------------------------------


class _BrokenStore:
    """A store whose every call fails, or hangs until cancelled."""

    def __init__(self, failure: BaseException | None = None) -> None:
        self.failure = failure
        self.calls: list[str] = []

    async def _fail(self, operation: str) -> Any:
        self.calls.append(operation)
        if self.failure is None:
            await anyio.sleep_forever()
        raise self.failure

    async def provider_ids(self, session_id: str, provider: str, canonical_ids: Any) -> Any:
        return await self._fail("read")

    async def remember(self, session_id: str, provider: str, pairs: Any) -> None:
        await self._fail("write")

    async def forget(self, session_id: str) -> None:
        await self._fail("forget")


def _store_warnings(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == "metis.tool_id_store_failed"]


@pytest.mark.anyio
@pytest.mark.parametrize(
    "failure",
    [
        NetworkError("redis 127.0.0.1:6379: connection refused"),
        RuntimeError("a store with a bug"),
        KeyError("tu_1"),
        # of a task the store awaited, cancelled elsewhere; no one cancelled the call (before:
        # it ended the call, the reply that arrived lost, and a session's turn taken back out)
        asyncio.CancelledError(),
    ],
)
async def test_a_store_that_fails_costs_neither_the_request_nor_the_reply(
    failure: BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    cid = new_tool_id()
    store, sink = _BrokenStore(failure), ListSink()
    call = make_call()
    reply = _tool_events(("toolu_A", "weather", {"city": "Oslo"}), text="checking")
    with caplog.at_level(logging.WARNING, logger="metis"):
        seen, out = await drive(
            bound(ToolIds(prefix="toolu_"), store=store, telemetry=sink), _history(cid), call, reply
        )
    # the request went out with the ids derived from the canonical ones
    assert _wire_ids(seen[0]) == ([derive_provider_tool_id(cid, "toolu_", 40)],) * 2
    # every event arrived, the message complete, with canonical ids
    assert [type(e) for e in out] == [type(e) for e in reply]
    complete = out[-1]
    assert isinstance(complete, MessageComplete)
    [block] = [b for b in complete.final_content if isinstance(b, ToolUseBlock)]
    assert CANONICAL.match(block.id)
    assert store.calls == ["read", "write"]
    # one WARN and one bus event per failed store call, saying which and why
    records = _store_warnings(caplog)
    assert [r.operation for r in records] == ["read", "write"]  # type: ignore[attr-defined]
    assert all(r.levelno == logging.WARNING and r.session_id == "s1" for r in records)  # type: ignore[attr-defined]
    assert [(e.name, e.operation) for e in sink.events] == [  # type: ignore[union-attr]
        ("metis.tool_id_store_failed", "read"),
        ("metis.tool_id_store_failed", "write"),
    ]
    event = sink.events[0]
    assert isinstance(event, ToolIdStoreFailed)
    expected_class = "network" if isinstance(failure, NetworkError) else "other"
    assert event.error_class == expected_class and event.request_id == "req_1"


class _OwnExit(BaseException):
    """An application's own way out, raised by its store."""


@pytest.mark.anyio
async def test_a_stores_own_base_exception_is_let_out() -> None:
    store = _BrokenStore(_OwnExit())
    stage = bound(ToolIds(prefix="toolu_"), store=store, telemetry=ListSink())
    reply = _tool_events(("toolu_A", "weather", {}))
    with pytest.raises(_OwnExit):
        await drive(stage, _history(new_tool_id()), make_call(), reply)


@pytest.mark.backend_independent(False)
@pytest.mark.anyio
async def test_a_hanging_store_is_cut_off_at_the_calls_deadline(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, sink = _BrokenStore(), ListSink()
    call = make_call(deadline=anyio.current_time() + 0.3)
    reply = _tool_events(("toolu_A", "weather", {}))
    # both store calls end at the deadline: the store alone would hang (a bound, not a timing)
    with caplog.at_level(logging.WARNING, logger="metis"), anyio.fail_after(60):
        _, out = await drive(
            bound(ToolIds(prefix="toolu_"), store=store, telemetry=sink),
            _history(new_tool_id()),
            call,
            reply,
        )
    assert isinstance(out[-1], MessageComplete)
    assert store.calls == ["read", "write"]
    assert [r.operation for r in _store_warnings(caplog)] == ["read", "write"]  # type: ignore[attr-defined]
    assert all("deadline" in e.error_message for e in sink.events)  # type: ignore[union-attr]


@pytest.mark.backend_independent(False)
@pytest.mark.anyio
async def test_a_cancel_interrupts_a_hanging_store_call_quietly(
    caplog: pytest.LogCaptureFixture,
) -> None:
    store, sink = _BrokenStore(), ListSink()
    call = make_call()
    reply = _tool_events(("toolu_A", "weather", {}))
    out: list[Any] = []

    async def run() -> None:
        _, events = await drive(
            bound(ToolIds(prefix="toolu_"), store=store, telemetry=sink),
            _history(new_tool_id()),
            call,
            reply,
        )
        out.extend(events)

    with caplog.at_level(logging.WARNING, logger="metis"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await anyio.wait_all_tasks_blocked()
            assert store.calls == ["read"]
            assert call.cancel.cancel()
    # the read gave up at once; what the inner stages yield still reaches the caller (in a
    # real stack the transport then ends the call as cancelled), and the write is skipped
    assert isinstance(out[-1], MessageComplete)
    assert store.calls == ["read"]
    assert _store_warnings(caplog) == [] and sink.events == []


def _store_failed(request_id: str = "req_1") -> ToolIdStoreFailed:
    return ToolIdStoreFailed(
        request_id=request_id,
        session_id="s1",
        provider="anthropic",
        model="anthropic:claude-x",
        wire_model="claude-x",
        retry_count=0,
        timestamp=time.time(),
        operation="write",
        error_class="network",
        error_message="redis 127.0.0.1:6379: connection refused",
    )


def test_sinks_take_the_store_failure_event(caplog: pytest.LogCaptureFixture) -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    from opentelemetry.trace import StatusCode

    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    sink = OpenTelemetrySink(provider)
    identity = {f: getattr(_store_failed(), f) for f in ("request_id", "session_id", "provider")}
    identity |= {"model": "anthropic:claude-x", "wire_model": "claude-x", "retry_count": 0}
    # during an attempt: an event on its span
    sink.emit(CallStarted(**identity, timestamp=time.time(), stream=True))
    sink.emit(_store_failed())
    sink.emit(
        CallCompleted(
            **identity,
            timestamp=time.time(),
            latency_ms=1,
            usage=TokenUsage(),
            stop_reason=StopReason(kind=StopKind.TOOL_USE),
            message_id="msg_1",
        )
    )
    # outside one: a span of its own, marked as an error
    sink.emit(_store_failed("req_2"))
    attempt, alone = exporter.get_finished_spans()
    [event] = attempt.events
    assert event.name == "metis.tool_id_store_failed"
    assert event.attributes["metis.tool_id_store.operation"] == "write"
    assert attempt.status.status_code is StatusCode.UNSET
    assert alone.name == "metis.tool_id_store write"
    assert alone.status.status_code is StatusCode.ERROR
    assert alone.attributes["error.type"] == "network"

    with caplog.at_level(logging.INFO, logger="metis.telemetry"):
        LoggingSink().emit(_store_failed())
    [record] = caplog.records
    assert "tool-id store write failed: redis 127.0.0.1:6379" in record.getMessage()
    assert record.event == "metis.tool_id_store_failed"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_complete_returns_the_answer_when_the_store_fails() -> None:
    emulator = Emulator(model=[tools(("weather", {"city": "Oslo"}))], models="any")
    store = _BrokenStore(NetworkError("redis 127.0.0.1:6379: connection refused"))
    adapter = build_adapter(
        "anthropic",
        AdapterConfig(api_key="k", max_retries=0, http_client=emulator.client()),
        tool_id_store=store,  # type: ignore[arg-type]
    )
    request = _history(new_tool_id()).model_copy(update={"session_id": "conv-1"})
    response = await adapter.complete(request)
    [call] = [b for b in response.content if isinstance(b, ToolUseBlock)]
    assert CANONICAL.match(call.id) and call.input == {"city": "Oslo"}
    assert store.calls == ["read", "write"]
    await adapter.aclose()


class _OddStore(InMemoryToolIdStore):
    def __init__(self, answer: Any) -> None:
        super().__init__()
        self.answer = answer

    async def provider_ids(self, session_id: str, provider: str, canonical_ids: Any) -> Any:
        return self.answer


@pytest.mark.anyio
async def test_a_store_answer_that_is_not_a_map_of_ids_is_not_sent(
    caplog: pytest.LogCaptureFixture,
) -> None:
    cid = new_tool_id()
    derived = derive_provider_tool_id(cid, "toolu_", 40)
    for answer, warned in [
        (["toolu_x"], True),
        (None, True),
        ({cid: b"toolu_bytes"}, False),
        ({cid: ""}, False),
        ({cid: 7, "tu_other": "toolu_other"}, False),
    ]:
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="metis"):
            seen, _ = await drive(
                bound(ToolIds(prefix="toolu_"), store=_OddStore(answer)), _history(cid), make_call()
            )
        assert _wire_ids(seen[0]) == ([derived], [derived]), answer
        assert bool(_store_warnings(caplog)) is warned, answer


class _SlowWrites(_BrokenStore):
    """A store that answers reads at once and never finishes a write."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = anyio.Event()

    async def provider_ids(self, session_id: str, provider: str, canonical_ids: Any) -> Any:
        self.calls.append("read")
        return {}

    async def remember(self, session_id: str, provider: str, pairs: Any) -> None:
        self.writing.set()
        await super().remember(session_id, provider, pairs)


@pytest.mark.backend_independent(False)
@pytest.mark.anyio
async def test_a_cancel_during_the_write_at_message_complete_ends_the_stream_cancelled(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """docs/contract.md §1-2: cancel() answers True only for a call it cancelled, and a
    cancelled stream ends with message.complete whose stop reason is cancelled."""
    store, sink = _SlowWrites(), ListSink()
    call = make_call()
    reply = _tool_events(("toolu_A", "weather", {"city": "Oslo"}), text="checking")
    out: list[Any] = []

    async def run() -> None:
        _, events = await drive(
            bound(ToolIds(prefix="toolu_"), store=store, telemetry=sink),
            _history(new_tool_id()),
            call,
            reply,
        )
        out.extend(events)

    with caplog.at_level(logging.WARNING, logger="metis"):
        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            await store.writing.wait()
            assert call.cancel.cancel() is True
    complete = out[-1]
    assert isinstance(complete, MessageComplete)
    assert complete.stop_reason.kind is StopKind.CANCELLED
    [block] = [b for b in complete.final_content if isinstance(b, ToolUseBlock)]
    assert CANONICAL.match(block.id) and block.input == {"city": "Oslo"}  # the content kept
    assert store.calls == ["read", "write"]
    assert _store_warnings(caplog) == [] and sink.events == []  # a cancel is not a failure


# The history's copies with the provider's ids, kept per message ---------------------------------


@pytest.mark.anyio
async def test_a_message_sent_again_gets_each_providers_ids_and_an_edit_its_own() -> None:
    cid = new_tool_id()
    history = _history(cid)
    toolu, call_ = bound(ToolIds(prefix="toolu_")), bound(ToolIds(prefix="call_"))
    for stage, prefix in [(toolu, "toolu_"), (call_, "call_"), (toolu, "toolu_")]:
        sent, _ = await stage.open(history, make_call(session_id=None))
        assert _wire_ids(sent) == ([derive_provider_tool_id(cid, prefix)],) * 2
    other = new_tool_id()
    use = ToolUseBlock(id=other, name="weather", input={"city": "Oslo"})
    assistant = history.messages[1].model_copy(update={"content": [use]})
    edited = history.model_copy(update={"messages": [history.messages[0], assistant]})
    sent, _ = await toolu.open(edited, make_call(session_id=None))
    assert _wire_ids(sent) == ([derive_provider_tool_id(other, "toolu_")], [])
    history.messages[2].content[0] = ToolResultBlock(tool_use_id=other, content="sun")
    sent, _ = await toolu.open(history, make_call(session_id=None))
    assert _wire_ids(sent)[1] == [derive_provider_tool_id(other, "toolu_")]


# A history that uses a call id again in a later turn ----------------------------------------


def _numbered_per_turn() -> CanonicalRequest:
    """Two turns each calling ``call_0`` (an imported history, or a server numbering its calls
    per reply, whose echoed id reads back as the history's canonical one)."""
    turns: list[Message] = []
    for city in ("Oslo", "Rome"):
        turns += [
            Message.user(f"weather in {city}?"),
            Message.assistant(ToolUseBlock(id="call_0", name="weather", input={"city": city})),
            Message.tool(ToolResultBlock(tool_use_id="call_0", content=f"{city}: rain")),
            Message.assistant(f"Rain in {city}."),
        ]
    return _request(*turns, Message.user("thanks"))


@pytest.mark.anyio
async def test_a_call_id_used_again_in_a_later_turn_is_sent_as_another_id() -> None:
    sent, _ = await drive(
        bound(ToolIds(prefix="toolu_")), _numbered_per_turn(), make_call(), _tool_events()
    )
    uses, results = _wire_ids(sent[0])
    assert len(set(uses)) == 2 and results == uses  # each result still answers its own call
    again = _numbered_per_turn()
    resent, _ = await drive(bound(ToolIds(prefix="toolu_")), again, make_call(), _tool_events())
    assert _wire_ids(resent[0]) == (uses, results)  # the same ids on every call


@pytest.mark.backend_independent
@pytest.mark.anyio
@pytest.mark.parametrize("stack", ["anthropic", "bedrock", "openai"])
async def test_a_history_reusing_a_call_id_is_taken_by_every_provider(stack: str) -> None:
    """Anthropic refuses a request whose tool_use ids repeat (``messages.5.content.0:
    `tool_use` ids must be unique``): the history moved there as it was never arrived."""
    emulator = Emulator(models="any")
    settings = {"region": "us-east-1"} if stack == "bedrock" else {}
    config = AdapterConfig(api_key="k", http_client=emulator.client(), settings=settings)
    adapter = build_adapter(stack, config)
    tool = ToolDefinition(name="weather", input_schema={"type": "object"})
    request = _numbered_per_turn().model_copy(
        update={"model": f"{stack}:some-model", "tools": [tool]}
    )
    await adapter.complete(request)
    assert [r.status for r in emulator.requests] == [200]
