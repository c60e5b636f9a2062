"""A model's thinking carried through a client of the gateway in the two ways a client's own
API leaves no room for (metis/gateway/conversations.py, metis/gateway/provenance.py):

- a Responses client that keeps its conversation on the server (``store: true``, the openai
  SDK's default) sends reasoning items back by their id alone: the gateway finds the thinking in
  the response it kept (in memory or in Redis) and gives it back to the model that made it;
- an Anthropic-API client of an OpenAI reasoning model: the reasoning item's id travels in the
  thinking block's signature, which the client sends back as it came."""

from __future__ import annotations

import base64
from typing import Any

import httpx
import pytest

from metis.gateway.app import create_app
from metis.gateway.passthrough_call import own_thinking
from metis.gateway.provenance import unwrap, wrap
from metis.gateway.reasoning_items import reasoning_id, reasoning_place
from metis.gateway.store import RedisResponseStore
from metis.model.block import ProviderRaw
from metis.testing.emulator import Emulator
from tests.gateway_fixture import (
    GATEWAY_KEY,
    WEATHER_FUNCTION,
    WEATHER_MESSAGES_TOOL,
    gateway_config,
    gateway_url,
)

TOOL = {"type": "function", **WEATHER_FUNCTION}
WEATHER = WEATHER_MESSAGES_TOOL
GPT = ProviderRaw(provider="openai_responses", model="gpt5")


def test_a_reasoning_items_id_names_its_response_and_place() -> None:
    item_id = reasoning_id("resp_01ABC", 2)
    assert reasoning_place(item_id) == ("resp_01ABC", 2)
    for other in ("rs_e6cb66aa2061", "rs__1", "rs_x_", "rs_x_-1", "msg_x_1", "rs_x_" + "9" * 7):
        assert reasoning_place(other) is None


def test_a_signature_carries_the_items_id_and_reads_nothing_forged() -> None:
    made = GPT.model_copy(update={"data": {"id": "rs_up", "summary": []}})
    maker, opaque = unwrap(wrap(made, "gAAAA"))  # the id alone of the maker's record
    assert (maker, opaque) == (GPT.model_copy(update={"data": {"id": "rs_up"}}), "gAAAA")
    assert unwrap(wrap(GPT, "gAAAA", {"id": "rs_2"}))[0] == GPT.model_copy(
        update={"data": {"id": "rs_2"}}
    )
    assert unwrap(wrap(GPT, "c2ln")) == (GPT, "c2ln")  # none to carry: the earlier form
    for forged in ('["p","m",{"id":5}]', '["p","m",7]', '["p","m",{},{}]'):
        tag = base64.urlsafe_b64encode(forged.encode()).decode().rstrip("=")
        assert unwrap(f"metis1.{tag}.sig") == (None, f"metis1.{tag}.sig")  # a foreign one


def test_a_pass_through_gives_the_provider_its_own_item_id_back() -> None:
    """A reasoning item the gateway named (a translated response's) goes to its maker's
    upstream under the id that upstream gave it."""
    sealed = wrap(GPT, "gAAAA", {"id": "rs_upstream"})
    item = {"type": "reasoning", "id": "rs_01GATEWAY_0", "summary": [], "encrypted_content": sealed}
    body: dict[str, Any] = {"model": "gpt5", "input": [item]}
    assert own_thinking(body, GPT)
    assert body["input"][0] == {**item, "id": "rs_upstream", "encrypted_content": "gAAAA"}


def _sent_back(output: list[Any]) -> list[dict[str, Any]]:
    """The output items as the openai SDK's users send them back (``store: true``: no
    encrypted content)."""
    return [item.model_dump(exclude_none=True) for item in output]


def _claude_thinking(emulator: Emulator) -> list[dict[str, Any]]:
    """The thinking blocks the last request to the Anthropic upstream sent back."""
    last = emulator.bodies("anthropic")[-1]["messages"]
    blocks = [b for m in last if isinstance(m["content"], list) for b in m["content"]]
    return [b for b in blocks if b["type"] == "thinking"]


@pytest.mark.parametrize("streamed", [False, True])
def test_reasoning_items_sent_back_by_id_reach_their_model(
    streamed: bool, oai: Any, emulator: Emulator
) -> None:
    items: list[Any] = [{"role": "user", "content": "Weather in Oslo?"}]
    asked: dict[str, Any] = {"model": "sonnet", "tools": [TOOL], "reasoning": {"effort": "low"}}
    if streamed:
        with oai.responses.stream(input=items, **asked) as stream:
            first = stream.get_final_response()
    else:
        first = oai.responses.create(input=items, **asked)
    reasoning = next(item for item in first.output if item.type == "reasoning")
    call = next(item for item in first.output if item.type == "function_call")
    assert reasoning.encrypted_content is None and reasoning_place(reasoning.id) == (first.id, 0)
    assert reasoning.summary == []  # none asked (reasoning.summary), none written, as OpenAI
    result = {"type": "function_call_output", "call_id": call.call_id, "output": "Cold"}
    items += [*_sent_back(first.output), result]
    answer = oai.responses.with_raw_response.create(input=items, **asked)
    assert "x-metis-dropped" not in answer.headers
    assert "Cold" in answer.parse().output_text
    # the emulator refuses a signature it did not give that very thinking (strict_signatures)
    (thinking,) = _claude_thinking(emulator)
    assert thinking["thinking"] and thinking["signature"]  # its own text, from the kept reply
    assert not thinking["signature"].startswith("metis1.")


