"""Reasoning and the sampling settings Converse has no field for, as Bedrock passes them to
each model family in ``additionalModelRequestFields`` (docs/reasoning.md): Claude takes
Anthropic's ``thinking`` and ``output_config.effort`` (and ``top_k``); OpenAI's open-weight
models ``reasoning_effort``; Nova 2 ``reasoningConfig``. The family is the catalog's reading
of the model's name (metis/catalog/first_party.py); a name it cannot read (an inference
profile's ARN) is taken for Claude's."""

from __future__ import annotations

from typing import Any

from metis.catalog.first_party import family_of
from metis.model.request import CanonicalRequest
from metis.wire.anthropic.knobs import sampling_fields, thinking_fields
from metis.wire.codec import EncodeContext
from metis.wire.knobs.forms import effort_of


def model_fields(
    request: CanonicalRequest, call: EncodeContext
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The request's ``inferenceConfig`` sampling fields and its
    ``additionalModelRequestFields`` (each empty when it needs none)."""
    family = family_of(call.wire_model)
    if family is None:  # an ARN or profile that names no model: Claude's fields, as before
        family = "claude"
    if family == "claude":  # Anthropic's rules hold: with thinking on, temperature 1 only, ...
        fields = _claude_fields(request, call)
        sampling = sampling_fields(request, fields.get("thinking"), call)
        if "top_k" in sampling:
            fields["top_k"] = sampling.pop("top_k")
        return {_INFERENCE[k]: v for k, v in sampling.items()}, fields
    inference = {
        _INFERENCE[name]: getattr(request, name)
        for name in ("temperature", "top_p")
        if getattr(request, name) is not None
    }
    if request.top_k is not None:
        call.warn_dropped("top_k", "this Bedrock model takes no top_k; it was not sent")
    return inference, _reasoning_fields(request, family, call)


_INFERENCE = {"temperature": "temperature", "top_p": "topP"}


def _claude_fields(request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
    if request.thinking is None:
        return {}
    return thinking_fields(request.thinking, request.max_output_tokens, call.wire_model)


def _reasoning_fields(
    request: CanonicalRequest, family: str, call: EncodeContext
) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    thinking = request.thinking
    if thinking is None:
        return fields
    if thinking.display is not None:
        call.warn_dropped("reasoning.display", "only Claude takes a display setting on Bedrock")
    if family == "gpt":
        fields["reasoning_effort"] = effort_of(thinking)
    elif family == "nova":
        effort = effort_of(thinking)
        fields["reasoningConfig"] = (
            {"type": "disabled"}
            if effort == "none"
            else {"type": "enabled", "maxReasoningEffort": _nova_level(effort)}
        )
    else:
        call.warn_dropped(
            "reasoning", "Bedrock has no reasoning setting for this model; it was not sent"
        )
    return fields


def _nova_level(effort: str) -> str:
    """Nova 2 takes low, medium and high."""
    return {"minimal": "low", "xhigh": "high", "max": "high"}.get(effort, effort)
