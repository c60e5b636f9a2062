"""The relays parse only the events that hold what the gateway changes or reads
(metis/gateway/relay.py): in one read with such an event, the others go through byte for
byte, and what the marked ones report is read."""

from __future__ import annotations

from metis.gateway.relay import AnthropicRelay, ChatRelay
from metis.model.content import ProviderRaw
from metis.model.response import StopKind

TEXT = b'data: {"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{"content":"a  b"}}]}\n\n'
FINISH = (
    b'data: {"id":"c1","model":"gpt-x","choices":[{"index":0,"delta":{},'
    b'"finish_reason":"stop"}]}\n\n'
)
USAGE = (
    b'data: {"id":"c1","model":"gpt-x","choices":[],'
    b'"usage":{"prompt_tokens":3,"completion_tokens":2}}\n\n'
)
DONE = b"data: [DONE]\n\n"


def test_a_chat_read_with_the_ending_parses_only_its_marked_events() -> None:
    relay = ChatRelay("fast", include_usage=False)
    out = relay.feed(TEXT + FINISH + USAGE + DONE)
    named = TEXT.replace(b'"gpt-x"', b'"fast"')
    assert out == named + FINISH.replace(b'"gpt-x"', b'"fast"') + DONE  # usage left out
    assert relay.stop is not None and relay.stop.kind is StopKind.END_TURN
    assert relay.usage is not None and relay.usage.output_tokens == 2


def test_an_anthropic_read_with_message_start_keeps_the_other_events_as_they_came() -> None:
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
        b'"model":"claude-x","usage":{"input_tokens":5,"output_tokens":1}}}\n\n'
    )
    ping = b'event: ping\ndata: {"type": "ping"}\n\n'
    relay = AnthropicRelay("sonnet", ProviderRaw(provider="anthropic", model="anthropic:x"))
    out = relay.feed(start + ping)
    assert out.endswith(ping) and b'"model":"sonnet"' in out
    assert relay.usage is not None and relay.usage.input_tokens == 5
