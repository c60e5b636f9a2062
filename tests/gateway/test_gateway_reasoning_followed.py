"""A Responses request whose reasoning item (named by its id) is followed by an assistant
message with no ``id``: OpenAI refuses it, "Item 'rs_...' of type 'reasoning' was provided
without its required following item." (mastra-ai/mastra#11103; the same input with the
message's ``id`` is taken). Passed through to a Responses upstream, the gateway answers as
OpenAI does (the emulator, standing in for OpenAI, took it); translated, it is read (the
reasoning item, which carries no encrypted content, left out and named)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.testing.emulator import Emulator
from metis.wire.responses_rules import tool_items
from tests.gateway_fixture import GATEWAY_KEY, gateway_url

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")
ASKED: Any = {"role": "user", "content": "What is 2+2?"}


@pytest.fixture(scope="module")
def oai() -> Iterator[Any]:
    with gateway_url(Emulator()) as url:
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0)


def _replayed(oai: Any, keep_message_id: bool) -> list[Any]:
    """gpt-5's first turn as a client sends it back: its reasoning item as given, its answer
    as an assistant message (with or without the item's ``id``)."""
    first = oai.responses.create(model="gpt5", input=[ASKED], reasoning={"effort": "low"})
    reasoning, message = first.output
    answer = {"role": "assistant", "content": [{"type": "output_text", "text": "4"}]}
    if keep_message_id:
        answer = {**answer, "id": message.id, "type": "message", "status": "completed"}
    said = {"role": "user", "content": "Hello"}
    return [ASKED, reasoning.model_dump(exclude_none=True), answer, said]


def test_passed_through_it_is_refused_as_openai_refuses_it(oai: Any) -> None:
    items = _replayed(oai, keep_message_id=False)
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="gpt5", input=items)
    said = refused.value.body
    assert said["message"] == (
        f"Item '{items[1]['id']}' of type 'reasoning' was provided without its required "
        "following item."
    )
    assert (said["type"], said["param"]) == ("invalid_request_error", "input")
    kept = _replayed(oai, keep_message_id=True)
    assert oai.responses.create(model="gpt5", input=kept).status == "completed"


def test_translated_it_is_read(oai: Any) -> None:
    items = _replayed(oai, keep_message_id=False)
    raw = oai.responses.with_raw_response.create(model="flash", input=items)
    assert raw.headers["x-metis-dropped"] == "input[1] (reasoning)"
    assert raw.parse().output_text == "You said: Hello"


def test_the_rule_names_the_reasoning_item_only_when_it_is_named_by_its_id() -> None:
    """A reasoning item sent by its encrypted content alone (no ``id``: a stateless client's)
    before an assistant message with none is no such request."""
    answer = {"role": "assistant", "content": "4"}
    named = {"type": "reasoning", "id": "rs_1", "summary": []}
    assert [r.message for r in tool_items([ASKED, named, answer])] == [
        "Item 'rs_1' of type 'reasoning' was provided without its required following item."
    ]
    unnamed = {"type": "reasoning", "summary": [], "encrypted_content": "x"}
    assert list(tool_items([ASKED, unnamed, answer])) == []
    assert list(tool_items([ASKED, named, {**answer, "id": "msg_1"}])) == []


def test_a_named_message_after_an_unnamed_reasoning_item_is_refused_as_openai_refuses_it(
    oai: Any,
) -> None:
    """The opposite case: the reasoning item sent back without its ``id`` (a stateless client's,
    by its encrypted content) and the assistant message with its own. OpenAI ties the message
    to the reasoning item's id and refuses it (NousResearch/hermes-agent#97442); passed
    through, the gateway answers so; each with both ids, or with neither, is taken."""
    first = oai.responses.create(
        model="gpt5",
        input=[ASKED],
        reasoning={"effort": "low"},
        store=False,
        include=["reasoning.encrypted_content"],
    )
    reasoning, message = (item.model_dump(exclude_none=True) for item in first.output)
    unnamed = {k: v for k, v in reasoning.items() if k != "id"}
    said = {"role": "user", "content": "Hello"}
    with pytest.raises(openai.BadRequestError) as refused:
        oai.responses.create(model="gpt5", input=[ASKED, unnamed, message, said], store=False)
    assert refused.value.body["message"] == (
        f"Item '{message['id']}' of type 'message' was provided without its required "
        "'reasoning' item."
    )
    assert refused.value.body["param"] == "input"
    unnamed_answer = {k: v for k, v in message.items() if k != "id"}
    for taken in ([reasoning, message], [unnamed, unnamed_answer]):
        answer = oai.responses.create(model="gpt5", input=[ASKED, *taken, said], store=False)
        assert answer.status == "completed"
