"""The request fitted to the routed model: reasoning in the form it takes, sampling it takes,
in range; every setting not applied as asked reported with the call's warnings."""

from __future__ import annotations

from typing import Any

from metis.errors import InvalidRequestError
from metis.model.capabilities import AdapterCapabilities
from metis.model.request import CanonicalRequest
from metis.wire.codec import EncodeContext
from metis.wire.knobs.reasoning import fit_reasoning
from metis.wire.knobs.sampling import fit_sampling, fit_setting_rules

SUMMARY_DIALECTS = frozenset({"openai_responses"})
"""The dialects that carry ``thinking.summary``."""
DISPLAY_DIALECTS = (
    frozenset({"anthropic", "bedrock_anthropic", "bedrock_converse", "gemini"}) | SUMMARY_DIALECTS
)
"""The dialects that carry ``thinking.display`` (Claude's ``thinking.display``; the Responses
API's summary left out for ``omitted``; Gemini's ``includeThoughts`` false); Converse for Claude
only (metis.wire.bedrock_converse)."""


def fit_request(
    request: CanonicalRequest, caps: AdapterCapabilities, call: EncodeContext, dialect: str
) -> CanonicalRequest:
    """``request`` as the routed model takes it (docs/contract.md §13); an InvalidRequestError
    for a sampling value outside the provider's range."""
    update: dict[str, Any] = {}
    thinking = request.thinking
    if thinking is not None:
        thinking = _fitted_thinking(request, caps, call, dialect)
        if thinking != request.thinking:
            update["thinking"] = thinking

    def warn(name: str, reason: str) -> None:
        call.warn_dropped(name, reason)

    cleared, problems = fit_sampling(request, caps.sampling, caps.reasoning, thinking, warn)
    ruled = fit_setting_rules(request, caps.setting_rules, cleared, warn)
    stops = len(ruled.get("stop_sequences", request.stop_sequences))
    if caps.max_stop_sequences is not None and stops > caps.max_stop_sequences:
        problems.append(f"{stops} stop sequences given, it takes at most {caps.max_stop_sequences}")
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        raise InvalidRequestError(
            f"{call.provider} would refuse this request ({count}): " + "; ".join(problems),
            provider=call.provider,
            request_id=call.request_id,
            retryable=False,
        )
    update.update(cleared)
    update.update(ruled)
    return request.model_copy(update=update) if update else request


def _fitted_thinking(
    request: CanonicalRequest, caps: AdapterCapabilities, call: EncodeContext, dialect: str
) -> Any:
    thinking = request.thinking
    assert thinking is not None
    if caps.reasoning is None and not caps.supports_thinking and thinking.effort is not None:
        call.warn_dropped(
            "reasoning", "the model does not reason; the reasoning effort was not sent"
        )
        return None
    if thinking.summary is not None and dialect not in SUMMARY_DIALECTS:
        call.warn_dropped("reasoning.summary", "this provider has no reasoning summary setting")
        thinking = thinking.model_copy(update={"summary": None})
    if thinking.display is not None and dialect not in DISPLAY_DIALECTS:
        call.warn_dropped("reasoning.display", "this provider has no reasoning display setting")
        thinking = thinking.model_copy(update={"display": None})
    return fit_reasoning(
        thinking,
        caps.reasoning,
        request.max_output_tokens,
        lambda reason: call.warn_dropped("reasoning", reason),
    )


def report_one_call_a_turn(request: CanonicalRequest, call: EncodeContext) -> None:
    """Report ``parallel_tool_calls: false`` dropped, for an encoder whose provider has no
    switch for it, when the model may call a declared tool at all."""
    if request.parallel_tool_calls is not False or not request.tools:
        return
    if request.tool_choice is None or request.tool_choice.type != "none":
        call.warn_dropped(
            "parallel_tool_calls",
            f"{call.provider} has no setting for one tool call a turn; it may make several",
        )
