"""The Responses API's reasoning items carrying thinking through a client
(metis/gateway/reasoning_items.py): written with ``encrypted_content`` when ``include`` asks,
read back into the block they were, and held back from a pass-through to another model."""

from __future__ import annotations

import json
from typing import Any

import pytest

from metis.errors import InvalidRequestError
from metis.gateway.inbound import Inbound
from metis.gateway.passthrough_call import own_thinking
from metis.gateway.provenance import unsigned, unwrap, wrap
from metis.gateway.reasoning_items import read_reasoning
from metis.gateway.responses_api import ResponseStream
from metis.gateway.responses_items import output_items
from metis.gateway.responses_read import read_responses
from metis.model.block import ProviderRaw
from metis.model.content import RedactedThinkingBlock, TextBlock, ThinkingBlock
from metis.model.events import MessageComplete, ThinkingDelta
from metis.model.response import StopKind, StopReason, TokenUsage

CLAUDE = ProviderRaw(provider="anthropic", model="sonnet")
GPT = ProviderRaw(provider="openai_responses", model="gpt5")
ASKS = ["reasoning.encrypted_content"]


def _inbound(include: Any = None, summary: str | None = "auto") -> Inbound:
    """A request's reading; ``summary``: its ``reasoning.summary`` (None: not given)."""
    body: dict[str, Any] = {"model": "sonnet", "input": "Hi"}
    if include is not None:
        body["include"] = include
    if summary is not None:
        body["reasoning"] = {"effort": "low", "summary": summary}
    return read_responses(body)


def _stream(include: Any, *events: Any, summary: str | None = "auto") -> str:
    writer = ResponseStream(_inbound(include, summary), "sonnet", "resp_1", CLAUDE)
    done = MessageComplete([], StopReason(kind=StopKind.END_TURN), TokenUsage(output_tokens=1))
    return b"".join(writer.feed(event) for event in (*events, done)).decode()


def _streamed(include: Any, *events: Any, summary: str | None = "auto") -> list[dict[str, Any]]:
    """The reasoning items a stream of ``events`` ends with (the final response's output)."""
    raw = _stream(include, *events, summary=summary)
    last = [line for line in raw.splitlines() if line.startswith("data: ")][-1]
    return list(json.loads(last[6:])["response"]["output"])


def test_no_summary_is_written_unless_the_request_asks_for_one() -> None:
    """As OpenAI answers (its recorded replies to ``reasoning: {summary: null}``): a reasoning
    item with ``summary: []`` and no summary events; the thinking's text, which the model
    that signed it needs back, rides in the encrypted content when that is asked for."""
    content: list[Any] = [ThinkingBlock(thinking="Hmm.", signature="c2ln", provider_raw=CLAUDE)]
    thinking = (ThinkingDelta(0, "Hmm."), ThinkingDelta(0, signature="c2ln"))
    for summary in (None, "none"):
        (whole,) = output_items(content, _inbound(ASKS, summary), "resp_1")
        (streamed,) = _streamed(ASKS, *thinking, summary=summary)
        assert whole["summary"] == streamed["summary"] == []
        assert "reasoning_summary" not in _stream(ASKS, *thinking, summary=summary)
        assert whole["encrypted_content"] == streamed["encrypted_content"] != wrap(CLAUDE, "c2ln")
        block = read_reasoning(whole, "input[1]")
        assert block == ThinkingBlock(thinking="Hmm.", signature=whole["encrypted_content"])
        assert unwrap(block.signature) == (CLAUDE, "c2ln")  # its maker's own, as before
        (bare,) = output_items(content, _inbound(None, summary), "resp_1")
        assert bare == {"id": bare["id"], "type": "reasoning", "summary": []}
    (asked,) = output_items(content, _inbound(ASKS, "detailed"), "resp_1")
    assert asked["summary"] == [{"type": "summary_text", "text": "Hmm."}]
    assert asked["encrypted_content"] == wrap(CLAUDE, "c2ln")  # the text is in the summary
    assert "response.reasoning_summary_text.delta" in _stream(ASKS, *thinking, summary="concise")


