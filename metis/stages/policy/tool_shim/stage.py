"""tool_shim: tool calling for endpoints that only take and give text (docs/contract.md).

Some endpoints (Hugging Face TGI, a bare model server) have no tool calling of their own. This
stage gives them the canonical one: on the way in it takes ``tools`` and ``tool_choice`` off
the request and writes a preamble into the system prompt (the tools as JSON, the exact call
syntax, what ``tool_choice`` demands); on the way out it reads the model's text and turns each
complete call into the canonical tool events. The syntax is the one many open models were
trained on (Hermes, Qwen)::

    <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

One tag per call; several follow one another when parallel calls are allowed. The results
come back as user text, ``<tool_result name="get_weather" id="tu_...">...</tool_result>``
(``is_error="true"`` on a failed call).

**The request.** With ``tool_choice`` ``none`` (or no tools) nothing is offered and the reply
is not parsed; ``any`` or a named tool is demanded in the preamble, which is all a text
endpoint allows (nothing enforces it, as a native provider's constrained decoding would).
History is rewritten in the same syntax, whatever provider made it: an assistant's
``tool_use`` blocks become tool-call tags in its text, a message's ``tool_result`` blocks
become ``<tool_result>`` user text (images in a result stay image blocks in place, for a model
that can see them), and a user turn made that way is merged with a user turn next to it, since
chat templates want roles to alternate. Ids in the history are canonical and are shown as they
are: the endpoint issues none for calls written as text. (A stack whose endpoint may still
answer with native tool calls, as TGI's does, puts ``tool_ids`` inside this stage, after it:
there it sees a history with no tool blocks left, and only gives the endpoint's own calls
canonical ids; the shim passes such calls on as they come.) The stage also asks the server to
stop at ``<tool_result`` (option ``stop_at_result``), so a model cannot go on to invent the
results of its own calls.

**The reply.** Text passes through as it arrives. Only the shortest suffix that could begin a
``<tool_call>`` tag is held back until the next fragment decides it, and whitespace that
would open a text block of its own is held until real text follows it (whitespace alone
between or around calls is layout: it is dropped, so no whitespace-only text block reaches a
provider that refuses one). A call is parsed when its closing tag arrives and becomes
``tool.use_start``, one ``tool.use_input_delta`` (the arguments' JSON exactly as the model
wrote it) and ``tool.use_end``, under a fresh canonical id, in the next block index: text
before a call is block *i*, the call *i+1*, text after it *i+2*. ``message.complete`` gets the
content rebuilt to match, and stop reason ``tool_use`` (its ``raw`` the provider's own string)
when calls were found and the model stopped on its own.

What is not a call stays text, with one WARN: a tag whose content is not a JSON object with a
``name`` (and an object of ``arguments``), or that names a tool the request did not offer
(running it is impossible, and inventing a call is worse than showing what the model said).
An unterminated tag at the end of the reply is text too (a WARN unless the reply was cut off:
cancelled, failed, or out of tokens). After a call, anything from ``<tool_result`` on is the
model writing results it cannot know, and is dropped (a WARN when there is more than the stop
string a server echoes back).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.errors import InvalidRequestError
from metis.model.events import StreamEvent
from metis.model.request import CanonicalRequest
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.services import StageServices
from metis.stages.policy.tool_shim.history import text_history, uses_tools
from metis.stages.policy.tool_shim.prompt import NO_TOOLS, into_first_user_turn, preamble
from metis.stages.policy.tool_shim.reply import ToolCallParser
from metis.stages.policy.tool_shim.tags import RESULT

log = logging.getLogger("metis")

MAX_STOP_SEQUENCES = 4
"""OpenAI's limit, and TGI's default ``--max-stop-sequences``: the stop string is only added
when the request leaves room for it."""


class ToolShim(EventHook[CanonicalRequest]):
    """A hook: ``open`` writes the tools into the prompt; its watch reads the calls out of
    the reply's text (``ToolCallParser``), in the engine's one loop."""

    name = "tool_shim"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        stop_at_result: bool = True
        """Ask the server to stop at ``<tool_result``, so the model cannot invent results."""

    options: Options
    _services = StageServices()

    def bind(self, services: StageServices) -> None:
        self._services = services  # what each model can serve

    async def open(
        self, request: CanonicalRequest, call: Call
    ) -> tuple[CanonicalRequest, Watch | None]:
        request, offered = self.rewrite(request, call)
        if offered is None:  # no tools offered: the reply is plain text, passed through
            return request, None
        return request, _Reading(ToolCallParser(offered, _warner(call)))

    def rewrite(
        self, request: CanonicalRequest, call: Call
    ) -> tuple[CanonicalRequest, frozenset[str] | None]:
        """The request as a text-only endpoint takes it, and the names of the tools offered
        (``None`` when none are, so the reply needs no parsing)."""
        tools, choice = request.tools, request.tool_choice
        history = uses_tools(request.messages)
        if not tools and not history and choice is None:
            return request, None
        named = choice.name if choice is not None and choice.type == "tool" else None
        if named is not None and tools and not any(tool.name == named for tool in tools):
            raise InvalidRequestError(
                f"tool_choice names tool {named!r}, which the request does not offer",
                provider=call.provider,
                request_id=request.request_id,
            )
        offered = bool(tools) and (choice is None or choice.type != "none")
        caps = self._services.capabilities_for(call.wire_model)
        messages = text_history(request.messages) if history else request.messages
        if offered:
            parallel = (
                request.parallel_tool_calls is not False and caps.supports_parallel_tool_calls
            )
            note: str | None = preamble(tools, choice, parallel)
        elif history:
            note = NO_TOOLS
        else:
            note = None
        update: dict[str, Any] = {
            "tools": [],
            "tool_choice": None,
            "parallel_tool_calls": None,
            "messages": messages,
        }
        if note is not None:
            if caps.supports_system_prompt:
                update["system_prompt"] = "\n\n".join(
                    p for p in (request.system_prompt, note) if p and p.strip()
                )
            else:
                update["messages"] = into_first_user_turn(messages, note)
        stops = request.stop_sequences
        if (
            offered
            and self.options.stop_at_result
            and RESULT not in stops
            and len(stops) < MAX_STOP_SEQUENCES
        ):
            update["stop_sequences"] = [*stops, RESULT]
        names = frozenset(tool.name for tool in tools) if offered else None
        return request.model_copy(update=update), names


class _Reading(Watch):
    """One reply read through the parser: each event in, what it lets out (often nothing
    while a tag is open, sometimes several)."""

    __slots__ = ("feed", "out")

    def __init__(self, parser: ToolCallParser) -> None:
        self.feed, self.out = parser.feed, parser.out

    def event(self, event: StreamEvent) -> StreamEvent | list[StreamEvent] | None:
        self.feed(event)
        out = self.out
        if not out:
            return None
        if len(out) == 1:
            only = out[0]
            out.clear()
            return only
        events = list(out)
        out.clear()
        return events


def _warner(call: Call) -> Callable[[str, str], None]:
    def warn(reason: str, text: str) -> None:
        log.warning(
            "tool_shim: %s: %.200s",
            reason,
            text,
            extra={
                "event": "metis.tool_shim",
                "request_id": call.request_id,
                "session_id": call.session_id,
                "adapter": call.provider,
                "reason": reason,
            },
        )

    return warn
