"""The WebSocket transport's sans-IO parts: a server message as the SSE event carrying it,
which messages end a reply, the ``response.create`` message a request becomes (only the new
items on the connection that holds the reply, the whole transcript elsewhere), the URL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.pipeline.request import WireRequest, whole_body
from metis.transport.websocket import websocket_url
from metis.transport.ws_exchange import as_event, message_kind
from metis.transport.ws_stage import create_message
from metis.wire.framing.objects import BodyObjects

URL = "https://api.openai.com/v1/responses"
WHOLE = [{"role": "user", "content": "Hi"}, {"type": "message", "role": "assistant"}, {"x": 1}]


def continued(previous: str = "resp_1") -> WireRequest:
    body = {"model": "gpt-5", "stream": True, "previous_response_id": previous, "input": [{"x": 1}]}
    return WireRequest(URL, body, stream=True, full_input=WHOLE)


@pytest.mark.parametrize(
    "message",
    [
        b'{"type":"response.output_text.delta","delta":"a"}',
        b'{\n  "type": "response.output_text.delta",\r\n  "delta": "line\\nbreak"\r}',
    ],
)
def test_a_message_reads_as_the_same_object_through_the_sse_framing(message: bytes) -> None:
    objects = BodyObjects("sse", streamed=True)
    found: list[dict[str, Any]] = objects.feed(as_event(message)) + objects.close()
    assert found == [{"type": "response.output_text.delta", "delta": found[0]["delta"]}]
    assert found[0]["delta"] in ("a", "line\nbreak")


def test_only_the_messages_that_may_end_a_reply_are_parsed() -> None:
    assert message_kind(b'{"type":"response.output_text.delta","delta":"x"}') == (None, None)
    kind, message = message_kind(b'{"type":"response.completed","response":{"id":"r"}}')
    assert kind == "response.completed" and message == {
        "type": "response.completed",
        "response": {"id": "r"},
    }
    assert message_kind(b'{"type":"error","status":400}')[0] == "error"
    assert message_kind(b'{"type":"error", "status"')[0] is None  # left to the framing


def test_a_turn_continuing_the_held_reply_sends_only_the_new_items() -> None:
    sent = json.loads(create_message(continued(), held="resp_1"))
    assert sent == {
        "type": "response.create",
        "model": "gpt-5",
        "previous_response_id": "resp_1",
        "input": [{"x": 1}],
    }


@pytest.mark.parametrize("held", [None, "resp_other"])
def test_a_turn_continuing_what_the_connection_does_not_hold_is_sent_whole(
    held: str | None,
) -> None:
    sent = json.loads(create_message(continued(), held=held))
    assert "previous_response_id" not in sent and "stream" not in sent
    assert sent["input"] == WHOLE and sent["type"] == "response.create"


def test_whole_body_and_the_serialized_request_keep_the_transcript() -> None:
    request = continued().serialized()
    assert request.full_input == WHOLE
    assert whole_body(request) == {"model": "gpt-5", "stream": True, "input": WHOLE}
    assert request.whole().full_input is None and request.whole().body["input"] == WHOLE


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (URL, "wss://api.openai.com/v1/responses"),
        ("http://127.0.0.1:8900/v1/responses?x=1", "ws://127.0.0.1:8900/v1/responses?x=1"),
    ],
)
def test_the_websocket_url_is_the_endpoints_own(url: str, expected: str) -> None:
    assert websocket_url(url) == expected
