"""A stored Responses response read back through the official openai SDK: retrieved as its
client received it (whole, or a stream's final state), its input items listed, deleted, and
none of it visible to another key; passed through and translated, kept in memory or in
Redis (metis.gateway.responses_kept)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.gateway.app import create_app
from metis.gateway.keys import digest
from metis.testing.emulator import Emulator
from tests.gateway_fixture import gateway_config, serving

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")

KEYS = [
    {"name": "team-a", "sha256": digest("team-a-key")},
    {"name": "team-b", "sha256": digest("team-b-key")},
]
MODELS = ["gpt5", "flash"]  # passed through; translated


@pytest.fixture(scope="module", params=["memory", "redis"])
def gateway(request: pytest.FixtureRequest) -> Iterator[str]:
    settings: dict[str, Any] = {"keys": KEYS}
    if request.param == "redis":
        settings["redis_url"] = request.getfixturevalue("redis_url")
    with serving(create_app(gateway_config(Emulator(), settings))) as (url, _):
        yield url


def client(url: str, key: str = "team-a-key") -> Any:
    return openai.OpenAI(api_key=key, base_url=url + "/v1", max_retries=0)


def streamed(oai: Any, **create: Any) -> Any:
    """The response a streamed create ended with (its ``response.completed`` event's)."""
    events = list(oai.responses.create(stream=True, **create))
    assert events[-1].type == "response.completed"
    return events[-1].response


def texts(items: list[Any]) -> list[str]:
    """Each message item's text, in order."""
    return [part.text for item in items if item.type == "message" for part in item.content]


def not_found(call: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    with pytest.raises(openai.NotFoundError) as caught:
        call(*args, **kwargs)
    assert caught.value.status_code == 404
    body: dict[str, Any] = caught.value.response.json()
    return body


@pytest.mark.parametrize("model", MODELS)
def test_a_whole_response_is_retrieved_as_it_was_received(gateway: str, model: str) -> None:
    oai = client(gateway)
    created = oai.responses.create(model=model, input="Say hello.")
    retrieved = oai.responses.retrieve(created.id)
    assert retrieved.to_dict() == created.to_dict()
    assert retrieved.status == "completed" and retrieved.output_text == created.output_text
    assert retrieved.usage is not None and retrieved.usage.total_tokens > 0


@pytest.mark.parametrize("model", MODELS)
def test_a_streamed_response_is_retrieved_in_its_final_state(gateway: str, model: str) -> None:
    oai = client(gateway)
    final = streamed(oai, model=model, input="Say hello.")
    retrieved = oai.responses.retrieve(final.id)
    assert retrieved.to_dict() == final.to_dict()
    assert retrieved.status == "completed" and retrieved.output_text
    assert [item.id for item in retrieved.output] == [item.id for item in final.output]


@pytest.mark.parametrize("model", MODELS)
def test_input_items_are_the_conversation_newest_first(gateway: str, model: str) -> None:
    oai = client(gateway)
    first = oai.responses.create(model=model, input="I am Ada.")
    second = oai.responses.create(model=model, input="Who am I?", previous_response_id=first.id)
    newest = oai.responses.input_items.list(second.id)
    oldest = oai.responses.input_items.list(second.id, order="asc")
    assert texts(oldest.data) == ["I am Ada.", first.output_text, "Who am I?"]
    assert [item.id for item in newest.data] == [item.id for item in reversed(oldest.data)]
    messages = [item for item in oldest.data if item.type == "message"]
    assert [item.role for item in messages] == ["user", "assistant", "user"]
    assert {item.id for item in first.output} <= {item.id for item in oldest.data} or (
        model == "flash"  # a translated reply is kept canonical: its items get new ids
    )
    assert newest.first_id == newest.data[0].id and newest.last_id == newest.data[-1].id
    assert not newest.has_more
    again = oai.responses.input_items.list(second.id, order="asc")
    assert again.to_dict() == oldest.to_dict()  # the ids given are the same at each asking
    assert texts(oai.responses.input_items.list(first.id).data) == ["I am Ada."]


@pytest.mark.parametrize("model", MODELS)
def test_input_items_come_a_page_at_a_time(gateway: str, model: str) -> None:
    oai = client(gateway)
    first = oai.responses.create(model=model, input="One.")
    second = oai.responses.create(model=model, input="Two.", previous_response_id=first.id)
    whole = oai.responses.input_items.list(second.id, order="asc").data
    page = oai.responses.input_items.list(second.id, order="asc", limit=1)
    assert page.has_more and [item.id for item in page.data] == [whole[0].id]
    paged = list(oai.responses.input_items.list(second.id, order="asc", limit=1))
    assert [item.id for item in paged] == [item.id for item in whole]
    after = oai.responses.input_items.list(second.id, order="asc", after=whole[0].id, limit=1)
    assert [item.id for item in after.data] == [whole[1].id] and after.has_more


@pytest.mark.parametrize("model", MODELS)
def test_a_deleted_response_is_gone(gateway: str, model: str) -> None:
    oai = client(gateway)
    created = oai.responses.create(model=model, input="Remember me.")
    raw = oai.responses.with_raw_response.delete(created.id)
    assert raw.http_response.json() == {"id": created.id, "object": "response", "deleted": True}
    unknown = not_found(oai.responses.retrieve, "resp_never_made")
    gone = not_found(oai.responses.retrieve, created.id)
    assert gone["error"]["message"].replace(created.id, "<id>") == unknown["error"][
        "message"
    ].replace("resp_never_made", "<id>")
    assert gone["error"]["type"] == "invalid_request_error"
    not_found(oai.responses.input_items.list, created.id)
    not_found(oai.responses.delete, created.id)
    with pytest.raises(openai.BadRequestError) as caught:
        oai.responses.create(model=model, input="And?", previous_response_id=created.id)
    assert caught.value.body["code"] == "previous_response_not_found"


@pytest.mark.parametrize("model", MODELS)
def test_another_keys_response_is_not_found(gateway: str, model: str) -> None:
    created = client(gateway).responses.create(model=model, input="Mine.")
    other = client(gateway, "team-b-key")

    def masked(body: dict[str, Any]) -> dict[str, Any]:
        body["error"]["message"] = body["error"]["message"].replace(created.id, "<id>")
        return body

    unknown = not_found(other.responses.retrieve, "resp_never_made")
    unknown["error"]["message"] = unknown["error"]["message"].replace("resp_never_made", "<id>")
    assert masked(not_found(other.responses.retrieve, created.id)) == unknown
    assert masked(not_found(other.responses.input_items.list, created.id)) == unknown
    assert masked(not_found(other.responses.delete, created.id)) == unknown
    assert client(gateway).responses.retrieve(created.id).id == created.id  # still its own


def test_a_response_not_stored_is_not_found(gateway: str) -> None:
    oai = client(gateway)
    created = oai.responses.create(model="flash", input="Forget me.", store=False)
    not_found(oai.responses.retrieve, created.id)


def test_what_is_not_served_is_refused_by_name(gateway: str) -> None:
    oai = client(gateway)
    created = oai.responses.create(model="flash", input="Hi.")
    with pytest.raises(openai.BadRequestError, match="does not replay a stored response"):
        oai.responses.retrieve(created.id, stream=True)
    with pytest.raises(openai.BadRequestError, match="unsupported query parameter 'include"):
        oai.responses.input_items.list(created.id, include=["message.input_image.image_url"])
    with pytest.raises(openai.BadRequestError, match="limit: expected an integer from 1 to 100"):
        oai.responses.input_items.list(created.id, limit=0)
    with pytest.raises(openai.BadRequestError, match="after: no input item"):
        oai.responses.input_items.list(created.id, after="msg_nowhere")


class FakeRedis:
    def __init__(self) -> None:
        self.kept: dict[str, str] = {}

    async def get(self, key: str) -> str | None:
        return self.kept.get(key)

    async def set(self, key: str, value: str, ex: int) -> None:
        self.kept[key] = value

    async def delete(self, keys: list[str]) -> int:
        return sum(self.kept.pop(key, None) is not None for key in keys)


@pytest.mark.anyio
async def test_redis_keeps_a_passed_through_output_once() -> None:
    from metis.gateway.store import RedisResponseStore, Stored

    redis = FakeRedis()
    store = RedisResponseStore(redis, seconds=60)
    output = [{"id": "msg_1", "type": "message", "role": "assistant", "content": []}]
    response = {"id": "resp_a", "object": "response", "output": output, "usage": None}
    kept = Stored((), ({"role": "user", "content": "Hi"}, *output), None, response)
    await store.keep("team-a", "resp_a", kept)
    (record,) = redis.kept.values()
    assert record.count('"msg_1"') == 1
    found = await store.get("team-a", "resp_a")
    assert found == kept and found is not None and found.response is not None
    assert list(found.response) == list(response)  # its members in their order
    assert await store.forget("team-a", "resp_a") and not redis.kept
    assert not await store.forget("team-a", "resp_a")


@pytest.mark.anyio
async def test_redis_reads_a_conversation_kept_before_responses_were() -> None:
    import json

    from metis.gateway.store import RedisResponseStore
    from metis.model.content import Message

    redis = FakeRedis()
    store = RedisResponseStore(redis, seconds=60)
    await store.put("", "resp_b", [Message.user("Hi")])
    key = next(iter(redis.kept))
    redis.kept[key] = json.dumps([Message.user("Hi").model_dump(mode="json", exclude_none=True)])
    found = await store.get("", "resp_b")
    assert found is not None and found.messages == (Message.user("Hi"),)
    assert found.response is None  # continued still, but not retrieved: 404


def test_two_gateways_over_one_redis_read_back_each_others_responses(redis_url: str) -> None:
    settings: dict[str, Any] = {"keys": KEYS, "redis_url": redis_url}
    emulator = Emulator()
    one = create_app(gateway_config(emulator, settings))
    other = create_app(gateway_config(emulator, settings))
    with serving(one) as (first_url, _), serving(other) as (second_url, _):
        created = client(first_url).responses.create(model="flash", input="Hi.")
        assert client(second_url).responses.retrieve(created.id).to_dict() == created.to_dict()
        client(second_url).responses.delete(created.id)
        not_found(client(first_url).responses.retrieve, created.id)


@pytest.mark.parametrize(
    "left",
    [
        b"not json{",
        b"42",
        b"[1, 2]",
        b'{"x": 1}',
        b'{"messages": "no"}',
        b"\xff\xfe",
        b'{"messages": [], "ids": "no"}',  # continuing it was a bare 500
        b'{"items": "abc"}',  # continuing it was a 400 blaming the client's input[0]
        b'{"items": [1, 2]}',
        b'{"items": [], "upstream": 5}',
        b'{"messages": [], "response": {"output": [], "id": 3}}',  # retrieved as it was
    ],
)
def test_a_stored_value_the_gateway_did_not_write_is_a_classified_error(
    redis_url: str, left: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """Someone else's value (or a truncated one) under a stored response's key: reading it
    back or continuing from it is the gateway's classified 500, the key named for the
    operator in the log; before, a bare JSONDecodeError, AttributeError or KeyError."""
    import anyio
    import coredis

    settings: dict[str, Any] = {"keys": KEYS, "redis_url": redis_url}
    with serving(create_app(gateway_config(Emulator(), settings))) as (url, _):
        oai = client(url)
        created = oai.responses.create(model="flash", input="Hi.")

        async def overwrite() -> None:
            async with coredis.Redis.from_url(redis_url) as redis:
                (key,) = await redis.keys(f"*:{created.id}")
                await redis.set(key, left)

        anyio.run(overwrite)
        with pytest.raises(openai.InternalServerError) as read:
            oai.responses.retrieve(created.id)
        with pytest.raises(openai.InternalServerError) as continued:
            oai.responses.create(model="flash", input="And?", previous_response_id=created.id)
    for caught in (read, continued):
        error = caught.value.response.json()["error"]
        assert created.id in error["message"] and "could not be read" in error["message"]
        assert caught.value.response.headers["x-should-retry"] == "false"
    assert "internal gateway error" not in caplog.text
