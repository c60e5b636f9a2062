"""A translated Responses stream that fails midway ends with ``response.failed``, whose
``response.output`` holds what was streamed before the error: the items closed, and the one
open then with its text so far, ``incomplete``, as ``response.incomplete`` keeps it. (Its
output was ``[]``: a client taking the failed response as the last word, as the OpenAI Agents
SDK's streamed runner does, lost the text its deltas gave; a Messages or Chat client has no
final object in its error event, only the deltas, which every API's client gets.)"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from metis.testing.emulator import Emulator
from tests.gateway_fixture import GATEWAY_KEY, WEATHER_FUNCTION, gateway_url

from ..helpers import ImportOnUse

openai = ImportOnUse("openai")


@pytest.fixture(scope="module")
def served() -> Iterator[tuple[Any, Emulator]]:
    emulator = Emulator()
    with gateway_url(emulator) as url:
        yield openai.OpenAI(api_key=GATEWAY_KEY, base_url=url + "/v1", max_retries=0), emulator


def _events(oai: Any, **asked: Any) -> list[Any]:
    return list(oai.responses.create(model="flash", stream=True, **asked))


def test_the_text_streamed_before_the_error_is_in_the_failed_response(
    served: tuple[Any, Emulator],
) -> None:
    oai, emulator = served
    emulator.push_fault("stream_error;after=4")
    events = _events(oai, input="Hello there, tell me a story")
    streamed = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert streamed and events[-1].type == "response.failed"
    failed = events[-1].response
    assert failed.status == "failed" and failed.error.code == "server_error"
    [message] = failed.output
    assert message.id == events[2].item.id and message.status == "incomplete"
    assert message.content[0].text == streamed


def test_a_call_streamed_before_the_error_is_in_the_failed_response(
    served: tuple[Any, Emulator],
) -> None:
    """A call closed before the error is there whole."""
    oai, emulator = served
    emulator.push_fault("stream_error;after=8")
    tools = [{"type": "function", **WEATHER_FUNCTION}]
    events = _events(oai, input="Weather in Rome?", tools=tools, tool_choice="required")
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert done and events[-1].type == "response.failed"
    assert events[-1].response.output[: len(done)] == done
