"""``POST /v1/responses/compact`` through the official openai SDK (``responses.compact``): a
model of OpenAI's Responses API has it passed through to its own compact endpoint (the body as
the client wrote it, a stored conversation for ``previous_response_id``, the key charged the
pass, refused once its budget is spent), and its compacted window carries the conversation on;
any other model, or a conversation holding another model's thinking, is a 400 that says why,
never a 405."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from metis.cost import cost_of
from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.model.response import TokenUsage
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
TALK = [
    {"role": "user", "content": "My name is Ada and I keep bees in Lyon."},
    {"role": "assistant", "content": "Nice to meet you, Ada. How many hives do you keep?"},
    {"role": "user", "content": "Twelve hives, on the roof of the old silk mill."},
]
KEYS = [
    {"name": "team", "sha256": digest("team-key"), "budget_usd": 10},
    {"name": "narrow", "sha256": digest("narrow-key"), "models": ["flash"]},
    {"name": "spent", "sha256": digest("spent-key"), "budget_usd": "0.000001"},
]


@contextmanager
def _gateway(key: str = GATEWAY_KEY) -> Iterator[tuple[Any, Emulator, Any, str]]:
    emulator = Emulator()
    app = create_app(gateway_config(emulator, {"keys": KEYS}))
    with serving(app) as (url, _):
        sdk = openai.OpenAI(api_key=key, base_url=f"{url}/v1", max_retries=0)
        yield sdk, emulator, app.state.gateway, url


def _compactions(emulator: Emulator) -> list[dict[str, Any]]:
    return [json.loads(r.body) for r in emulator.requests if r.path == "/v1/responses/compact"]


def test_a_responses_model_compacts_the_conversation_as_the_client_sent_it() -> None:
    with _gateway() as (sdk, emulator, _, url):
        raw = sdk.responses.with_raw_response.compact(
            model="gpt5", input=TALK, instructions="Keep the names."
        )
        compacted = raw.parse()
        went_on = sdk.responses.create(
            model="gpt5",
            input=[
                *[item.model_dump(exclude_none=True, warnings=False) for item in compacted.output],
                {"role": "user", "content": "And?"},
            ],
        )
        metrics = httpx.get(f"{url}/metrics").text
    assert raw.headers["x-metis-path"] == "pass-through"
    assert compacted.object == "response.compaction"
    assert compacted.output[-1].type == "compaction" and compacted.output[-1].encrypted_content
    assert [item.role for item in compacted.output[:-1]] == ["user", "user"]
    assert compacted.usage.input_tokens > 0
    assert _compactions(emulator) == [
        {"model": "gpt-5", "input": TALK, "instructions": "Keep the names."}
    ]
    assert went_on.status == "completed"
    assert (
        'metis_gateway_requests_total{api="responses",endpoint="POST /v1/responses/compact",'
        'model="gpt5",status="200"} 1'
    ) in metrics


def test_a_previous_response_is_compacted_with_the_conversation_it_ends() -> None:
    with _gateway() as (sdk, emulator, _, _url):
        first = sdk.responses.create(model="flash", input=TALK)  # translated, kept by the gateway
        compacted = sdk.responses.compact(
            model="gpt5", previous_response_id=first.id, input="What do you know of me?"
        )
        with pytest.raises(openai.BadRequestError) as unknown:
            sdk.responses.compact(model="gpt5", previous_response_id="resp_none")
    sent = _compactions(emulator)[0]
    assert "previous_response_id" not in sent and "store" not in sent  # the upstream never saw it
    assert json.dumps(TALK[0]["content"]) in json.dumps(sent["input"])
    assert sent["input"][-1] == {"role": "user", "content": "What do you know of me?"}
    assert compacted.output[-1].type == "compaction"
    assert "resp_none" in unknown.value.message


@pytest.mark.anyio
async def test_the_key_is_charged_the_compaction_and_held_to_its_models() -> None:
    with _gateway("team-key") as (sdk, _, gateway, _url):
        sdk.responses.compact(model="gpt5", input=TALK)
        assert await gateway.keys.spent("team") > 0
    with _gateway("narrow-key") as (sdk, emulator, _, _url):
        with pytest.raises(openai.PermissionDeniedError):
            sdk.responses.compact(model="gpt5", input=TALK)
        assert _compactions(emulator) == []
    with _gateway("spent-key") as (sdk, emulator, _, _url):
        sdk.responses.compact(model="gpt5", input=TALK)  # spends it all
        with pytest.raises(openai.RateLimitError, match="spent its budget"):
            sdk.responses.compact(model="gpt5", input=TALK)
        assert len(_compactions(emulator)) == 1


@pytest.mark.anyio
async def test_a_compaction_whose_answer_reports_no_usage_is_charged_its_estimate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An upstream answering without ``usage`` does not let a key compact for free: the pass
    is charged the catalog's prices over the gateway's estimate of what was sent, as a reply
    with no usage is, and a spent budget refuses the next one."""
    from metis.testing.emulator.formats import responses as emulated_responses

    answered = emulated_responses.compacted_response

    def without_usage(*args: Any) -> dict[str, Any]:
        answer = answered(*args)
        del answer["usage"]
        return answer

    monkeypatch.setattr(emulated_responses, "compacted_response", without_usage)
    with _gateway("team-key") as (sdk, _, gateway, _url):
        compacted = sdk.responses.compact(model="gpt5", input=TALK)
        spent = await gateway.keys.spent("team")
        metrics = gateway.metrics.render()
    assert compacted.usage is None  # the client sees the answer as the upstream gave it
    estimate = int(len(json.dumps({"model": "gpt-5", "input": TALK})) / 4)
    assert spent == cost_of("openai_responses:gpt-5", TokenUsage(input_tokens=estimate)).usd > 0
    tokens = 'metis_gateway_tokens_total{model="openai_responses:gpt-5",direction="input"}'
    assert f"{tokens} {estimate}\n" in metrics
    with _gateway("spent-key") as (sdk, emulator, _, _url):
        sdk.responses.compact(model="gpt5", input=TALK)  # spends it all
        with pytest.raises(openai.RateLimitError, match="spent its budget"):
            sdk.responses.compact(model="gpt5", input=TALK)
        assert len(_compactions(emulator)) == 1


def test_a_conversation_holding_another_models_thinking_cannot_compact() -> None:
    with _gateway() as (sdk, emulator, _, _url):
        thought = sdk.responses.create(model="sonnet", input=TALK, reasoning={"effort": "low"})
        assert any(item.type == "reasoning" for item in thought.output)
        sent_back = [item.model_dump(exclude_none=True, warnings=False) for item in thought.output]
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.responses.compact(model="gpt5", input=[*TALK, *sent_back])
    assert "cannot compact this conversation" in refused.value.message
    assert refused.value.code == "unsupported_value"
    assert _compactions(emulator) == []


@pytest.mark.parametrize("model", ["flash", "sonnet", "gpt", "fallback"])
def test_another_model_cannot_compact_and_is_told_so(model: str) -> None:
    with _gateway() as (sdk, emulator, _, _url):
        with pytest.raises(openai.BadRequestError) as refused:
            sdk.responses.compact(model=model, input=TALK)
        with pytest.raises(openai.NotFoundError):
            sdk.responses.compact(model="no-such-model", input=TALK)
    assert refused.value.status_code == 400
    assert f"model {model!r} cannot compact" in refused.value.message
    assert refused.value.body["type"] == "invalid_request_error"
    assert refused.value.code == "unsupported_value"
    assert _compactions(emulator) == []
