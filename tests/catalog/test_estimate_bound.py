"""The bound ``capability_check`` reads before making the token estimate: never below the
estimate, so a request it lets through without the estimate would have passed with it."""

from __future__ import annotations

from typing import Any

import pytest

from metis.catalog.estimate import TokenProfile, estimate_request_tokens
from metis.model.capabilities import AdapterCapabilities
from metis.model.content import Message, TextBlock, ToolUseBlock
from metis.model.request import CanonicalRequest, ToolDefinition
from metis.stages.policy.capability_check import unmet_needs

from ..helpers import bound, make_call

TEXTS = [
    "",
    "a",
    "Hello, world! It's 2026.",
    "x" * 95 + " " + "déjà vu 東京 " * 7,
    '{"city": "Paris", "days": [1, 22, 333, 4444]}\n\n    indented\r\n',
    "supercalifragilisticexpialidocious " * 3 + "!!!???...",
]
TOOL = ToolDefinition(
    name="weather",
    description="Weather for a city",
    input_schema={"type": "object", "properties": {"city": {"type": "string"}}},
)


def request(text: str) -> CanonicalRequest:
    return CanonicalRequest(
        model="m",
        messages=[
            Message.user(text or "?"),
            Message(
                role="assistant",
                content=[
                    TextBlock(text=text or "."),
                    ToolUseBlock(id="t1", name="weather", input={"city": text}),
                ],
            ),
        ],
        tools=[TOOL, TOOL.model_copy(update={"name": "other"})],
        system_prompt=text or None,
        max_output_tokens=100,
    )


@pytest.mark.parametrize(
    "profile",
    [
        TokenProfile(text_counting="pieces"),
        TokenProfile(text_counting="pieces", word_chars=3, tokens_per_piece=1.37),
        TokenProfile(text_counting="pieces", tokens_per_piece=0.61, tool_rendering="typescript"),
        TokenProfile(),
    ],
)
@pytest.mark.parametrize("text", TEXTS)
def test_the_bound_is_never_below_the_estimate(profile: TokenProfile, text: str) -> None:
    estimate = estimate_request_tokens(request(text), profile)
    assert estimate_request_tokens(request(text), profile, at_most=True) >= estimate


def test_a_request_over_the_bound_but_within_the_context_is_let_through() -> None:
    profile = TokenProfile(text_counting="pieces")
    long_words = request("abcdefghij " * 400)  # 400 pieces, 4,400 characters
    estimate = estimate_request_tokens(long_words, profile)
    bound = estimate_request_tokens(long_words, profile, at_most=True)
    assert estimate < bound
    caps = AdapterCapabilities(max_context_tokens=estimate, supports_tools=True)
    assert unmet_needs(long_words, caps, profile) == []
    over = AdapterCapabilities(max_context_tokens=estimate - 1, supports_tools=True)
    assert unmet_needs(long_words, over, profile) == [
        f"the input is about {estimate} tokens and the context holds {estimate - 1}"
    ]


def test_a_request_whose_bound_fits_is_not_estimated_in_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """capability_check and the router read the bound and stop there when it fits: the full
    estimate (a regex pass per piece of text) is made only for a request near the context."""
    from metis.stages.policy import capability_check

    made: list[bool] = []

    def counting(
        request: CanonicalRequest, profile: object, *, at_most: bool = False, **kw: Any
    ) -> int:
        made.append(at_most)
        return estimate_request_tokens(request, profile, at_most=at_most, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(capability_check, "estimate_request_tokens", counting)
    caps = AdapterCapabilities(max_context_tokens=200_000, supports_tools=True)
    profile = TokenProfile(text_counting="pieces")
    stage = bound(capability_check.CapabilityCheck(), capabilities=caps, token_profile=profile)
    sent = request("a few words")
    assert stage.rewrite(sent, make_call()) is sent
    assert made == [True]


@pytest.mark.parametrize(
    "profile",
    [
        TokenProfile(text_counting="pieces"),
        TokenProfile(text_counting="pieces", word_chars=3, tokens_per_piece=1.37),
        TokenProfile(text_counting="pieces", tokens_per_piece=0.61, tool_rendering="typescript"),
        TokenProfile(),
    ],
)
@pytest.mark.parametrize(
    "text", [*TEXTS, "a b c d e f", "\x00\x01\x7f \t x", "\ud800 lone", "tab\there\x0bvt\x0cff"]
)
def test_the_lower_bound_is_never_above_the_estimate(profile: TokenProfile, text: str) -> None:
    estimate = estimate_request_tokens(request(text), profile)
    assert estimate_request_tokens(request(text), profile, at_least=True) <= estimate


def test_a_request_far_past_the_context_is_refused_on_the_lower_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A huge tool result is refused without the full estimate (a regex pass over every
    piece of its text: seconds for 50 MB), on a bound that is never above it."""
    from metis.catalog import estimate as module

    profile = TokenProfile(text_counting="pieces")
    huge = request("word, " * 20_000)
    full = estimate_request_tokens(huge, profile)
    caps = AdapterCapabilities(max_context_tokens=1_000, supports_tools=True)

    def unread(text: str, word_chars: int) -> int:
        raise AssertionError("the text was read piece by piece")

    monkeypatch.setattr(module, "_pieces", unread)
    [problem] = unmet_needs(huge, caps, profile)
    least = int(problem.split()[5])
    assert problem.startswith("the input is at least ") and 1_000 < least <= full
    assert problem.endswith("tokens and the context holds 1000")