def test_an_id_the_gateway_did_not_keep_is_left_out_and_reported(oai: Any) -> None:
    """Not kept (``store: false``), never made, a provider's own: as before."""
    first = oai.responses.create(
        model="sonnet", input="Hi", reasoning={"effort": "low"}, store=False
    )
    (unkept,) = [item for item in _sent_back(first.output) if item["type"] == "reasoning"]
    never = {"type": "reasoning", "id": reasoning_id("resp_01NEVERMADE", 0), "summary": []}
    foreign = {"type": "reasoning", "id": "rs_e6cb66aa2061c729a6cb", "summary": []}
    items = [{"role": "user", "content": "Hi"}, unkept, never, foreign]
    items.append({"role": "user", "content": "Again"})
    answer = oai.responses.with_raw_response.create(model="sonnet", input=items)
    dropped = "input[1] (reasoning); input[2] (reasoning); input[3] (reasoning)"
    assert answer.headers["x-metis-dropped"] == dropped


def test_reasoning_items_sent_back_by_id_are_found_in_redis(
    redis_url: str, emulator: Emulator
) -> None:
    """Kept by one gateway, found by another over the same Redis (as replicas are)."""
    openai = pytest.importorskip("openai")
    asked: dict[str, Any] = {"model": "sonnet", "tools": [TOOL], "reasoning": {"effort": "low"}}
    items: list[Any] = [{"role": "user", "content": "Weather in Paris?"}]
    with gateway_url(emulator, redis_url=redis_url) as one:
        client = openai.OpenAI(api_key=GATEWAY_KEY, base_url=one + "/v1", max_retries=0)
        first = client.responses.create(input=items, **asked)
        client.close()
    call = next(item for item in first.output if item.type == "function_call")
    items += [
        *_sent_back(first.output),
        {"type": "function_call_output", "call_id": call.call_id, "output": "Mild"},
    ]
    with gateway_url(emulator, redis_url=redis_url) as other:
        client = openai.OpenAI(api_key=GATEWAY_KEY, base_url=other + "/v1", max_retries=0)
        answer = client.responses.with_raw_response.create(input=items, **asked)
        client.close()
    assert "x-metis-dropped" not in answer.headers
    assert len(_claude_thinking(emulator)) == 1


@pytest.mark.parametrize("streamed", [False, True])
def test_an_anthropic_client_keeps_an_openai_models_reasoning_over_tool_steps(
    streamed: bool, claude: Any, emulator: Emulator
) -> None:
    """gpt-5 behind the Messages API, a tool call and then its result: the second request
    gives the model back the reasoning item it wrote, by its id, with its encrypted
    content."""
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    asked: dict[str, Any] = {
        "model": "gpt5",
        "max_tokens": 3000,
        "tools": [WEATHER],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    replies = []
    for _ in range(2):
        if streamed:
            with claude.messages.stream(messages=messages, **asked) as stream:
                reply = stream.get_final_message()
        else:
            reply = claude.messages.create(messages=messages, **asked)
        replies.append(reply)
        call = next((block for block in reply.content if block.type == "tool_use"), None)
        if call is None:
            break
        result = {"type": "tool_result", "tool_use_id": call.id, "content": "Cold"}
        messages += [
            {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
            {"role": "user", "content": [result]},
        ]
    assert [reply.stop_reason for reply in replies] == ["tool_use", "end_turn"]
    assert "Cold" in replies[1].content[-1].text
    first, second = emulator.bodies("openai_responses")[-2:]
    assert [item["type"] for item in first["input"]] == ["message"]
    (sent,) = [item for item in second["input"] if item["type"] == "reasoning"]
    thinking = replies[0].content[0]
    maker, encrypted = unwrap(thinking.signature)
    assert maker is not None and maker.provider == "openai_responses"
    assert sent["id"] == maker.data["id"] and sent["encrypted_content"] == encrypted
    assert [item["type"] for item in second["input"]][1:3] == ["reasoning", "function_call"]


def test_an_openai_models_reasoning_goes_to_no_other_model(claude: Any) -> None:
    asked: dict[str, Any] = {
        "max_tokens": 3000,
        "tools": [WEATHER],
        "thinking": {"type": "enabled", "budget_tokens": 1024},
    }
    messages: list[dict[str, Any]] = [{"role": "user", "content": "Weather in Oslo?"}]
    reply = claude.messages.create(model="gpt5", messages=messages, **asked)
    call = next(block for block in reply.content if block.type == "tool_use")
    messages += [
        {"role": "assistant", "content": [b.model_dump() for b in reply.content]},
        {
            "role": "user",
            "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "Cold"}],
        },
    ]
    answer = claude.messages.with_raw_response.create(model="sonnet", messages=messages, **asked)
    assert "thinking (it was produced by openai_responses" in answer.headers["x-metis-dropped"]


@pytest.mark.anyio
async def test_a_reasoning_item_redis_cannot_read_is_the_retried_overloaded_error(
    emulator: Emulator,
) -> None:
    """As for a previous_response_id it cannot read: not served as if the thinking were
    gone, and the store's address not sent."""

    class GoneRedis:
        async def get(self, key: str) -> str | None:
            raise ConnectionError("redis://10.0.0.7:6379 is gone")

    app = create_app(gateway_config(emulator))
    app.state.gateway.stored = RedisResponseStore(GoneRedis(), seconds=60)
    item = {"type": "reasoning", "id": reasoning_id("resp_01KEPT", 0), "summary": []}
    body = {"model": "sonnet", "input": [{"role": "user", "content": "Hi"}, item]}
    headers = {"authorization": f"Bearer {GATEWAY_KEY}"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app), base_url="http://gw"
    ) as client:
        answer = await client.post("/v1/responses", json=body, headers=headers)
    assert answer.status_code == 503 and answer.headers["retry-after"] == "1"
    assert "10.0.0.7" not in answer.text
