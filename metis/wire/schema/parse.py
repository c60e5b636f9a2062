"""Provider JSON -> canonical events, driven by ``response_schema`` / ``stream_schema``.

One parser reads a whole body and each streamed chunk alike: a chunk is a small response.
``blocks`` mode walks the list at ``content_path`` and detects each item's kind; text items
accumulate into the current text block (a stream's text arrives as many small parts), and a
tool call item is a whole call. ``separate`` mode reads the object at ``content_path``: its
text field is a text fragment and each item of its tool-call list a call or, when its id is
absent, the next fragment of the call at its index (``tool_call_index``) or position.

Ids: a call without one gets ``<minted_id_prefix><response id>_<n>`` (n counts the calls of
the response), the same whether the response was streamed or not; with no response id, a
random token stands in for it.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from metis.errors import AdapterError, ProtocolError
from metis.model.events import StreamEvent
from metis.model.response import StopKind, StopReason
from metis.wire.builder import MessageBuilder
from metis.wire.opaque import REPLY_ONLY
from metis.wire.read import malformed
from metis.wire.schema.compiled import Reading, detect
from metis.wire.schema.gemini_call_args import StreamedCallArgs
from metis.wire.schema.gemini_mcp import HeldCalls
from metis.wire.schema.gemini_tools import GeminiParts
from metis.wire.schema.parse_steps import image_of, read_usage, report_dropped, thinking
from metis.wire.schema.paths import Path, getter
from metis.wire.schema.usual import UsualChunk

_HELD = -2  # ``_last`` while a call is held: no open block is the last one
ErrorReader = Callable[[dict[str, Any]], AdapterError]


class SchemaParser:
    __slots__ = (
        "_args",
        "_b",
        "_calls",
        "_dropped",
        "_echo",
        "_error",
        "_errors",
        "_extra",
        "_finish",
        "_held",
        "_last",
        "_lone",
        "_name",
        "_opaque",
        "_open",
        "_pending_usage",
        "_r",
        "_response_id",
        "_streamed",
        "_text_block",
        "_text_key",
        "_usual",
        "_where",
    )

    def __init__(
        self,
        name: str,
        reading: Reading,
        echo: list[str],
        error_path: Path,
        errors: ErrorReader,
        builder: MessageBuilder,
        streamed: bool,
        extra: GeminiParts | None = None,
        usual: UsualChunk | None = None,
    ) -> None:
        self._name = name
        self._usual = usual  # the shape of most chunks, read at once
        self._extra = extra  # a dialect's server-tool parts and citations
        self._r = reading
        self._echo = echo
        lone = reading.lone_text_key
        self._lone = lone if lone not in echo else None  # an echoed key needs the long way
        self._error = getter(error_path)
        self._errors = errors
        self._b = builder
        self._streamed = streamed
        self._where = f"{name} {'chunk' if streamed else 'response'}"  # names fields in errors
        self._args = StreamedCallArgs(self._where) if extra is not None else None
        self._held = HeldCalls() if extra is not None else None  # calls Gemini may answer
        self._response_id: str | None = None
        self._calls = 0
        self._opaque = 0  # parts kept whole as opaque blocks
        self._open: dict[Any, tuple[Hashable, str | None]] = {}  # separate mode: index -> call
        self._text_key: Hashable = "text"
        self._text_block = -1  # canonical index of the open text block
        self._last = -1  # canonical index of the last block opened
        self._finish: StopReason | None = None
        self._dropped: set[str] = set()
        self._pending_usage: dict[str, Any] | None = None
        # Usage comes in every chunk and only the last counts: it is read once, when the
        # message finishes (also when it finishes early, on an error or a cancel).

    # StreamParser ----------------------------------------------------------------------------

    def feed(self, obj: dict[str, Any]) -> Sequence[StreamEvent]:
        usual = self._usual
        if usual is not None and self._text_block == self._last >= 0:
            extra, args = self._extra, self._args
            text = usual.text(obj, extra.index if extra is not None else None)
            if text is not None and (args is None or not args.pending):
                if (usage := obj.get(usual.usage)).__class__ is dict:
                    self._pending_usage = usage
                return self._b.take_text(self._text_key, text)
        if self._error(obj).__class__ is dict:
            raise self._errors(obj)
        if self._extra is not None:
            obj = self._extra.candidate(obj, self._where)
        self._read(obj)
        return self._b.take() if self._streamed else ()  # a whole reply's: given by end()

    def interrupt(self, reason: StopReason) -> Sequence[StreamEvent]:
        self.read_pending_usage()
        self._read_held()
        self._b.finish(reason)
        return self._b.take()

    def read_pending_usage(self) -> None:
        """Read the last usage seen, if the message ends early: unreadable, it is estimated."""
        if self._pending_usage is not None:
            with contextlib.suppress(ProtocolError):  # already failing: estimate instead
                self._apply_usage()

    def end(self) -> Sequence[StreamEvent]:
        builder = self._b
        if self._pending_usage is not None:
            self._apply_usage()
        if self._finish is None:
            if self._streamed or self._last < 0:  # (a whole reply: when nothing came either)
                what = "stream ended before its" if self._streamed else "reply had no candidate nor"
                raise ProtocolError(f"{self._name} {what} finish reason", provider=builder.provider)
            self._finish = StopReason(kind=StopKind.PROVIDER_SPECIFIC, raw=None)
        self._read_held()
        if self._args is not None:  # a streamed call the reply never ended
            self._whole_calls(self._args.flush())
        if self._extra is not None:
            self._extra.finish(builder, self._text_key)
        stop = self._finish
        if stop.raw in self._r.tool_use_raw and self._calls:
            stop = StopReason(kind=StopKind.TOOL_USE, raw=stop.raw)
        builder.stop(stop)
        builder.finish()
        return builder.take()

    # Reading ---------------------------------------------------------------------------------

    def _read(self, obj: dict[str, Any]) -> None:
        r = self._r
        builder = self._b
        if not builder.started:
            self._response_id = _opt_str(r.response_id(obj)) if r.response_id else None
            builder.start(self._response_id, _opt_str(r.model(obj)) if r.model else None)
        envelope = r.envelope(obj) if r.envelope is not None else None
        for scoped, get, mapping, default in r.finish:
            raw = get(envelope if scoped else obj)
            if raw is not None:
                if raw.__class__ is not str:
                    raise malformed(f"{self._where} finish reason", "a string", raw)
                self._finish = StopReason(kind=mapping.get(raw, default), raw=raw)
                break
        content = r.content(envelope if r.content_scoped else obj)
        if content:
            if r.separate:
                if content.__class__ is not dict:
                    raise malformed(f"{self._where}.{r.content_path}", "an object", content)
                self._message(content)
            else:
                if content.__class__ is not list:
                    raise malformed(f"{self._where}.{r.content_path}", "a list", content)
                lone = self._lone
                for part in content:
                    if lone is not None and part.__class__ is dict and len(part) == 1:
                        text = part.get(lone)  # the hot path: a part that is its text alone
                        if text.__class__ is str:
                            if self._args is not None and self._args.pending:
                                self._whole_calls(self._args.flush())
                            if text and self._text_block == self._last >= 0:
                                builder.text(self._text_key, text)  # more of the open block
                            else:
                                self._text(text, None)
                            continue
                    self._part(part)
        if self._extra is not None:
            self._extra.seen(obj)
        usage = r.usage(obj)
        if usage.__class__ is dict:
            self._pending_usage = usage
        keys = r.dropped_keys  # None: look for each; else look only if one of them is there
        if keys is None or (envelope.__class__ is dict and not keys.isdisjoint(envelope)):
            report_dropped(self._name, r, builder, self._dropped, obj, envelope)

    def _part(self, part: Any) -> None:
        if part.__class__ is not dict:
            raise malformed(f"{self._where} content part", "an object", part)
        if None in part.values():  # a field given as null is a field not given
            part = {key: value for key, value in part.items() if value is not None}
            if not part:
                return
        if self._args is not None:  # Gemini's streamed call arguments
            done, taken = self._args.feed(part)
            self._whole_calls(done)
            if taken:
                return
        kind = detect(self._r.detect, part)
        if (held := self._held) is not None:
            if kind == "tool_call" and not self._no_call():
                if held.answered:
                    self._read_held()
                held.hold(part, self._where)
                self._last = _HELD  # no text joins a block opened before the held call
                return
            if self._last == _HELD:
                if held.answer(part):
                    return
                self._read_held()
        if kind == "text":
            key = self._r.text_key
            text = part.get(key) if key is not None else self._r.text_value(part)
            self._text(self._str(text, "text"), self._echoed(part) if self._echo else None)
        elif kind == "thinking":
            if thinking(self._r, part, self._b, self._where):
                self._last = self._index("thinking")
        elif kind == "tool_call" and not self._no_call():
            self._tool_call(part, whole=True)
        elif kind == "image" and (image := self._image(part)) is not None:
            self._last = image
        elif self._extra is not None and (made := self._extra.part(part, self._b)) is not None:
            self._last = made
        else:  # no canonical form: kept whole, to go back only to this provider
            self._opaque_part(part, kind)

    def _opaque_part(self, part: dict[str, Any], kind: str | None) -> None:
        block_type = next((str(k) for k in part if k not in self._echo), "part")
        opaque_key = ("opaque", self._opaque)
        self._opaque += 1
        self._b.opaque(opaque_key, block_type, part, REPLY_ONLY if kind == "tool_call" else None)
        self._last = self._index(opaque_key)

    def _read_held(self) -> None:
        """The held calls and responses, read now that the part after them came."""
        if self._last != _HELD or self._held is None:
            return
        for part, block in self._held.take(self._response_id):
            if block is not None:
                key = ("mcp", self._opaque, block.type)
                self._opaque += 1
                self._b.server_tool(key, block)
                self._last = self._index(key)
            elif "functionCall" in part:
                self._tool_call(part, whole=True)
            else:
                self._opaque_part(part, None)

    def _image(self, part: dict[str, Any]) -> int | None:
        """The index of the image block ``part`` made, its echoed fields (a thought
        signature) kept for the way back; None for other media."""
        if (image := image_of(self._r, part, self._where)) is None:
            return None
        key = ("image", self._opaque)
        self._opaque += 1
        self._b.image(key, image, self._echoed(part) or {})
        return self._index(key)

    def _message(self, message: dict[str, Any]) -> None:
        r = self._r
        if r.thinking_field is not None:
            thinking = r.thinking_field(message)
            if thinking:
                self._b.thinking("thinking", self._str(thinking, "reasoning"))
                self._last = self._index("thinking")
        text = r.text_field(message)
        if text:
            self._text(self._str(text, "text"), self._echoed(message))
        calls = r.tool_calls_field(message)
        if calls:
            if calls.__class__ is not list:
                raise malformed(f"{self._where} tool calls", "a list", calls)
            for position, item in enumerate(calls):
                self._tool_call(item, whole=False, position=position)

    def _text(self, text: str, echo: dict[str, Any] | None) -> None:
        builder = self._b
        if text and not echo and self._text_block == self._last >= 0:
            builder.text(self._text_key, text)  # the hot path: more of the open text block
            return
        if self._last == _HELD:
            self._read_held()
        current = self._text_block if self._text_block == self._last else -1
        if echo and current >= 0 and builder.has_raw(current):
            # A second signed text part: a block of its own, so each keeps its signature.
            self._text_key = ("text", self._last + 1)
            current = -1
        if text or (echo and current < 0):
            builder.text(self._text_key, text)
            self._text_block = self._last = self._index(self._text_key)
        if echo:
            builder.keep_raw(self._text_block, echo)

    def _tool_call(self, item: Any, whole: bool, position: int = 0) -> None:
        if item.__class__ is not dict:
            raise malformed(f"{self._where} tool call", "an object", item)
        r = self._r
        builder = self._b
        tool_id = _opt_str(r.tool_id(item)) if r.tool_id else None
        index: Any = r.tool_index(item) if r.tool_index else None
        if index is None:
            index = position
        elif index.__class__ is not int and index.__class__ is not str:
            raise malformed(f"{self._where} tool call index", "a whole number", index)
        known = None if whole else self._open.get(index)
        if known is None or (tool_id and tool_id != known[1]):
            name = r.tool_name(item)
            if name.__class__ is not str or not name:
                raise malformed(f"{self._where} tool call name", "a name", name or None)
            key: Hashable = ("tool", self._calls)
            self._calls += 1
            builder.tool_start(key, tool_id or self._mint(), name)
            self._last = self._index(key)
            builder.keep_raw(self._last, self._echoed(item) or {})
            if not whole:
                self._open[index] = (key, tool_id)
        else:
            key = known[0]
        given = r.tool_input(item)
        if given is None:
            given = "" if r.json_input else {}
        if isinstance(given, dict):
            text = json.dumps(given, separators=(",", ":"), ensure_ascii=False)
            builder.tool_input(key, text)
            builder.tool_end(key, given)
        elif isinstance(given, str) and r.json_input:
            builder.tool_input(key, given)
            if whole:
                builder.close(key)
        else:
            raise malformed(f"{self._where} tool call input", "an object", given)

    def _no_call(self) -> bool:
        """The message ended with no call to run (read before the parts of its chunk)."""
        return self._finish is not None and self._finish.raw in self._r.no_call_raw

    def _whole_calls(self, parts: list[dict[str, Any]]) -> None:
        if parts:
            self._read_held()
        for part in parts:
            self._tool_call(part, whole=True)

    def _apply_usage(self) -> None:
        usage = self._pending_usage
        assert usage is not None
        self._pending_usage = None
        read_usage(self._r, usage, self._b)

    # Helpers ---------------------------------------------------------------------------------

    def _echoed(self, part: dict[str, Any]) -> dict[str, Any] | None:
        echo = self._echo
        if not echo or part.keys().isdisjoint(echo):
            return None
        return {key: part[key] for key in echo if key in part}

    def _str(self, value: Any, what: str) -> str:
        if value.__class__ is not str:
            raise malformed(f"{self._where} {what}", "a string", value)
        return value

    def _index(self, key: Hashable) -> int:
        """The canonical index of the block just opened or extended under ``key`` (it may
        have made no event: a fragment ending in half a surrogate pair is held back)."""
        index = self._b.index_of(key)
        assert index is not None
        return index

    def _mint(self) -> str:
        if self._response_id is None:
            self._response_id = uuid.uuid4().hex[:16]
        return f"{self._r.schema.minted_id_prefix}{self._response_id}_{self._calls - 1}"


def _opt_str(value: Any) -> str | None:
    return value if isinstance(value, str) else None
