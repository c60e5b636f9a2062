"""A tool call streamed as Text Generation Inference's tool grammar wrote it (TGI 1.4.3 to 3.1).

TGI's tool calling constrains the model's output to the JSON ``{"function": {"_name": name,
...arguments}}`` (from 2.0; 1.4's has no ``_name``, and its whole reply names the call
``tools``), and streams that text token by token as the ``arguments`` of ``delta.tool_calls``
fragments that name no function (``name: null``), one call a reply (huggingface/text-generation-
inference ``router/src/server.rs``, ``create_event_from_stream_token``; 3.2 on stream the name
and the arguments alone, as OpenAI does). :class:`GrammarCall` gathers the text; when the reply
ends it is read as the call it names, with the other fields its input. Text that is not such
JSON (the reply was cut off) is the arguments of a call named ``tools``, as they came.
"""

from __future__ import annotations

import json
from typing import Any

UNNAMED = "tools"
"""The name TGI 1.4 gives the call its grammar made (no ``_name`` in the JSON)."""


class GrammarCall:
    """The grammar's text of one streamed reply, so far."""

    __slots__ = ("pieces",)

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def add(self, piece: str) -> None:
        self.pieces.append(piece)

    def take(self) -> tuple[str, str] | None:
        """The call the text names, as its name and its arguments' JSON text; None when no
        text came. The text is taken: a second take gives None."""
        if not self.pieces:
            return None
        text = "".join(self.pieces)
        self.pieces = []
        try:
            wrapped = json.loads(text)
        except ValueError:
            return UNNAMED, text
        function = wrapped.get("function") if wrapped.__class__ is dict else None
        if function.__class__ is not dict:
            return UNNAMED, text
        arguments: dict[str, Any] = dict(function)
        name = arguments.pop("_name", None)
        name = name if name.__class__ is str and name else UNNAMED
        return name, json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
