"""OpenAI Responses' token counting: ``POST /v1/responses/input_tokens``.

Takes the input fields of ``/v1/responses`` (no output settings, no ``stream``) and answers
``{"object": "response.input_tokens", "input_tokens": N}``, N counted the way the emulator
counts a prompt's input tokens, so a count matches the usage of the same request served.
Anthropic's ``/v1/messages/count_tokens`` and Gemini's ``:countTokens`` are served by their
own modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from metis.testing.emulator._wire import ApiError, Env, HttpRequest, JsonReply, count_tokens
from metis.testing.emulator.openai_chat import openai_error, openai_headers

if TYPE_CHECKING:
    from metis.testing.emulator.openai_responses import OpenAIResponses

INPUT_TOKENS_FIELDS = frozenset(
    {
        "model",
        "input",
        "instructions",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "previous_response_id",
        "conversation",
        "reasoning",
        "text",
        "truncation",
    }
)


def input_tokens(
    provider: OpenAIResponses, body: dict[str, Any], request: HttpRequest, env: Env
) -> JsonReply:
    for key in body:
        if key not in INPUT_TOKENS_FIELDS:
            raise ApiError(
                openai_error(
                    400,
                    f"Unknown parameter: '{key}'.",
                    request,
                    param=key,
                    code="unknown_parameter",
                )
            )
    prompt, _, _ = provider.prompt(body, request, env)
    tokens = sum(count_tokens(segment) for segment in prompt.segments) or 1
    return JsonReply(
        200,
        {"object": "response.input_tokens", "input_tokens": tokens},
        {**openai_headers(request), "content-type": "application/json"},
    )
