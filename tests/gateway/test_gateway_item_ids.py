"""``GET /v1/responses/{id}/input_items`` lists each item of a conversation under the id its
client saw it with, through the official openai SDK: an earlier reply's output items under
their ids in that response, an input item under the id the client gave it, and one sent
without an id under the same made id at each later response of the conversation; translated
(kept canonical) and passed through, in memory and in Redis."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
MODELS = ["flash", "gpt5"]  # translated; passed through
TOOLS = [{"type": "function", **WEATHER_FUNCTION}]
CALLS = ("function_call", "function_call_output")


@pytest.fixture(scope="module", params=["memory", "redis"])
def oai(request: pytest.FixtureRequest) -> Iterator[Any]:
    settings: dict[str, Any] = {}
    if request.param == "redis":
        settings["redis_url"] = request.getfixturevalue("redis_url")
    with serving(create_app(gateway_config(Emulator(), settings or None))) as (url, _):
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)


def listed(oai: Any, response_id: str) -> list[Any]:
    return list(oai.responses.input_items.list(response_id, order="asc"))


@pytest.mark.parametrize("model", MODELS)
def test_earlier_replies_and_inputs_keep_the_ids_they_were_seen_with(oai: Any, model: str) -> None:
    first = oai.responses.create(model=model, input="My name is Ada.")
    second = oai.responses.create(model=model, input="I keep bees.", previous_response_id=first.id)
    third = oai.responses.create(model=model, input="In Lyon.", previous_response_id=second.id)
    once, twice, thrice = (listed(oai, r.id) for r in (first, second, third))
    said = [message(twice), message(thrice)]
    assert [item.id for item in said[0]] == [
        once[0].id,  # the first input, under the id its own listing gave it
        message(first.output)[0].id,  # the first reply, under its id in the first response
        said[0][2].id,
    ]
    assert [item.id for item in said[1][:3]] == [item.id for item in said[0]]
    assert said[1][3].id == message(second.output)[0].id
    assert {item.id for item in first.output} <= {item.id for item in thrice}  # reasoning too
    assert len({item.id for item in thrice}) == len(thrice)
    assert [item.id for item in listed(oai, third.id)] == [item.id for item in thrice]


def message(items: list[Any]) -> list[Any]:
    return [item for item in items if item.type == "message"]


@pytest.mark.parametrize("model", MODELS)
def test_a_tool_call_and_its_output_keep_their_ids(oai: Any, model: str) -> None:
    asked = oai.responses.create(
        model=model, input="What is the weather in Paris?", tools=TOOLS, tool_choice="required"
    )
    (call,) = [item for item in asked.output if item.type == "function_call"]
    answered = oai.responses.create(
        model=model,
        previous_response_id=asked.id,
        tools=TOOLS,
        input=[
            {"type": "function_call_output", "call_id": call.call_id, "output": "sunny, 21 C"},
            {"type": "message", "id": "msg_from_the_client", "role": "user", "content": "Thanks"},
        ],
    )
    items = listed(oai, answered.id)
    by_type = {item.type: item for item in items if item.type in CALLS}
    assert by_type["function_call"].id == call.id
    assert by_type["function_call"].call_id == call.call_id
    output = by_type["function_call_output"]
    assert output.call_id == call.call_id and output.id
    assert items[-1].id == "msg_from_the_client"
    later = oai.responses.create(model=model, previous_response_id=answered.id, input="Bye")
    again = {item.type: item.id for item in listed(oai, later.id) if item.type in CALLS}
    assert again == {"function_call": call.id, "function_call_output": output.id}


def test_a_message_said_twice_is_listed_under_two_ids(oai: Any) -> None:
    first = oai.responses.create(model="flash", input="Again")
    second = oai.responses.create(model="flash", input="Again", previous_response_id=first.id)
    items = listed(oai, second.id)
    assert [json.loads(item.to_json())["role"] for item in items] == ["user", "assistant", "user"]
    assert len({item.id for item in items}) == 3
    assert items[0].id == listed(oai, first.id)[0].id


@pytest.mark.parametrize("model", MODELS)
def test_a_message_said_again_keeps_the_id_the_client_gave_it(oai: Any, model: str) -> None:
    first = oai.responses.create(
        model=model, input=[{"type": "message", "id": "msg_a1", "role": "user", "content": "Again"}]
    )
    second = oai.responses.create(
        model=model,
        previous_response_id=first.id,
        input=[{"type": "message", "id": "msg_a2", "role": "user", "content": "Again"}],
    )
    users = [item.id for item in message(listed(oai, second.id)) if item.role == "user"]
    assert users == ["msg_a1", "msg_a2"]
