"""The request body's own fields, rendered from ``request_schema`` (the messages are
:mod:`metis.wire.schema.encode`'s): the tools, the tool choice, the output limit, sampling,
reasoning and structured output, as the stack's ``body_template`` places them."""

from __future__ import annotations

import logging
from typing import Any

from metis.model.request import CanonicalRequest
from metis.wire.codec import EncodeContext
from metis.wire.encoded_messages import sent_schema
from metis.wire.knobs.sampling import sampling_fields
from metis.wire.schema.compiled import Compiled
from metis.wire.schema.paths import OMIT
from metis.wire.schema.thinking import thinking_values

log = logging.getLogger("metis")


def body_values(schema: Compiled, request: CanonicalRequest, call: EncodeContext) -> dict[str, Any]:
    """The values ``request_schema.body_template`` is rendered with (``{tools}``,
    ``{tool_choice}``, ``{temperature}``...): the request's own, each tool by ``tool_template``
    and the tool choice by its ``tool_choice`` template."""
    tools = [
        schema.tool.render(
            {
                "name": tool.name,
                "description": tool.description or None,
                "input_schema": sent_schema(tool.input_schema),
            }
        )
        for tool in request.tools
    ]
    choice: Any = None
    if request.tools and request.tool_choice is not None:
        template = schema.choices[request.tool_choice.type]
        if template is not None:
            choice = template.render({"name": request.tool_choice.name})
        else:
            log.warning(
                "%s takes no tool_choice %r; the provider's default applies",
                call.provider,
                request.tool_choice.type,
            )
    output = request.output_schema
    title = output.get("title") if output else None
    return {
        "model": call.wire_model,
        "stream": bool(request.stream),
        "max_output_tokens": request.max_output_tokens,
        "temperature": request.temperature,
        "stop_sequences": list(request.stop_sequences) or None,
        "output_schema": output,
        "output_schema_name": title if isinstance(title, str) and title else "output",
        **thinking_values(request.thinking),
        **sampling_fields(request),
        "parallel_tool_calls": request.parallel_tool_calls,
        "tools": [t for t in tools if t is not OMIT] or None,
        "tool_choice": None if choice is OMIT else choice,
    }


def merge(target: dict[str, Any], extra: dict[str, Any]) -> None:
    """``extra`` merged into ``target``, objects key by key."""
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = value
