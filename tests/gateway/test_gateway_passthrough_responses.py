"""The Responses API's pass-through: a Responses request to a model of an
``openai_responses`` stack goes to the provider as the caller wrote it, and its
``previous_response_id`` is served from the gateway's own state: sent on only to the upstream
that made and kept that response, else replaced by the stored conversation. The official
``openai`` SDK against the gateway, the emulator upstream."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.config import GatewayConfig
from metis.gateway.keys import digest
from metis.gateway.store import ResponseStore
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")

KEYS = [{"name": "paying", "sha256": digest("paying-key"), "budget_usd": 100}]
WEATHER = {"type": "function", **WEATHER_FUNCTION}


@pytest.fixture(scope="module")
def emulator() -> Iterator[Emulator]:
    yield Emulator()


@pytest.fixture(scope="module")
def served(emulator: Emulator) -> Iterator[tuple[str, Any]]:
    app = create_app(gateway_config(emulator, {"keys": KEYS}))
    with serving(app) as (url, _):
        yield url, app


@pytest.fixture
def oai(served: tuple[str, Any]) -> Any:
    return openai.OpenAI(api_key=GATEWAY_KEY, base_url=served[0] + "/v1", max_retries=0)


def _sent(emulator: Emulator) -> dict[str, Any]:
    body: dict[str, Any] = emulator.bodies("openai_responses")[-1]
    return body


def _text(content: Any) -> str:
    return content if isinstance(content, str) else "".join(p["text"] for p in content)


def test_a_responses_request_keeps_every_field_and_names_the_callers_model(
    oai: Any, emulator: Emulator
) -> None:
    raw = oai.responses.with_raw_response.create(
        model="gpt5", input="Hi", metadata={"team": "a"}, truncation="auto", user="u-1"
    )
    assert raw.headers["x-metis-path"] == "pass-through"
    response = raw.parse()
    assert response.model == "gpt5" and response.output_text == "You said: Hi"
    sent = _sent(emulator)
    assert sent["model"] == "gpt-5" and sent["metadata"] == {"team": "a"}
    assert sent["truncation"] == "auto" and sent["user"] == "u-1"  # no canonical form
    # what the provider does not take, the provider refuses, in the SDK's own exception
    with pytest.raises(openai.BadRequestError, match="a_field_of_tomorrow"):
        oai.responses.create(model="gpt5", input="Hi", extra_body={"a_field_of_tomorrow": 1})


def test_a_streamed_responses_pass_through_charges_the_key(
    served: tuple[str, Any], emulator: Emulator
) -> None:
    url, app = served
    paying = openai.OpenAI(api_key="paying-key", base_url=url + "/v1", max_retries=0)
    with paying.responses.with_streaming_response.create(
        model="gpt5", input="Hi", stream=True, metadata={"team": "a"}
    ) as raw:
        assert raw.headers["x-metis-path"] == "pass-through"
    with paying.responses.stream(model="gpt5", input="Hi") as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    assert final.model == "gpt5" and final.output_text == "You said: Hi"
    assert _sent(emulator)["stream"] is True and final.usage.output_tokens > 0
    found = app.state.gateway.keys.find("paying-key")
    assert found is not None and found.spent > 0  # the usage response.completed reported
    spent = httpx.get(url + "/metrics").text
    assert 'tokens_total{model="openai_responses:gpt-5",direction="output"}' in spent


@pytest.mark.parametrize("streamed", [False, True])
def test_tools_over_turns_forward_the_id_the_upstream_made(
    oai: Any, emulator: Emulator, streamed: bool
) -> None:
    def ask(**fields: Any) -> Any:
        if not streamed:
            return oai.responses.create(model="gpt5", tools=[WEATHER], **fields)
        with oai.responses.stream(model="gpt5", tools=[WEATHER], **fields) as stream:
            return stream.get_final_response()

    first = ask(input="Weather in Lima?")
    call = next(item for item in first.output if item.type == "function_call")
    assert json.loads(call.arguments) == {"city": "Lima"}
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Mild, 18 C"}
    second = ask(previous_response_id=first.id, input=[result])
    assert "Mild, 18 C" in second.output_text and second.previous_response_id == first.id
    sent = _sent(emulator)  # the upstream holds it: the id goes on, with only the new input
    assert sent["previous_response_id"] == first.id and sent["input"] == [result]
    third = ask(previous_response_id=second.id, input="And tomorrow?")
    assert _sent(emulator)["previous_response_id"] == second.id
    assert third.output_text == "You said: And tomorrow?"


def test_an_id_the_upstream_never_saw_is_sent_as_the_conversation(
    oai: Any, emulator: Emulator
) -> None:
    translated = oai.responses.with_raw_response.create(model="sonnet", input="I am Ada.")
    assert translated.headers["x-metis-path"] == "translated"
    first = translated.parse()
    second = oai.responses.create(model="gpt5", previous_response_id=first.id, input="Who am I?")
    assert second.previous_response_id == first.id  # as the caller gave it
    sent = _sent(emulator)
    assert "previous_response_id" not in sent
    said = [_text(item["content"]) for item in sent["input"]]
    assert said == ["I am Ada.", "You said: I am Ada.", "Who am I?"]
    # and the pass-through's own answer continues on a translated model
    third = oai.responses.create(model="sonnet", previous_response_id=second.id, input="Again?")
    assert third.output_text == "You said: Again?"
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="gpt5", previous_response_id="resp_never", input="Hi")
    assert refused.value.code == "previous_response_not_found"
    assert "resp_never" not in json.dumps(_sent(emulator))  # never forwarded


def test_a_response_kept_nowhere_upstream_is_sent_as_the_conversation(
    oai: Any, emulator: Emulator
) -> None:
    first = oai.responses.create(model="gpt5", input="I am Ada.", store=False)
    with pytest.raises(openai.BadRequestError):  # store: false: the gateway kept none either
        oai.responses.create(model="gpt5", previous_response_id=first.id, input="Who?")
    emulator.reset()
    kept = oai.responses.create(model="gpt5", input="I am Bo.")
    later = oai.responses.create(model="gpt5", previous_response_id=kept.id, input="Who?")
    assert later.output_text == "You said: Who?"


def test_another_upstream_gets_the_conversation_not_the_id() -> None:
    emulator = Emulator()
    adapters = {  # another key: another account, which holds none of the first's responses
        name: {"type": "openai_responses", "api_key_env": variable, "max_retries": 0}
        for name, variable in (("first", "UPSTREAM_KEY"), ("second", "OTHER_KEY"))
    }
    data = {
        "adapters": adapters,
        "models": {
            "first:gpt-5": {"adapter": "first", "aliases": ["one"]},
            "second:gpt-5": {"adapter": "second", "aliases": ["two"]},
        },
        "gateway": {"api_key_env": "GATEWAY_KEY"},
    }
    environ = {"UPSTREAM_KEY": "sk-upstream", "OTHER_KEY": "sk-other", "GATEWAY_KEY": GATEWAY_KEY}
    clients = {name: emulator.client() for name in adapters}
    config = GatewayConfig.from_dict(data, environ=environ, clients=clients)
    with serving(create_app(config)) as (url, _):
        oai = openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)
        first = oai.responses.create(model="one", input="I am Ada.", reasoning={"effort": "low"})
        assert any(item.type == "reasoning" for item in first.output)
        second = oai.responses.create(model="two", previous_response_id=first.id, input="Who?")
    assert second.output_text == "You said: Who?"
    sent = emulator.bodies("openai_responses")[-1]
    assert "previous_response_id" not in sent
    assert [item.get("type", "message") for item in sent["input"]] == ["message"] * 3
    assert not any("id" in item for item in sent["input"])


def test_provider_errors_arrive_as_the_sdks_own_exceptions(oai: Any, emulator: Emulator) -> None:
    emulator.push_fault("rate_limit=7", provider="openai_responses")
    with pytest.raises(openai.RateLimitError) as limited:
        oai.responses.create(model="gpt5", input="Hi")
    assert limited.value.response.headers["retry-after"] == "7"
    emulator.push_fault("auth", provider="openai_responses")
    with (
        pytest.raises(openai.InternalServerError) as refused,  # the gateway's key, not theirs
        oai.responses.stream(model="gpt5", input="Hi") as stream,
    ):
        list(stream)
    assert refused.value.status_code == 502 and refused.value.code == "provider_key_refused"
    assert "sk-upstream" not in refused.value.response.text


@pytest.mark.anyio
async def test_azures_responses_pass_through_as_openais() -> None:
    emulator = Emulator()
    adapter = {"type": "azure_responses", "api_key_env": "AZURE_KEY", "max_retries": 0}
    adapter.update(base_url=emulator.base_url("azure_responses"), settings={"resource": "res"})
    data = {
        "adapters": {"azure": adapter},
        "models": {"azure:my-gpt-5": {"adapter": "azure", "aliases": ["deployed"]}},
    }
    environ = {"AZURE_KEY": "az-key"}
    config = GatewayConfig.from_dict(data, environ=environ, clients={"azure": emulator.client()})
    transport = httpx.ASGITransport(app=create_app(config))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        said = {"model": "deployed", "input": "Hi", "metadata": {"team": "a"}}
        first = await client.post("/v1/responses", json=said)
        assert first.headers["x-metis-path"] == "pass-through"
        assert first.json()["model"] == "deployed"
        again = {"model": "deployed", "input": "Again", "previous_response_id": first.json()["id"]}
        second = await client.post("/v1/responses", json=again)
    assert second.status_code == 200 and second.headers["x-metis-path"] == "pass-through"
    sent = emulator.requests[-1]
    assert sent.headers["api-key"] == "az-key" and sent.json()["model"] == "my-gpt-5"
    assert sent.json()["previous_response_id"] == first.json()["id"]


def test_a_stalled_responses_stream_ends_with_response_failed() -> None:
    emulator = Emulator()
    app = create_app(gateway_config(emulator, {"request_timeout_seconds": 1}))
    with serving(app) as (url, _):
        emulator.push_fault("stall=60", provider="openai_responses")
        said = {"model": "gpt5", "input": "Hi", "stream": True}
        headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
        with httpx.stream("POST", url + "/v1/responses", json=said, headers=headers) as held:
            assert held.headers["x-metis-path"] == "pass-through"
            text = held.read().decode()
    last = text.strip().split("\n\n")[-1]
    assert last.startswith("event: response.failed")
    failed = json.loads(last.split("data: ", 1)[1])
    assert failed["response"]["status"] == "failed" and failed["response"]["model"] == "gpt5"
    assert "longer than the gateway allows" in failed["response"]["error"]["message"]


# The relay, sans-IO --------------------------------------------------------------------------

RESPONSE = {"id": "resp_1", "object": "response", "model": "gpt-5-2025", "output": []}
DONE = {
    **RESPONSE,
    "status": "completed",
    "previous_response_id": None,
    "output": [{"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}],
    "usage": {
        "input_tokens": 20,
        "input_tokens_details": {"cached_tokens": 5},
        "output_tokens": 7,
        "output_tokens_details": {"reasoning_tokens": 3},
    },
}
STREAM = (
    b"event: response.created\ndata: "
    + json.dumps({"type": "response.created", "response": RESPONSE}).encode()
    + b'\n\nevent: response.output_text.delta\ndata: {"type":"response.output_text.delta",'
    b'"delta":"\\"model\\":\\"gpt-5-2025\\""}\n\nevent: response.completed\ndata: '
    + json.dumps({"type": "response.completed", "response": DONE}).encode()
    + b"\n\n"
)


@pytest.mark.parametrize("size", [1, 9, 80, len(STREAM)])
def test_the_responses_relay_changes_only_what_the_gateway_owns(size: int) -> None:
    from metis.gateway.relay_responses import ResponsesRelay
    from metis.model.response import StopKind

    relay = ResponsesRelay("gpt5", "resp_0")
    pieces = [STREAM[i : i + size] for i in range(0, len(STREAM), size)]
    out = b"".join(relay.feed(piece) for piece in pieces) + relay.end()
    delta = STREAM.split(b"\n\n")[1] + b"\n\n"
    assert delta in out  # passed on untouched, byte for byte
    events = [json.loads(e.split(b"data: ", 1)[1]) for e in out.strip().split(b"\n\n")]
    assert [e["response"]["model"] for e in (events[0], events[2])] == ["gpt5", "gpt5"]
    assert events[2]["response"]["previous_response_id"] == "resp_0"
    assert relay.response_id == "resp_1" and relay.output == DONE["output"]
    assert relay.stop is not None and relay.stop.kind is StopKind.TOOL_USE
    assert relay.usage is not None
    assert (relay.usage.input_tokens, relay.usage.cached_input_tokens) == (15, 5)
    assert relay.usage.output_tokens == 7 and relay.usage.reasoning_tokens == 3


@pytest.mark.anyio
async def test_a_stack_whose_upstream_keeps_no_responses_gets_the_conversation() -> None:
    emulator = Emulator()  # open_responses: a server that need not store what it answers
    adapter = {"type": "open_responses", "api_key_env": "KEY", "max_retries": 0}
    data = {
        "adapters": {"open": adapter},
        "models": {"open:gpt-5": {"adapter": "open", "aliases": ["open"]}},
    }
    config = GatewayConfig.from_dict(
        data, environ={"KEY": "k"}, clients={"open": emulator.client()}
    )
    transport = httpx.ASGITransport(app=create_app(config))
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        first = await client.post("/v1/responses", json={"model": "open", "input": "I am Ada."})
        assert first.headers["x-metis-path"] == "pass-through"
        again = {"model": "open", "input": "Who?", "previous_response_id": first.json()["id"]}
        second = await client.post("/v1/responses", json=again)
    assert second.status_code == 200, second.text
    assert second.json()["previous_response_id"] == first.json()["id"]
    sent = emulator.bodies("openai_responses")[-1]
    assert "previous_response_id" not in sent and len(sent["input"]) == 3


@pytest.mark.anyio
async def test_a_passed_through_response_is_kept_in_redis_as_its_items() -> None:
    from metis.gateway.store import RedisResponseStore, Stored
    from metis.model.content import Message

    class Client:  # the two commands the store sends
        def __init__(self) -> None:
            self.kept: dict[str, str] = {}

        async def get(self, key: str) -> str | None:
            return self.kept.get(key)

        async def set(self, key: str, value: str, ex: int) -> None:
            self.kept[key] = value

    store = RedisResponseStore(Client(), seconds=60)
    items = ({"role": "user", "content": "Hi"}, {"type": "function_call", "call_id": "c1"})
    await store.keep("team-a", "resp_a", Stored((), items, "responses:abc"))
    await store.keep("team-a", "resp_c", Stored((), items, holder="responses:abc"))
    await store.put("team-a", "resp_b", [Message.user("Hi")])
    assert await store.get("team-a", "resp_a") == Stored((), items, "responses:abc")
    assert await store.get("team-a", "resp_c") == Stored((), items, holder="responses:abc")
    assert await store.get("team-a", "resp_b") == Stored((Message.user("Hi"),))


def test_the_output_limit_is_lowered_and_said(oai: Any, emulator: Emulator) -> None:
    raw = oai.responses.with_raw_response.create(
        model="gpt5", input="Hi", max_output_tokens=10_000_000
    )
    assert raw.headers["x-metis-path"] == "pass-through"
    assert "max_output_tokens lowered from 10000000" in raw.headers["x-metis-dropped"]
    assert _sent(emulator)["max_output_tokens"] < 10_000_000


@pytest.mark.anyio
@pytest.mark.parametrize("streamed", [False, True])
async def test_a_passed_through_response_reports_its_client_span(streamed: bool) -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")
    exporter = in_memory.InMemorySpanExporter()
    provider = sdk_trace.TracerProvider()
    provider.add_span_processor(export.SimpleSpanProcessor(exporter))
    app = create_app(gateway_config(Emulator(), {"opentelemetry": True}, provider))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        said = {"model": "gpt5", "input": "Hi", "stream": streamed}
        headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
        answer = await client.post("/v1/responses", json=said, headers=headers)
    assert answer.headers["x-metis-path"] == "pass-through"
    clients = [s for s in exporter.get_finished_spans() if s.name == "chat gpt-5"]
    assert len(clients) == 1 and clients[0].attributes["gen_ai.usage.output_tokens"] > 0
    assert "error.type" not in clients[0].attributes  # completed, with its stop reason


class _ReadPastTheDeadline:
    """An upstream whose read fails (as a stalled read does) once the deadline has passed."""

    def __init__(self, first: bytes = b"") -> None:
        from types import SimpleNamespace

        self.clock = SimpleNamespace(received=False)
        self.closed = False
        self.first = first  # what arrives before the read that fails

    async def read(self) -> bytes | None:
        if self.first:
            first, self.first = self.first, b""
            return first
        raise OSError("stalled")

    def translate(self, error: Exception) -> Exception:
        from metis.errors import NetworkError

        return NetworkError("nothing arrived within 1 s", provider="openai_responses")

    async def aclose(self) -> None:
        self.closed = True


@pytest.mark.anyio
async def test_a_read_that_fails_at_the_deadline_ends_as_the_gateway_s_timeout() -> None:
    import anyio

    from metis.errors import AdapterError
    from metis.gateway.errors import GatewayTimeoutError, TimeLimit
    from metis.gateway.models import Target
    from metis.gateway.passthrough import PassThrough
    from metis.gateway.passthrough_call import Passing
    from metis.gateway.relay_responses import ResponsesRelay
    from metis.gateway.service import Gateway
    from metis.model.content import ProviderRaw
    from metis.pipeline.call import Call

    passer = PassThrough(Gateway(gateway_config(Emulator())))
    made_by = ProviderRaw(provider="openai_responses")
    target = Target("gpt5", None, "gpt-5", None, "gpt-5")  # type: ignore[arg-type]
    passing = Passing("responses", target, None, {}, True, made_by)
    passing.call = Call("req_1", "openai_responses", "gpt-5", "gpt-5")
    passing.call.deadline = anyio.current_time() - 0.001
    passing.limit = TimeLimit(30)  # set with the call
    relay = passing.relay = ResponsesRelay("gpt5", None)
    exchange = _ReadPastTheDeadline()
    # nothing relayed yet: the failure is raised, for the caller's error reply with its status
    with pytest.raises(GatewayTimeoutError, match=r"allows: 30 s \(gateway\.request"):
        [chunk async for chunk in passer._chunks(passing, relay, exchange)]  # type: ignore[arg-type]
    assert exchange.closed
    passing.call.deadline = anyio.current_time() + 60  # before it, the read's own error stands
    with pytest.raises(AdapterError, match="nothing arrived within 1 s"):
        [chunk async for chunk in passer._chunks(passing, relay, exchange)]  # type: ignore[arg-type]
    passing.call.deadline = anyio.current_time() - 0.001  # once an event went out: the event
    exchange = _ReadPastTheDeadline(b'event: response.in_progress\ndata: {"type": "x"}\n\n')
    out = b"".join([chunk async for chunk in passer._chunks(passing, relay, exchange)])  # type: ignore[arg-type]
    failed = json.loads(out.split(b"\n\n")[1].split(b"data: ", 1)[1])
    assert failed["type"] == "response.failed" and exchange.closed
    assert "longer than the gateway allows" in failed["response"]["error"]["message"]


def _one_place_app() -> Any:
    """A gateway over an ``open_responses`` upstream whose one key may have one request in
    flight."""
    adapter = {"type": "open_responses", "api_key_env": "KEY", "max_retries": 0}
    one_place = [{"name": "one", "sha256": digest("one-key"), "max_concurrent": 1}]
    data = {
        "adapters": {"open": adapter},
        "models": {"open:gpt-5": {"adapter": "open", "aliases": ["open"]}},
        "gateway": {"keys": one_place},
    }
    clients = {"open": Emulator().client()}
    return create_app(GatewayConfig.from_dict(data, environ={"KEY": "k"}, clients=clients))


@pytest.mark.anyio
async def test_an_answer_redis_fails_to_keep_is_served_and_the_key_gets_its_place_back() -> None:
    """Redis failing as a passed-through answer is kept: the answer was made and charged, so
    it is served (a later previous_response_id naming it is what fails), and the key's one
    place in flight is given back: the next request is served, not refused."""
    from metis.gateway.store import RedisResponseStore

    app = _one_place_app()

    class GoneRedis:
        async def get(self, key: str) -> str | None:
            return None

        async def set(self, key: str, value: str, ex: int) -> None:
            raise ConnectionError("Redis is gone")

    app.state.gateway.stored = RedisResponseStore(GoneRedis(), seconds=60)
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": "Bearer one-key"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        for _ in range(2):
            answer = await client.post(
                "/v1/responses", json={"model": "open", "input": "Hi"}, headers=headers
            )
            assert answer.status_code == 200, answer.text
            assert answer.json()["output"]


@pytest.mark.anyio
async def test_a_request_cancelled_while_its_answer_is_kept_gives_the_key_its_place_back() -> None:
    app = _one_place_app()
    keeping = anyio.Event()

    class HangingStore:
        async def get(self, owner: str, response_id: str) -> None:
            return None

        async def keep(self, *args: Any) -> None:
            keeping.set()
            await anyio.sleep_forever()

    app.state.gateway.stored = HangingStore()
    transport = httpx.ASGITransport(app=app)
    headers = {"authorization": "Bearer one-key"}
    body = {"model": "open", "input": "Hi"}
    async with httpx.AsyncClient(transport=transport, base_url="http://gw") as client:
        async with anyio.create_task_group() as group:
            post = functools.partial(client.post, json=body, headers=headers)
            group.start_soon(post, "/v1/responses")
            await keeping.wait()
            group.cancel_scope.cancel()
        app.state.gateway.stored = ResponseStore(10)
        answer = await client.post("/v1/responses", json=body, headers=headers)
    assert answer.status_code == 200, answer.text
