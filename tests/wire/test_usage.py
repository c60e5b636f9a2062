"""Token usage: mapped when the provider reports it, estimated (and said so) when it does not."""

from __future__ import annotations

import logging

import pytest

from metis.model import MessageComplete

from ..fakes import FakePeer, Reply, anthropic_reply, collect, request, sse


def openai_without_usage(text: str) -> Reply:
    return Reply(
        chunks=[
            *sse(
                {"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]},
                {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
                names=False,
            ),
            "data: [DONE]\n\n",
        ]
    )


@pytest.mark.anyio
async def test_missing_usage_is_estimated_marked_and_warned(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    answer = "word " * 400  # 2000 characters, about 500 tokens
    adapter = FakePeer(openai_without_usage(answer)).adapter("openai")
    final = (await collect(adapter, request("openai")))[-1]
    assert isinstance(final, MessageComplete)
    assert final.usage.estimated is True
    assert 400 <= final.usage.output_tokens <= 600
    assert final.usage.input_tokens > 0
    records = [r for r in caplog.records if getattr(r, "event", None) == "metis.usage_estimated"]
    assert len(records) == 1 and records[0].adapter == "openai"  # type: ignore[attr-defined]


@pytest.mark.anyio
async def test_reported_usage_is_not_marked_estimated(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="metis")
    adapter = FakePeer(anthropic_reply("hello")).adapter("anthropic")
    final = (await collect(adapter, request("anthropic")))[-1]
    assert isinstance(final, MessageComplete)
    assert final.usage.estimated is False
    assert (final.usage.input_tokens, final.usage.output_tokens) == (10, 5)
    assert not [r for r in caplog.records if getattr(r, "event", None) == "metis.usage_estimated"]
