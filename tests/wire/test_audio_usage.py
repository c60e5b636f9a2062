"""Audio counted apart where it is priced apart: OpenAI Chat's (and Responses')
``audio_tokens`` of the prompt and completion details, Gemini's and Vertex's
``promptTokensDetails`` / ``candidatesTokensDetails`` of modality ``AUDIO``, read whole and
streamed as ``TokenUsage.input_audio_tokens`` / ``output_audio_tokens``; ``cost_of`` prices
them at the model's audio rates (metis/catalog/audio_rates.py), as text with
``Cost.rate_assumed`` saying so where the model has none; ``metis serve`` charges keys so and
writes them back in Chat's usage. Sans-IO."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from metis.cost import cost_of
from metis.errors import ProtocolError
from metis.gateway.chat_write import usage as chat_usage
from metis.gateway.keys import price
from metis.model.response import TokenUsage
from metis.wire.openai_chat import OpenAIChatCodec
from metis.wire.openai_responses import OpenAIResponsesCodec
from tests.helpers import stack_codec
from tests.wire.test_service_tier import (
    chat_body,
    gemini_chunk,
    responses_events,
    streamed,
    whole,
)

AUDIO_PREVIEW = "openai:gpt-4o-audio-preview"  # text 2.5 / 10, audio 40 / 80 USD per million
FLASH = "gemini:gemini-2.5-flash"  # text 0.3 in, audio 1 in, 2.5 out
CHAT_USAGE = {
    "prompt_tokens": 100,
    "completion_tokens": 50,
    "total_tokens": 150,
    "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 80},
    "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 40},
}
HEARD = TokenUsage(
    input_tokens=100, output_tokens=50, input_audio_tokens=80, output_audio_tokens=40
)


def test_openai_chat_reads_audio_counts_whole_and_streamed() -> None:
    codec = OpenAIChatCodec()
    assert whole(codec, chat_body(usage=CHAT_USAGE), "openai") == HEARD
    chunk = {"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-audio-preview"}
    text = {**chunk, "choices": [{"index": 0, "delta": {"content": "Hi."}}]}
    end = {**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}
    used = {**chunk, "choices": [], "usage": CHAT_USAGE}
    assert streamed(codec, [text, end, used], "openai") == HEARD
    plain = whole(codec, chat_body(), "openai")
    assert (plain.input_audio_tokens, plain.output_audio_tokens) == (0, 0)
    assert "input_audio_tokens" not in plain.model_dump()


def test_openai_responses_reads_audio_counts_where_said() -> None:
    events = responses_events("auto", "default")
    events[1]["response"]["usage"] = {
        "input_tokens": 100,
        "output_tokens": 50,
        "input_tokens_details": {"cached_tokens": 0, "audio_tokens": 80},
        "output_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 40},
    }
    codec = OpenAIResponsesCodec()
    usage = streamed(codec, events, "openai")
    assert (usage.input_audio_tokens, usage.output_audio_tokens) == (80, 40)
    assert whole(codec, events[1]["response"], "openai") == usage


def modalities(audio_in: int, audio_out: int) -> dict[str, Any]:
    return {
        "promptTokensDetails": [
            {"modality": "TEXT", "tokenCount": 100 - audio_in},
            {"modality": "AUDIO", "tokenCount": audio_in},
        ],
        "candidatesTokensDetails": [{"modality": "AUDIO", "tokenCount": audio_out}],
    }


@pytest.mark.parametrize("stack", ["gemini", "vertex"])
def test_gemini_reads_audio_by_modality_whole_and_streamed(stack: str) -> None:
    codec = stack_codec(stack)
    body = gemini_chunk(**{**modalities(80, 1), "promptTokenCount": 100})
    usage = whole(codec, body, "gemini")
    assert (usage.input_tokens, usage.input_audio_tokens, usage.output_audio_tokens) == (100, 80, 1)
    assert streamed(codec, [body], "gemini") == usage
    plain = whole(codec, gemini_chunk(), "gemini")
    assert (plain.input_audio_tokens, plain.output_audio_tokens) == (0, 0)


def test_gemini_counts_by_modality_that_are_not_a_list_are_a_protocol_error() -> None:
    body = gemini_chunk(promptTokensDetails={"modality": "AUDIO", "tokenCount": 3})
    with pytest.raises(ProtocolError, match="promptTokensDetails"):
        whole(stack_codec("gemini"), body, "gemini")


def test_audio_is_priced_at_the_models_audio_rates() -> None:
    cost = cost_of(AUDIO_PREVIEW, HEARD)
    assert cost.input_usd == Decimal("0.00325")  # 20 * 2.5 + 80 * 40, per million
    assert cost.output_usd == Decimal("0.0033")  # 10 * 10 + 40 * 80
    assert cost.rate_assumed is None
    assert price(AUDIO_PREVIEW, HEARD) == Decimal("0.00655")  # what metis serve charges
    flash = TokenUsage(input_tokens=100, output_tokens=10, input_audio_tokens=80)
    assert cost_of(FLASH, flash).usd == Decimal("0.000111")  # 20 * 0.3 + 80 * 1 + 10 * 2.5


def test_cached_audio_is_taken_as_uncached_first() -> None:
    usage = TokenUsage(input_tokens=10, cached_input_tokens=90, input_audio_tokens=80)
    text = cost_of(AUDIO_PREVIEW, usage.model_copy(update={"input_audio_tokens": 0}))
    assert cost_of(AUDIO_PREVIEW, usage).usd - text.usd == Decimal(10 * (40 - 2.5)) / 1_000_000


def test_audio_of_a_model_with_no_audio_rate_is_priced_as_text_and_said() -> None:
    usage = HEARD.model_copy(update={"output_audio_tokens": 0})
    cost = cost_of("openai:gpt-4o", usage)
    assert cost.usd == cost_of("openai:gpt-4o", TokenUsage(input_tokens=100, output_tokens=50)).usd
    assert cost.rate_assumed is not None and "no audio input rate" in cost.rate_assumed


def test_the_gateway_writes_audio_back_in_chats_usage() -> None:
    written = chat_usage(HEARD)
    assert written["prompt_tokens_details"]["audio_tokens"] == 80
    assert written["completion_tokens_details"]["audio_tokens"] == 40
    assert HEARD.plus(HEARD).input_audio_tokens == 160
