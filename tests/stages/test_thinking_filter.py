"""thinking_filter: signed reasoning goes back only to the provider and model that made it
(docs/contract.md §7)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from metis.errors import StackError
from metis.model import (
    CanonicalRequest,
    ContentBlock,
    Message,
    ProviderRaw,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from metis.pipeline.call import Call
from metis.stages.policy.thinking_filter import ThinkingFilter

from ..helpers import drive, lossy_warnings, make_call, warn_fields

PROVIDER, MODEL = "anthropic", "anthropic:claude-x"
SAME = ProviderRaw(provider=PROVIDER, model=MODEL)
OTHER_MODEL = ProviderRaw(provider=PROVIDER, model="anthropic:claude-y")
OTHER_PROVIDER = ProviderRaw(provider="openai", model=MODEL)


def _thinking(origin: ProviderRaw | None = SAME, signature: str | None = "sig") -> ThinkingBlock:
    return ThinkingBlock(thinking="let me think", signature=signature, provider_raw=origin)


def _redacted(origin: ProviderRaw | None = SAME) -> RedactedThinkingBlock:
    return RedactedThinkingBlock(data="opaque==", provider_raw=origin)


def _request(*content: ContentBlock, message_id: str | None = None) -> CanonicalRequest:
    assistant = Message.assistant(*content).model_copy(update={"id": message_id})
    return CanonicalRequest(
        model=MODEL,
        messages=[Message.user("q"), assistant, Message.user("more")],
        max_output_tokens=100,
    )


def _call() -> Call:
    return make_call(provider=PROVIDER, model=MODEL)


def _run(request: CanonicalRequest, call: Call | None = None, **options: object) -> list[Any]:
    out = ThinkingFilter(**options).rewrite(request, call or _call())
    return list(out.messages[1].content)


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="metis")
    return caplog


def test_same_provider_and_model_with_signature_passes_unchanged(
    warnings: pytest.LogCaptureFixture,
) -> None:
    request = _request(_thinking(), TextBlock(text="answer"))
    assert ThinkingFilter().rewrite(request, _call()) is request
    assert lossy_warnings(warnings) == []


def test_same_origin_redacted_block_passes_unchanged(warnings: pytest.LogCaptureFixture) -> None:
    request = _request(_redacted(), _thinking(), TextBlock(text="answer"))
    assert ThinkingFilter().rewrite(request, _call()) is request
    assert lossy_warnings(warnings) == []


@pytest.mark.parametrize(
    ("block", "reason_has"),
    [
        (_thinking(OTHER_MODEL), "anthropic:claude-y"),
        (_thinking(OTHER_PROVIDER), "openai"),
        (_thinking(None), "unknown"),
        (_thinking(SAME, signature=None), "no signature"),
        (_thinking(SAME, signature=""), "no signature"),
        (_redacted(OTHER_MODEL), "anthropic:claude-y"),
        (_redacted(OTHER_PROVIDER), "openai"),
        (_redacted(None), "unknown"),
    ],
)
def test_blocks_that_may_not_go_back_are_dropped_with_one_warn(
    warnings: pytest.LogCaptureFixture, block: ContentBlock, reason_has: str
) -> None:
    request = _request(block, TextBlock(text="answer"), message_id="msg_7")
    kept = _run(request)
    assert kept == [TextBlock(text="answer")]
    [record] = lossy_warnings(warnings)
    fields = warn_fields(record)
    assert fields["session_id"] == "s1"
    assert fields["message_id"] == "msg_7"
    assert fields["block_type"] == block.type
    assert fields["adapter"] == PROVIDER
    assert reason_has in fields["reason"]


def test_the_models_own_unsigned_summary_is_left_out_quietly_where_the_stack_says(
    warnings: pytest.LogCaptureFixture,
) -> None:
    """Gemini's thought summaries carry no signature (it rides on the part after them):
    leaving them out of the same model's next request loses nothing, so no WARN and no
    warning on the call, turn after turn; anything else is still dropped and said."""
    call = _call()
    request = _request(_thinking(SAME, signature=None), TextBlock(text="answer"))
    assert _run(request, call, quiet_own_unsigned=True) == [TextBlock(text="answer")]
    assert lossy_warnings(warnings) == [] and call.warnings == []
    other = _request(_thinking(OTHER_MODEL, signature=None), TextBlock(text="answer"))
    assert _run(other, call, quiet_own_unsigned=True) == [TextBlock(text="answer")]
    assert [w.reason for w in call.warnings] == [
        "it was produced by model anthropic:claude-y, not anthropic:claude-x"
    ]


def test_warn_names_the_message_by_position_without_an_id(
    warnings: pytest.LogCaptureFixture,
) -> None:
    _run(_request(_thinking(OTHER_PROVIDER)))
    [record] = lossy_warnings(warnings)
    assert warn_fields(record)["message_id"] == "messages[1]"


def test_one_warn_per_dropped_block(warnings: pytest.LogCaptureFixture) -> None:
    request = _request(_thinking(OTHER_PROVIDER), _redacted(None), _thinking(), TextBlock(text="a"))
    kept = _run(request)
    assert kept == [_thinking(), TextBlock(text="a")]
    assert [warn_fields(r)["block_type"] for r in lossy_warnings(warnings)] == [
        "thinking",
        "redacted_thinking",
    ]


def test_same_provider_keeps_other_models_of_that_provider(
    warnings: pytest.LogCaptureFixture,
) -> None:
    request = _request(_thinking(OTHER_MODEL), _redacted(OTHER_MODEL), _thinking(OTHER_PROVIDER))
    kept = _run(request, keep="same_provider")
    assert kept == [_thinking(OTHER_MODEL), _redacted(OTHER_MODEL)]
    [record] = lossy_warnings(warnings)
    assert "openai" in warn_fields(record)["reason"]


def test_same_provider_still_needs_a_signature(warnings: pytest.LogCaptureFixture) -> None:
    assert _run(_request(_thinking(OTHER_MODEL, signature=None)), keep="same_provider") == []
    [record] = lossy_warnings(warnings)
    assert "signature" in warn_fields(record)["reason"]


def test_keep_never_drops_even_the_models_own_reasoning(
    warnings: pytest.LogCaptureFixture,
) -> None:
    kept = _run(_request(_thinking(), _redacted(), TextBlock(text="a")), keep="never")
    assert kept == [TextBlock(text="a")]
    records = lossy_warnings(warnings)
    assert len(records) == 2
    assert all("never" in warn_fields(r)["reason"] for r in records)


def test_as_text_keeps_reasoning_as_plain_text_in_place(
    warnings: pytest.LogCaptureFixture,
) -> None:
    request = _request(
        TextBlock(text="before"),
        _thinking(OTHER_PROVIDER),
        _redacted(OTHER_PROVIDER),
        ToolUseBlock(id="tu_1", name="t"),
    )
    kept = _run(request, as_text=True)
    assert kept == [
        TextBlock(text="before"),
        TextBlock(text="let me think"),
        ToolUseBlock(id="tu_1", name="t"),
    ]
    records = lossy_warnings(warnings)
    assert [warn_fields(r)["block_type"] for r in records] == ["thinking", "redacted_thinking"]
    assert "text" in warn_fields(records[0])["reason"]


def test_as_text_leaves_allowed_reasoning_as_reasoning() -> None:
    assert _run(_request(_thinking(), _thinking(OTHER_MODEL)), as_text=True) == [
        _thinking(),
        TextBlock(text="let me think"),
    ]


def test_as_text_with_empty_reasoning_keeps_nothing() -> None:
    empty = ThinkingBlock(thinking="", signature="s", provider_raw=OTHER_PROVIDER)
    assert _run(_request(empty, TextBlock(text="a")), as_text=True) == [TextBlock(text="a")]


def test_messages_without_thinking_are_the_same_objects() -> None:
    request = _request(_thinking(OTHER_PROVIDER), TextBlock(text="a"))
    out = ThinkingFilter().rewrite(request, _call())
    assert out is not request
    assert out.messages[0] is request.messages[0]
    assert out.messages[2] is request.messages[2]
    assert out.messages[1].content[0] is request.messages[1].content[1]


def test_a_request_without_thinking_is_the_same_object() -> None:
    request = CanonicalRequest(
        model=MODEL, messages=[Message.user("q"), Message.assistant("a")], max_output_tokens=10
    )
    for keep in ("same_model", "same_provider", "never"):
        assert ThinkingFilter(keep=keep).rewrite(request, _call()) is request


def test_the_input_request_is_not_changed() -> None:
    request = _request(_thinking(OTHER_PROVIDER), TextBlock(text="a"))
    before = request.model_dump()
    ThinkingFilter().rewrite(request, _call())
    assert request.model_dump() == before


def test_a_model_without_reasoning_support_gets_none_from_another_provider() -> None:
    # docs/contract.md §7: a session that began on Anthropic and moves to OpenAI loses its thinking.
    request = _request(_thinking(SAME), _redacted(SAME), TextBlock(text="a"))
    kept = _run(request, make_call(provider="openai", model="openai:gpt-x"))
    assert kept == [TextBlock(text="a")]


def test_unknown_options_are_refused() -> None:
    with pytest.raises(StackError):
        ThinkingFilter(keep="always")
    with pytest.raises(StackError):
        ThinkingFilter(as_txt=True)


@pytest.mark.anyio
async def test_as_a_stage_inner_gets_the_filtered_request() -> None:
    request = _request(_thinking(OTHER_PROVIDER), TextBlock(text="a"))
    seen, out = await drive(ThinkingFilter(), request, _call(), ["x"])
    assert out == ["x"]
    assert list(seen[0].messages[1].content) == [TextBlock(text="a")]


class _LabelledThinking(ThinkingBlock):
    """An application's own reasoning block: the stage's first look (the history's block
    classes) must see a subclass as reasoning."""

    label: str = "mine"


def test_a_subclassed_reasoning_block_is_filtered_as_its_base() -> None:
    block = _LabelledThinking(thinking="hmm", signature="sig", provider_raw=OTHER_PROVIDER)
    assert _run(_request(TextBlock(text="answer"), block)) == [TextBlock(text="answer")]
