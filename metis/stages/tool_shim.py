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

import html
import json
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from pydantic import BaseModel, ConfigDict

from metis.errors import InvalidRequestError
from metis.ids import new_tool_id
from metis.model.content import (
    ContentBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
    ToolUseBlock,
)
from metis.model.events import (
    MessageComplete,
    MessageStart,
    StreamEvent,
    TextDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import CanonicalRequest, ToolChoice, ToolDefinition
from metis.model.response import StopKind, StopReason
from metis.pipeline.call import Call
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage

log = logging.getLogger("metis")

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
RESULT = "<tool_result"
MAX_STOP_SEQUENCES = 4
"""OpenAI's limit, and TGI's default ``--max-stop-sequences``: the stop string is only added
when the request leaves room for it."""

Warn = Callable[[str, str], None]


class ToolShim(Stage[CanonicalRequest, CanonicalRequest, StreamEvent, StreamEvent]):
    name = "tool_shim"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        stop_at_result: bool = True
        """Ask the server to stop at ``<tool_result``, so the model cannot invent results."""

    options: Options
    _services = StageServices()

    def bind(self, services: StageServices) -> None:
        self._services = services  # what each model can serve

    def __call__(
        self, request: CanonicalRequest, call: Call, inner: Inner[CanonicalRequest, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        request, offered = self.rewrite(request, call)
        if offered is None:  # no tools offered: the reply is plain text, passed through
            return inner(request, call)
        return self._parse(request, call, inner, offered)

    def rewrite(
        self, request: CanonicalRequest, call: Call
    ) -> tuple[CanonicalRequest, frozenset[str] | None]:
        """The request as a text-only endpoint takes it, and the names of the tools offered
        (``None`` when none are, so the reply needs no parsing)."""
        tools, choice = request.tools, request.tool_choice
        history = _uses_tools(request.messages)
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
        messages = _text_history(request.messages) if history else request.messages
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
                update["messages"] = _into_first_user_turn(messages, note)
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

    async def _parse(
        self,
        request: CanonicalRequest,
        call: Call,
        inner: Inner[CanonicalRequest, StreamEvent],
        offered: frozenset[str],
    ) -> AsyncIterator[StreamEvent]:
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

        parser = ToolCallParser(offered, warn)
        feed, out = parser.feed, parser.out
        async for event in inner(request, call):
            feed(event)
            if out:
                for item in out:
                    yield item
                out.clear()


# The request --------------------------------------------------------------------------------

NO_TOOLS = (
    "No tools are available for this reply: answer in plain text, without any <tool_call> tag."
)


def preamble(tools: list[ToolDefinition], choice: ToolChoice | None, parallel: bool) -> str:
    """The system-prompt text that offers ``tools`` to a model with no tool calling."""
    listing = "\n".join(
        json.dumps(
            {"name": t.name, "description": t.description, "parameters": t.input_schema},
            ensure_ascii=False,
        )
        for t in tools
    )
    if parallel:
        how_many = (
            "To make several calls at once, write one <tool_call> tag per call, one after another."
        )
    else:
        how_many = "Make at most one tool call in a reply."
    if choice is not None and choice.type == "any":
        demand = "In this reply you must call at least one of the tools."
    elif choice is not None and choice.type == "tool":
        demand = f'In this reply you must call the tool "{choice.name}".'
    else:
        demand = (
            "Call a tool when it helps you answer; otherwise answer in plain text, without any "
            "<tool_call> tag."
        )
    return (
        "# Tools\n\n"
        "You can call the tools listed in <tools></tools> below, one JSON object per line: "
        "each tool's name, its description, and the JSON Schema of its arguments.\n\n"
        f"<tools>\n{listing}\n</tools>\n\n"
        "To call a tool, write exactly this, with the tool's name and its arguments as a JSON "
        "object that matches its schema:\n"
        '<tool_call>{"name": "<tool name>", "arguments": {<arguments>}}</tool_call>\n\n'
        f"{how_many} After your tool calls, end your reply and wait: each result comes back "
        'in the next message as <tool_result name="<tool name>" id="<call id>">...'
        '</tool_result> (with is_error="true" when the call failed). Never write a '
        "<tool_result> yourself.\n\n"
        f"{demand}"
    )


def render_call(name: str, arguments: dict[str, Any]) -> str:
    """One tool call in the syntax the preamble teaches."""
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{OPEN}{body}{CLOSE}"


def render_result_open(block: ToolResultBlock, name: str | None) -> str:
    attrs = f' name="{html.escape(name)}"' if name else ""
    attrs += f' id="{html.escape(block.tool_use_id)}"'
    if block.is_error:
        attrs += ' is_error="true"'
    return f"<tool_result{attrs}>"


def _uses_tools(messages: list[Message]) -> bool:
    return any(
        message.role is Role.TOOL or isinstance(block, ToolUseBlock | ToolResultBlock)
        for message in messages
        for block in message.content
    )


def _text_history(messages: list[Message]) -> list[Message]:
    """The history with tool calls and results written as text, in the preamble's syntax."""
    names = {
        block.id: block.name
        for message in messages
        for block in message.content
        if isinstance(block, ToolUseBlock)
    }
    out: list[Message] = []
    merge_next = False  # the last message is a converted user turn
    for message in messages:
        converted = False
        if message.role is Role.ASSISTANT:
            if any(isinstance(b, ToolUseBlock) for b in message.content):
                message = message.model_copy(update={"content": _assistant_text(message.content)})
        elif message.role is Role.TOOL or any(
            isinstance(b, ToolResultBlock) for b in message.content
        ):
            content = _results_text(message.content, names)
            message = Message(role=Role.USER, content=content, id=message.id)
            converted = True
        user_after_user = out and message.role is Role.USER and out[-1].role is Role.USER
        if user_after_user and (converted or merge_next):
            out[-1] = _merged(out[-1], message)
            merge_next = True
            continue
        out.append(message)
        merge_next = converted
    return out


def _assistant_text(content: list[ContentBlock]) -> list[ContentBlock]:
    """An assistant turn's text and calls as one text block, its other blocks in place."""
    out: list[ContentBlock] = []
    parts: list[str] = []
    after_call = False
    for block in content:
        if isinstance(block, TextBlock):
            if after_call and block.text and not block.text[0].isspace():
                parts.append("\n")
            parts.append(block.text)
            after_call = False
        elif isinstance(block, ToolUseBlock):
            if parts and parts[-1] and not parts[-1].endswith("\n"):
                parts.append("\n")
            parts.append(render_call(block.name, block.input))
            after_call = True
        else:
            if parts:
                out.append(TextBlock(text="".join(parts)))
                parts = []
            out.append(block)
            after_call = False
    if parts:
        out.append(TextBlock(text="".join(parts)))
    return out


def _results_text(content: list[ContentBlock], names: dict[str, str]) -> list[ContentBlock]:
    """A turn's tool results (and anything else it holds) as user content."""
    out: list[ContentBlock] = []
    parts: list[str] = []

    def text(piece: str) -> None:
        if parts and not parts[-1].endswith("\n"):
            parts.append("\n")
        parts.append(piece)

    def flush() -> None:
        if parts:
            out.append(TextBlock(text="".join(parts)))
            parts.clear()

    for block in content:
        if isinstance(block, ToolResultBlock):
            text(render_result_open(block, names.get(block.tool_use_id)))
            if isinstance(block.content, str):
                parts.append(block.content)
            else:
                for part in block.content:
                    if isinstance(part, TextBlock):
                        parts.append(part.text)
                    else:  # an image: kept in place, for a model that can see it
                        flush()
                        out.append(part)
            parts.append("</tool_result>")
        elif isinstance(block, TextBlock):
            if parts:
                parts.append("\n")
            parts.append(block.text)
        else:
            flush()
            out.append(block)
    flush()
    return out


def _merged(first: Message, second: Message) -> Message:
    a, b = first.content, second.content
    if a and b and isinstance(a[-1], TextBlock) and isinstance(b[0], TextBlock):
        seam = TextBlock(text=f"{a[-1].text}\n\n{b[0].text}")
        content = [*a[:-1], seam, *b[1:]]
    else:
        content = [*a, *b]
    return first.model_copy(update={"content": content})


def _into_first_user_turn(messages: list[Message], note: str) -> list[Message]:
    """For a model that takes no system prompt: ``note`` opens the first user turn."""
    for i, message in enumerate(messages):
        if message.role is Role.USER:
            content = list(message.content)
            if content and isinstance(content[0], TextBlock):
                content[0] = TextBlock(text=f"{note}\n\n{content[0].text}")
            else:
                content.insert(0, TextBlock(text=note))
            return [
                *messages[:i],
                message.model_copy(update={"content": content}),
                *messages[i + 1 :],
            ]
    return [Message.user(note), *messages]


# The reply ----------------------------------------------------------------------------------

_TEXT, _CALL, _DROP = 0, 1, 2  # modes: text, inside a tag, dropping invented results
_ABRUPT = (StopKind.CANCELLED, StopKind.ERROR, StopKind.MAX_TOKENS)
_SELF_STOPPED = (StopKind.END_TURN, StopKind.STOP_SEQUENCE)


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)
_WS = " \t\r\n"


class ToolCallParser:
    """The reply side as a small state machine over canonical events, usable on its own:
    ``feed`` one event from inside, then take what to pass outward from ``out``.

    Output blocks are kept in ``_blocks`` in index order: a list of text fragments for a text
    block (joined once, at the end), a ToolUseBlock for a parsed call, or the inner index of
    any other block (reasoning, a native tool call), copied from the inner final content.
    """

    __slots__ = (
        "_blocks",
        "_body",
        "_calls",
        "_discarded",
        "_held",
        "_inner_index",
        "_inner_text",
        "_mapped",
        "_mode",
        "_seen",
        "_tail",
        "_text_index",
        "_text_parts",
        "_tools",
        "_warn",
        "_ws",
        "out",
    )

    def __init__(self, tools: frozenset[str], warn: Warn) -> None:
        self.out: list[StreamEvent] = []
        self._tools = tools
        self._warn = warn
        self._blocks: list[Any] = []
        self._inner_index = -1
        self._inner_text = False
        self._seen: set[int] = set()
        self._mapped: dict[int, int] = {}
        self._text_parts: list[str] | None = None
        self._text_index = -1
        self._mode = _TEXT
        self._held = ""  # text mode: a suffix that could begin a tag
        self._ws = ""  # whitespace that would open a text block of its own
        self._body: list[str] = []  # call mode: the tag's content so far
        self._tail = ""  # call mode: the last characters, where a closing tag may begin
        self._calls = 0
        self._discarded = 0

    @property
    def calls(self) -> int:
        return self._calls

    def feed(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            text = event.text
            parts = self._text_parts
            if (
                parts is not None
                and not self._mode
                and not self._held
                and event.content_block_index == self._inner_index
                and "<" not in text
            ):  # the hot path: more text for the open block, with no tag in sight
                parts.append(text)
                event.content_block_index = self._text_index
                self.out.append(event)
                return
            if event.content_block_index != self._inner_index or not self._inner_text:
                self._switch(event.content_block_index, text=True)
            if self._mode == _TEXT and not self._held and "<" not in text:
                self._emit(text, event)
            else:
                self._consume(text)
        elif isinstance(event, MessageComplete):
            self._complete(event)
        elif isinstance(event, MessageStart):
            self.out.append(event)
        else:  # reasoning, or a tool call the endpoint made itself: moved to its new index
            index = getattr(event, "content_block_index", None)
            if isinstance(index, int):
                if index != self._inner_index or self._inner_text:
                    self._switch(index, text=False)
                setattr(event, "content_block_index", self._mapped[index])  # noqa: B010
            self.out.append(event)

    # Blocks ------------------------------------------------------------------------------

    def _switch(self, index: int, text: bool) -> None:
        if self._inner_text:
            self._flush(abrupt=False)
        self._inner_index = index
        self._inner_text = text
        self._seen.add(index)
        if not text:
            self._text_parts = None
            self._ws = ""
            if index not in self._mapped:
                self._mapped[index] = len(self._blocks)
                self._blocks.append(index)

    def _emit(self, text: str, event: TextDelta | None = None) -> None:
        """Pass ``text`` outward as text; whitespace that would open a block is held."""
        if not text:
            return
        parts = self._text_parts
        if parts is None:
            if text.isspace():
                self._ws += text
                return
            if self._ws:
                text, event, self._ws = self._ws + text, None, ""
            self._text_index = len(self._blocks)
            parts = self._text_parts = []
            self._blocks.append(parts)
        parts.append(text)
        if event is None:
            self.out.append(TextDelta(self._text_index, text))
        else:  # the inner event, carrying this very text: only its index changes
            event.content_block_index = self._text_index
            self.out.append(event)

    def _consume(self, text: str) -> None:
        if self._mode == _DROP:
            self._discarded += len(text)
            return
        if self._mode == _TEXT and self._held:
            text, self._held = self._held + text, ""
        pos, end = 0, len(text)
        while pos < end:
            if self._mode == _CALL:
                pos = self._in_call(text, pos)
                continue
            start = text.find(OPEN, pos)
            result = text.find(RESULT, pos) if self._calls else -1
            if result != -1 and (start == -1 or result < start):
                self._emit(text[pos:result])
                self._mode = _DROP
                self._discarded = end - result
                self._ws = ""
                return
            if start == -1:
                lt = text.rfind("<", pos)
                if lt != -1 and _may_begin_tag(text[lt:], self._calls > 0):
                    self._emit(text[pos:lt])
                    self._held = text[lt:]
                else:
                    self._emit(text[pos:])
                return
            self._emit(text[pos:start])
            self._mode = _CALL
            self._body = []
            self._tail = ""
            pos = start + len(OPEN)

    def _in_call(self, text: str, pos: int) -> int:
        """Take the tag's content from ``text[pos:]``; where text mode resumes, or the end."""
        tail = self._tail
        rest = text[pos:]
        window = tail + rest
        found = window.find(CLOSE)
        if found == -1:
            self._body.append(rest)
            self._tail = window[-(len(CLOSE) - 1) :]
            return len(text)
        body = "".join(self._body)
        if found >= len(tail):
            body += window[len(tail) : found]
        else:  # the closing tag began in an earlier fragment
            body = body[: len(body) - (len(tail) - found)]
        self._body = []
        self._tail = ""
        self._mode = _TEXT
        self._call(body)
        return pos + found - len(tail) + len(CLOSE)

    def _call(self, body: str) -> None:
        parsed = parse_call(body)
        if isinstance(parsed, str):
            self._warn(parsed, body)
            self._emit(OPEN + body + CLOSE)
            return
        name, arguments, raw = parsed
        if name not in self._tools:
            self._warn(f"the model called {name!r}, a tool the request does not offer", body)
            self._emit(OPEN + body + CLOSE)
            return
        self._text_parts = None
        self._ws = ""
        index = len(self._blocks)
        tool_id = new_tool_id()
        self._blocks.append(ToolUseBlock(id=tool_id, name=name, input=arguments))
        self._calls += 1
        self.out.append(ToolUseStart(index, tool_id, name))
        self.out.append(ToolUseInputDelta(index, tool_id, raw))
        self.out.append(ToolUseEnd(index, tool_id, name, arguments))

    def _flush(self, abrupt: bool) -> None:
        """The inner text block ended: what was held back is text after all."""
        if self._mode == _CALL:
            body = "".join(self._body)
            self._mode, self._body, self._tail = _TEXT, [], ""
            if not abrupt:
                self._warn("a <tool_call> tag was never closed", body)
            self._emit(OPEN + body)
        elif self._held:
            held, self._held = self._held, ""
            self._emit(held)
        if self._ws and not self._calls and self._text_parts is None:
            ws, self._ws = self._ws, ""  # a reply of whitespace alone, and no call: as it came
            self._text_index = len(self._blocks)
            self._text_parts = [ws]
            self._blocks.append(self._text_parts)
            self.out.append(TextDelta(self._text_index, ws))
        self._ws = ""

    def _complete(self, event: MessageComplete) -> None:
        stop = event.stop_reason
        if self._inner_text:
            self._flush(abrupt=stop.kind in _ABRUPT)
        inner = event.final_content
        content: list[ContentBlock] = []
        for block in self._blocks:
            if isinstance(block, list):
                content.append(TextBlock(text="".join(block)))
            elif isinstance(block, int):
                if block < len(inner):
                    content.append(inner[block])
            else:
                content.append(block)
        # Blocks the inner stream never announced with an event are kept, after the rest.
        content.extend(b for i, b in enumerate(inner) if i not in self._seen)
        event.final_content = content
        if self._calls and (
            stop.kind in _SELF_STOPPED
            or (self._mode == _DROP and stop.kind is StopKind.PROVIDER_SPECIFIC)
        ):
            event.stop_reason = StopReason(kind=StopKind.TOOL_USE, raw=stop.raw)
        if self._discarded > len(RESULT):
            self._warn(
                f"the model wrote tool results of its own after its calls; dropped "
                f"{self._discarded} characters",
                RESULT,
            )
        self.out.append(event)


def _may_begin_tag(suffix: str, after_call: bool) -> bool:
    return OPEN.startswith(suffix) or (after_call and RESULT.startswith(suffix))


def parse_call(body: str) -> tuple[str, dict[str, Any], str] | str:
    """``(name, arguments, the arguments' JSON as written)`` from a tag's content, or the
    reason it is not a call. ``parameters`` is taken for ``arguments`` (Llama 3.1 writes it),
    arguments given as a JSON string are unpacked, and a Markdown code fence is looked past."""
    text = body.strip(_WS)
    if text.startswith("```"):
        text = text[text.find("\n") + 1 :] if "\n" in text else ""
        text = text.rstrip(_WS).removesuffix("```").strip(_WS)
    members = _members(text)
    if members is None:
        return "a <tool_call> tag does not hold a JSON object"
    name = members.get("name", (None, ""))[0]
    if not isinstance(name, str) or not name:
        return 'a <tool_call> tag has no "name"'
    for key in ("arguments", "parameters"):
        if key in members:
            value, raw = members[key]
            break
    else:
        return name, {}, "{}"
    if isinstance(value, str):
        if not value.strip(_WS):  # "arguments": "" is how some models say "none"
            return name, {}, "{}"
        unpacked = _members(value.strip(_WS))
        if unpacked is None:
            return f"the arguments of a call to {name!r} are not a JSON object"
        return name, {k: v for k, (v, _) in unpacked.items()}, value
    if not isinstance(value, dict):
        return f"the arguments of a call to {name!r} are not a JSON object"
    return name, value, raw


def _members(text: str) -> dict[str, tuple[Any, str]] | None:
    """A JSON object's top-level members, each as (value, its JSON text as written); None if
    ``text`` is not exactly one JSON object."""
    if not text.startswith("{"):
        return None
    members: dict[str, tuple[Any, str]] = {}
    end = len(text)
    pos = _skip(text, 1)
    try:
        if pos < end and text[pos] == "}":
            return members if _skip(text, pos + 1) == end else None
        while pos < end:
            if text[pos] != '"':
                return None
            key, pos = _DECODER.raw_decode(text, pos)
            pos = _skip(text, pos)
            if pos >= end or text[pos] != ":":
                return None
            pos = _skip(text, pos + 1)
            value, after = _DECODER.raw_decode(text, pos)
            members[key] = (value, text[pos:after])
            pos = _skip(text, after)
            if pos < end and text[pos] == ",":
                pos = _skip(text, pos + 1)
            elif pos < end and text[pos] == "}":
                return members if _skip(text, pos + 1) == end else None
            else:
                return None
    except (ValueError, RecursionError):
        return None
    return None


def _skip(text: str, pos: int) -> int:
    end = len(text)
    while pos < end and text[pos] in _WS:
        pos += 1
    return pos
