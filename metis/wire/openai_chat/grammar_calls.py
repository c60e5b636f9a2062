"""A tool call streamed as Text Generation Inference's tool grammar wrote it (TGI 1.4.3 to 3.1).

TGI's tool calling constrains the model's output to the JSON ``{"function": {"_name": name,
...arguments}}`` (from 2.0; 1.4's has no ``_name``, and its whole reply names the call
``tools``), and streams that text token by token as the ``arguments`` of ``delta.tool_calls``
fragments that name no function (``name: null``), one call a reply (huggingface/text-generation-
inference ``router/src/server.rs``, ``create_event_from_stream_token``; 3.2 on stream the name
and the arguments alone, as OpenAI does). :class:`GrammarCall` gathers the text; when the reply
ends it is read as the call it names, with the other fields its input. Text that is not such
JSON (the reply was cut off) is the arguments of a call named ``tools``, as they came.

From 2.0.1 to 2.3.1 the grammar offers a tool of TGI's own besides the request's,
``notify_error`` (``{"error": "..."}``: the model says it cannot call a tool, the request
lacking what one needs), and its call comes as any other; :func:`notified_error` reads it as
TGI meant it, the reply's text (2.3.1 answers a whole reply's so, ``server.rs``
``chat_completions``; 2.4 replaced it with ``no_tool``, answered as text).
"""

from __future__ import annotations

import json
from typing import Any

from metis.wire.json_limits import loads

UNNAMED = "tools"
"""The name TGI 1.4 gives the call its grammar made (no ``_name`` in the JSON)."""
ERROR_TOOL = "notify_error"
"""The tool TGI 2.0.1 to 2.3.1 add to the grammar for the model to say it calls none."""


def notified_error(calls: list[Any]) -> str | None:
    """The message of a whole reply's ``tool_calls`` when they are TGI's one ``notify_error``
    call (its ``arguments`` an object, or their JSON text); None for any other calls."""
    call = calls[0] if len(calls) == 1 else None
    function = call.get("function") if call.__class__ is dict else None
    if function.__class__ is not dict or function.get("name") != ERROR_TOOL:
        return None
    given = function.get("arguments")
    if given.__class__ is str:
        try:
            given = loads(given)
        except ValueError:
            return None
    said = given.get("error") if given.__class__ is dict else None
    return said if said.__class__ is str else None


class GrammarCall:
    """The grammar's text of one streamed reply, so far."""

    __slots__ = ("pieces",)

    def __init__(self) -> None:
        self.pieces: list[str] = []

    def add(self, piece: str) -> None:
        self.pieces.append(piece)

    def take_error(self) -> str | None:
        """The message of the text when it is a whole ``notify_error`` call (taken then, so
        :meth:`take` gives None); None, the text left, when it is anything else."""
        if not self.pieces:
            return None
        try:
            wrapped = loads("".join(self.pieces))
        except ValueError:
            return None
        function = wrapped.get("function") if wrapped.__class__ is dict else None
        if function.__class__ is not dict or function.get("_name") != ERROR_TOOL:
            return None
        said = function.get("error")
        if said.__class__ is not str:
            return None
        self.pieces = []
        return said

    def take(self) -> tuple[str, str] | None:
        """The call the text names, as its name and its arguments' JSON text; None when no
        text came. The text is taken: a second take gives None."""
        if not self.pieces:
            return None
        text = "".join(self.pieces)
        self.pieces = []
        try:
            wrapped = loads(text)
        except ValueError:
            return UNNAMED, text
        function = wrapped.get("function") if wrapped.__class__ is dict else None
        if function.__class__ is not dict:
            return UNNAMED, text
        arguments: dict[str, Any] = dict(function)
        name = arguments.pop("_name", None)
        name = name if name.__class__ is str and name else UNNAMED
        return name, json.dumps(arguments, separators=(",", ":"), ensure_ascii=False)
