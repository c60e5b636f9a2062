"""What two services that serve OpenAI Chat Completions do their own way.

- Mistral (``/v1``, its models: ``mistral-large-latest``, ``codestral-latest``...): a stream
  always carries the usage, on its last chunk, the one with the ``finish_reason`` (Mistral's
  release note of 2024-01-16, "Token usage information in streaming responses"; it takes no
  ``stream_options``). A tool call id is exactly 9 of ``[a-zA-Z0-9]``: the ids it issues are,
  and a request with another, in an assistant message's ``tool_calls`` or a tool message's
  ``tool_call_id``, is a 400 "Tool call id was <id> but must be a-z, A-Z, 0-9, with a
  length of 9." Its ``reasoning_effort`` is ``high`` or ``none``, another value a 422.
- OpenRouter (``/api/v1``): a stream always ends with a usage chunk (``choices: []``),
  ``stream_options.include_usage`` or not (its usage-accounting guide: the option is
  deprecated and has no effect). A Mistral model there (``mistralai/...``) keeps Mistral's tool
  call id rule: OpenRouter passes the ids through both ways, so a request giving back another
  id is Mistral's 400 (openclaw/openclaw#57672).
"""

from __future__ import annotations

import json
import re
from typing import Any

from metis.testing.emulator.rules import Refused

MISTRAL_MODEL = re.compile(
    r"^(open-)?(mistral|mixtral|codestral|devstral|magistral|ministral|pixtral|voxtral)-"
)
MISTRAL_TOOL_ID = re.compile(r"[a-zA-Z0-9]{9}")
MISTRAL_ID_LENGTH = 9


def path_of(call: Any) -> str:
    return str(getattr(getattr(call, "request", None), "path", ""))


def is_mistral(body: dict[str, Any], call: Any) -> bool:
    """A request to Mistral: its path (``/v1``, which OpenAI shares) and one of its models."""
    model = body.get("model")
    path = path_of(call)
    return path.startswith("/v1/") and isinstance(model, str) and bool(MISTRAL_MODEL.match(model))


def mistral_ids(body: dict[str, Any], call: Any) -> bool:
    """Whether the model behind the request holds to Mistral's tool call id rule: Mistral's own
    service, or OpenRouter serving one of Mistral's models."""
    model = body.get("model")
    openrouter = path_of(call).startswith("/api/v1/")
    on_openrouter = openrouter and isinstance(model, str) and model.startswith("mistralai/")
    return is_mistral(body, call) or on_openrouter


def always_usage(body: dict[str, Any], call: Any) -> bool:
    """Whether the service streams the usage whatever ``stream_options`` says."""
    return is_mistral(body, call) or path_of(call).startswith("/api/v1/")


def check_mistral_tool_ids(body: dict[str, Any], call: Any = None) -> None:
    """Mistral's rule for the tool call ids a request gives back."""
    if not mistral_ids(body, call):
        return
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        calls = message.get("tool_calls") or []
        given = (
            [c.get("id") for c in calls if isinstance(c, dict)] if isinstance(calls, list) else []
        )
        if message.get("role") == "tool":
            given.append(message.get("tool_call_id"))
        for tool_id in given:
            if not (isinstance(tool_id, str) and MISTRAL_TOOL_ID.fullmatch(tool_id)):
                raise Refused(
                    f"Tool call id was {tool_id} but must be a-z, A-Z, 0-9, with a length of 9."
                )


MISTRAL_EFFORTS = ("high", "none")
"""The ``reasoning_effort`` values Mistral takes (models.dev#1986, checked live)."""


def check_mistral_effort(body: dict[str, Any], call: Any = None) -> None:
    """Mistral's request schema: ``reasoning_effort`` is ``high`` or ``none`` (a 422, as for
    any field its schema refuses; the words are this emulator's, in the schema's style)."""
    effort = body.get("reasoning_effort")
    if effort is None or effort in MISTRAL_EFFORTS or not is_mistral(body, call):
        return
    raise Refused(
        f"reasoning_effort: Input should be 'high' or 'none' (got {effort!r})",
        "reasoning_effort",
        status=422,
    )


def usage_on_finish_chunk(payloads: list[bytes]) -> list[bytes]:
    """Mistral's stream from OpenAI's with the usage chunk: the usage moved onto the chunk
    before it (the one with the ``finish_reason``), and no ``"usage": null`` elsewhere."""
    chunks: list[dict[str, Any] | bytes] = []
    for payload in payloads:
        if payload == b"[DONE]":
            chunks.append(payload)
            continue
        data = json.loads(payload)
        usage = data.pop("usage", None)
        last = chunks[-1] if chunks else None
        if usage and not data["choices"] and isinstance(last, dict):
            last["usage"] = usage
            continue
        if usage:
            data["usage"] = usage
        chunks.append(data)
    return [c if isinstance(c, bytes) else json.dumps(c).encode() for c in chunks]