def test_the_items_carry_the_signature_with_its_maker_only_when_asked() -> None:
    content: list[Any] = [
        ThinkingBlock(thinking="Hmm.", signature="c2ln", provider_raw=CLAUDE),
        RedactedThinkingBlock(data="ZGF0YQ==", provider_raw=CLAUDE),
        TextBlock(text="Hi"),
    ]
    plain, redacted, _ = output_items(content, _inbound(ASKS), "resp_1")
    assert plain["encrypted_content"] == wrap(CLAUDE, "c2ln")
    assert plain["summary"] == [{"type": "summary_text", "text": "Hmm."}]
    assert redacted["encrypted_content"] == "redacted_thinking:" + wrap(CLAUDE, "ZGF0YQ==")
    assert all(
        "encrypted_content" not in item for item in output_items(content, _inbound(), "resp_1")
    )
    thinking = (ThinkingDelta(0, "Hmm."), ThinkingDelta(0, signature="c2ln"))
    (streamed,) = _streamed(ASKS, *thinking)
    assert streamed["encrypted_content"] == plain["encrypted_content"]
    assert "encrypted_content" not in _streamed(None, *thinking)[0]
    (hidden,) = _streamed(ASKS, ThinkingDelta(0, redacted_data="ZGF0YQ=="))
    assert hidden["encrypted_content"] == redacted["encrypted_content"]


def test_the_items_read_back_into_the_blocks_they_were_for_their_maker() -> None:
    items = [
        {"role": "user", "content": "Weather?"},
        {
            "type": "reasoning",
            "id": "rs_1",
            "summary": [{"type": "summary_text", "text": "Hmm."}],
            "encrypted_content": wrap(CLAUDE, "c2ln"),
        },
        {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": "gAAAA"},
        {
            "type": "reasoning",
            "id": "rs_3",
            "summary": [],
            "encrypted_content": "redacted_thinking:" + wrap(CLAUDE, "ZGF0YQ=="),
        },
        {"type": "reasoning", "id": "rs_4", "summary": [{"type": "summary_text", "text": "x"}]},
    ]
    inbound = read_responses({"model": "sonnet", "input": items, "include": ASKS})
    signed, foreign, redacted = inbound.messages[1].content
    assert signed == ThinkingBlock(thinking="Hmm.", signature="c2ln", provider_raw=CLAUDE)
    assert foreign == ThinkingBlock(thinking="", signature="gAAAA")  # no maker: no model's
    assert redacted == RedactedThinkingBlock(data="ZGF0YQ==", provider_raw=CLAUDE)
    assert inbound.ignored == ["input[4] (reasoning)"]  # nothing any model can be given back
    assert inbound.options["encrypted_reasoning"] is True


def test_include_names_what_the_gateway_does_not_serve_and_must_be_strings() -> None:
    inbound = _inbound([*ASKS, "message.output_text.logprobs"])
    assert inbound.ignored == ["include (message.output_text.logprobs)"]
    assert _inbound([]).ignored == [] and _inbound([]).options["encrypted_reasoning"] is False
    for wrong in ("reasoning.encrypted_content", [1]):
        with pytest.raises(InvalidRequestError, match="include"):
            _inbound(wrong)
    with pytest.raises(InvalidRequestError, match=r"input\[0\].encrypted_content"):
        read_responses({"model": "m", "input": [{"type": "reasoning", "encrypted_content": 5}]})


def test_a_pass_through_takes_only_its_own_models_reasoning_and_unwrapped() -> None:
    """A Responses request holding another model's reasoning is not passed through to an
    OpenAI model (which would refuse content it cannot decrypt); its own is given back as
    OpenAI wrote it."""
    own = {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": wrap(GPT, "gA")}
    body: dict[str, Any] = {"model": "gpt5", "input": [own]}
    assert own_thinking(body, GPT) and body["input"][0]["encrypted_content"] == "gA"
    for other in (wrap(CLAUDE, "c2ln"), "redacted_thinking:" + wrap(CLAUDE, "ZGF0YQ==")):
        item = {"type": "reasoning", "id": "rs_2", "summary": [], "encrypted_content": other}
        assert not own_thinking({"model": "gpt5", "input": [item]}, GPT)
    # its own with no signature (its maker gave none): no provider takes it; translated
    thought = {"type": "thinking", "thinking": "t", "signature": unsigned(CLAUDE)}
    said = {"model": "sonnet", "messages": [{"role": "assistant", "content": [thought]}]}
    assert not own_thinking(said, CLAUDE) and thought["signature"] == unsigned(CLAUDE)
