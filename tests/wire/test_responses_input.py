"""OpenAI Responses input (issue 12 item 4): image parts carry ``detail``, assistant turns from
another provider are input messages as the API documents them, and a reply cut short keeps
the reasoning items that had finished."""

from __future__ import annotations

from metis.model import ProviderRaw, StopKind, StopReason, ThinkingBlock
from metis.wire.builder import MessageBuilder
from metis.wire.openai_responses.encode import assistant_items, silent

from .test_openai_responses_codec import (
    MODEL,
    PROVIDER,
    call_events,
    codec,
    created,
    final,
    message_events,
    reasoning_events,
)


def test_a_reply_cut_short_keeps_its_finished_reasoning_items() -> None:
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    objs = [created(), *reasoning_events(0, ["Plan", " the call."]), *message_events(1, "Che")]
    for obj in objs[:-2]:  # the message never finishes: the stream is cancelled
        parser.feed(obj)
    ending = parser.interrupt(StopReason(kind=StopKind.CANCELLED, raw=None))
    thought, text = final(ending).final_content
    assert isinstance(thought, ThinkingBlock) and thought.signature == "enc_done"
    assert thought.provider_raw == ProviderRaw(
        provider=PROVIDER,
        model=MODEL,
        data={"id": "rs_0", "summary": [{"type": "summary_text", "text": "Plan the call."}]},
    )
    assert text.provider_raw is None  # its item never finished: nothing of it to send back
    items = assistant_items([thought, text], PROVIDER, "reply", silent)
    assert items[0] == {
        "type": "reasoning",
        "id": "rs_0",
        "summary": [{"type": "summary_text", "text": "Plan the call."}],
        "encrypted_content": "enc_done",
    }
    assert items[1] == {"type": "message", "role": "assistant", "content": "Che"}


def test_an_error_after_a_finished_call_keeps_the_calls_item() -> None:
    parser = codec.stream_parser(MessageBuilder(PROVIDER, MODEL))
    for event in [
        created(),
        *reasoning_events(0, ["Look it up."]),
        *call_events(1, "call_9", "f", "{}"),
    ]:
        parser.feed(event)
    ending = parser.interrupt(StopReason(kind=StopKind.ERROR, raw=None))
    thought, tool = final(ending).final_content
    assert thought.provider_raw is not None and thought.provider_raw.data["id"] == "rs_0"
    assert tool.provider_raw is not None
    assert tool.provider_raw.data == {"id": "fc_1", "call_id": "call_9"}
    kinds = [i["type"] for i in assistant_items([thought, tool], PROVIDER, "reply", silent)]
    assert kinds == ["reasoning", "function_call"]
