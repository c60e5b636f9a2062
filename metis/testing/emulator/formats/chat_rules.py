"""What OpenAI Chat Completions refuses with a 400: its table (``tables/chat.yaml``) and the
checks it names. DeepSeek's thinking mode adds rows and one check.
"""

from __future__ import annotations

import re
from functools import partial
from typing import Any

from metis.catalog.catalog import default_catalog
from metis.testing.emulator.formats import image_bytes
from metis.testing.emulator.formats.cache_marks import check_prompt_cache_key
from metis.testing.emulator.formats.chat_services import (
    check_mistral_effort,
    check_mistral_tool_ids,
)
from metis.testing.emulator.formats.knobs_rules import check_openai
from metis.testing.emulator.formats.openai import json_schema_format, strict_schema_problem
from metis.testing.emulator.formats.openai_cache_rules import check_openai_cache
from metis.testing.emulator.rules import LOADED, Refused, first, table
from metis.wire.chat_rules import chosen_function, tool_messages
from metis.wire.reasoning_rules import chat_effort

DEEPSEEK_THINKING = re.compile(r"^deepseek-(reasoner|v4)")
"""DeepSeek's models that think (V4 unless ``thinking: {type: disabled}``)."""


def _check_top_level(body: dict[str, Any], call: Any) -> None:
    """The fields Chat takes (the ``names`` of ``tables/chat.yaml``), OpenRouter's own on its
    path and DeepSeek's for its models."""
    path = str(getattr(getattr(call, "request", None), "path", ""))
    own = "openrouter" if path.startswith("/api/v1/") else None
    own = "deepseek" if str(body.get("model", "")).startswith("deepseek") else own
    chat = LOADED["chat"]
    taken = {*chat.choices("top level"), *(chat.choices(own) if own else ())}
    for key in body:
        if key not in taken:
            raise Refused(f"Unrecognized request argument supplied: {key}")


def _check_strict_tools(body: dict[str, Any], call: Any) -> None:
    for i, tool in enumerate(body.get("tools") or []):
        function = tool.get("function") or {}
        parameters = function.get("parameters", {"type": "object", "properties": {}})
        problem = strict_schema_problem(parameters) if function.get("strict") is True else None
        if problem:
            message = f"Invalid schema for function '{function['name']}': {problem}"
            raise Refused(message, f"tools[{i}].function.parameters", "invalid_function_parameters")


def _check_audio_input(body: dict[str, Any], call: Any) -> None:
    """An audio part to a model the catalog says does not hear (OpenAI's words for gpt-5-mini);
    a model the catalog does not know, or whose inputs it does not list, takes it."""
    info = default_catalog().get("openai", str(body.get("model", "")))
    heard = info.input_modalities if info is not None else None
    if heard is None or "audio" in heard:
        return
    for i, message in enumerate(body["messages"]):
        content = message.get("content")
        if isinstance(content, list) and any(
            isinstance(part, dict) and part.get("type") == "input_audio" for part in content
        ):
            raise Refused(
                f"Invalid 'messages[{i}]'. Content blocks are expected to be either text or "
                "image_url type.",
                f"messages[{i}]",
                "invalid_value",
            )


def _check_response_format(body: dict[str, Any], call: Any) -> None:
    fmt = body.get("response_format")
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        json_schema_format(fmt.get("json_schema"), "response_format.json_schema", "response_format")
    if (
        isinstance(fmt, dict)
        and fmt.get("type") == "json_object"
        and "json" not in str(body["messages"]).lower()
    ):
        message = (
            "'messages' must contain the word 'json' in some form, to use 'response_format' of "
            "type 'json_object'."
        )
        raise Refused(message, "messages")


RULES = table(
    "chat",
    {
        "top level": _check_top_level,
        "reasoning model": first(chat_effort),
        "strict tools": _check_strict_tools,
        "audio input": _check_audio_input,
        "image bytes": image_bytes.check_chat,
        "chosen function": first(chosen_function),
        "tool messages": first(lambda body: tool_messages(body["messages"])),
        "response format": _check_response_format,
        "model settings": partial(check_openai, default_temperature=True),
        "prompt cache": check_openai_cache,
        "prompt_cache_key": check_prompt_cache_key,
        "mistral tool ids": check_mistral_tool_ids,
        "mistral reasoning effort": check_mistral_effort,
    },
)
