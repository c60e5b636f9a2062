"""A Responses conversation belongs to the gateway key that made it: another key naming its
``previous_response_id`` gets the 400 of an id never made, passed through or translated, with
the conversations in memory or in Redis."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")

KEYS = [
    {"name": "team-a", "sha256": digest("team-a-key")},
    {"name": "team-b", "sha256": digest("team-b-key")},
]


@pytest.fixture(scope="module", params=["memory", "redis"])
def gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    settings: dict[str, Any] = {"keys": KEYS}
    if request.param == "redis":
        settings["redis_url"] = request.getfixturevalue("redis_url")
    with serving(create_app(gateway_config(Emulator(), settings))) as (url, _):
        yield url


def client(url: str, key: str) -> Any:
    return openai.OpenAI(api_key=key, base_url=url + "/v1", max_retries=0)


def refusal(url: str, key: str, model: str, previous: str) -> tuple[int, Any]:
    with pytest.raises(openai.BadRequestError) as caught:
        client(url, key).responses.create(model=model, input="And?", previous_response_id=previous)
    body = caught.value.response.json()
    body["error"]["message"] = body["error"]["message"].replace(previous, "<id>")
    return caught.value.status_code, body


@pytest.mark.parametrize("model", ["gpt5", "flash"])  # passed through; translated
def test_another_keys_response_is_as_unknown_as_one_never_made(gateway: str, model: str) -> None:
    started = client(gateway, "team-a-key").responses.create(model=model, input="I am Ada.")
    again = client(gateway, "team-a-key").responses.create(
        model=model, input="Who am I?", previous_response_id=started.id
    )
    assert again.previous_response_id == started.id  # its own key goes on
    foreign = refusal(gateway, "team-b-key", model, started.id)
    unknown = refusal(gateway, "team-b-key", model, "resp_never_made")
    assert foreign == unknown
    assert foreign[0] == 400 and foreign[1]["error"]["code"] == "previous_response_not_found"
    assert refusal(gateway, GATEWAY_KEY, model, started.id) == unknown  # the simple key too


@pytest.mark.parametrize("model", ["gpt5", "flash"])
def test_the_simple_keys_responses_are_its_own(gateway: str, model: str) -> None:
    started = client(gateway, GATEWAY_KEY).responses.create(model=model, input="I am Grace.")
    again = client(gateway, GATEWAY_KEY).responses.create(
        model=model, input="Who am I?", previous_response_id=started.id
    )
    assert again.previous_response_id == started.id
    assert refusal(gateway, "team-a-key", model, started.id)[0] == 400


def test_two_keys_of_one_name_are_refused() -> None:
    from metis.errors import ConfigError

    twice = [{**KEYS[0]}, {**KEYS[1], "name": "team-a"}]
    with pytest.raises(ConfigError, match=r"gateway\.keys.*two keys are named 'team-a'"):
        gateway_config(Emulator(), {"keys": twice})
