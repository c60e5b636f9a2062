"""JSON read from outside (a client's history, a provider's grammar call, a signature's tag, an
SSE ``error:`` field, a Responses request's item) is parsed within the nesting limit
(metis.wire.json_limits): text nested deeper than any real value is refused as not JSON where
the reader refuses other bad JSON, never a RecursionError."""

from __future__ import annotations

import base64
import sys

from metis.gateway.provenance import PREFIX, unwrap
from metis.histories import from_openai_chat
from metis.wire.framing.sse_data import SSEDataDecoder
from metis.wire.openai_chat.grammar_calls import ERROR_TOOL, GrammarCall, notified_error
from metis.wire.responses_rules import is_json_object

DEEP = "[" * (sys.getrecursionlimit() + 100) + "]" * (sys.getrecursionlimit() + 100)


def test_a_history_calls_arguments_nested_past_the_limit_are_kept_as_text() -> None:
    history = [
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": DEEP}}
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ]
    call = from_openai_chat(history)[1].content[0]
    assert call.input == {}  # type: ignore[union-attr]
    assert call.provider_raw.data == {"arguments": DEEP}  # type: ignore[union-attr]


def test_a_grammar_call_nested_past_the_limit_is_not_a_call() -> None:
    assert notified_error([{"function": {"name": ERROR_TOOL, "arguments": DEEP}}]) is None
    call = GrammarCall()
    call.add(DEEP)
    assert call.take_error() is None


def test_a_signature_tag_nested_past_the_limit_carries_no_maker() -> None:
    tag = base64.urlsafe_b64encode(DEEP.encode()).decode().rstrip("=")
    given = f"{PREFIX}{tag}.opaque"
    assert unwrap(given) == (None, given)


def test_a_responses_item_nested_past_the_limit_is_not_a_json_object() -> None:
    assert is_json_object('{"a": ' + DEEP + "}") is False


def test_an_sse_error_field_nested_past_the_limit_is_its_text() -> None:
    decoder = SSEDataDecoder()
    (data,) = decoder.feed(f"error: {DEEP}\n\n".encode())
    assert DEEP[:50] in data
