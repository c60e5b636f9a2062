"""OpenAI Responses served: the reply as a ``response`` object (:mod:`.responses_items`), and
its stream as the API writes it (``response.created``, ``response.in_progress``, per output
item ``output_item.added`` ... ``output_item.done`` with its text and annotations, reasoning
summary or function call argument deltas, a hosted tool's progress, then
``response.completed``, or ``response.incomplete`` when the output limit cut it, or
``response.failed``), every event with its ``sequence_number``. The emulator writes its
Responses replies here too."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from metis.gateway.inbound import Inbound
from metis.gateway.provenance import unsigned, wrap
from metis.gateway.reasoning_items import REDACTED, reasoning_id, with_text
from metis.gateway.responses_items import (
    Ids,
    annotation,
    call_item,
    cut_short,
    own,
    reasoning_item,
    refusal_item,
    response_object,
    server_item,
    summarized,
    text_item,
)
from metis.gateway.sse import BlockWriter, dumps, event, quoted
from metis.model.block import ProviderRaw
from metis.model.content import OpaqueBlock
from metis.model.events import (
    CitationDelta,
    MessageComplete,
    ServerToolCall,
    ServerToolResult,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.response import StopKind, StopReason
from metis.model.server_tools import ServerToolCallBlock

DELTA_HEAD = (
    b'event: %s\ndata: {"type":"%s","sequence_number":%d,"item_id":%s,"output_index":%d%s,"delta":'
)
TEXT_DELTA = b"response.output_text.delta"
SUMMARY_DELTA = b"response.reasoning_summary_text.delta"
ARGUMENTS_DELTA = b"response.function_call_arguments.delta"


class ResponseStream(BlockWriter):
    """The canonical events of one call as the Responses API streams them. ``ids`` names the
    output items and ``echo`` says what the request asked (see :mod:`.responses_items`) when
    the caller knows them; ``split`` cuts a hosted tool's code into its deltas."""

    def __init__(
        self,
        inbound: Inbound,
        model: str,
        response_id: str,
        made_by: ProviderRaw | None = None,
        ids: Ids | None = None,
        echo: Mapping[str, Any] | None = None,
    ) -> None:
        super().__init__()
        self.inbound, self.model, self.response_id = inbound, model, response_id
        self.made_by = made_by  # who writes the thinking, when known
        self.ids, self.echo = ids, echo
        self.split: Callable[[str], list[str]] = lambda code: [code]
        self.sealing = inbound.options.get("encrypted_reasoning") is True
        self.summarized = summarized(inbound)  # whether the thinking is written as a summary
        self.signature = ""  # the open thinking's, when it comes
        self.thoughts = 0  # reasoning items opened so far
        self.sequence = 0
        self.started = False
        self.items: list[dict[str, Any]] = []  # closed output items
        self.item: dict[str, Any] = {}  # the open one
        self.buffer: list[str] = []  # its text, summary or arguments so far
        self.cited: list[dict[str, Any]] = []  # its annotations so far
        self.item_id = b""  # its id, as JSON
        self.final: dict[str, Any] | None = None  # the response it ended with
        self.calls: dict[str, ServerToolCallBlock] = {}  # server calls awaiting their result

    def _emit(self, kind: str, **fields: Any) -> bytes:
        out = event(kind, {"type": kind, "sequence_number": self.sequence, **fields})
        self.sequence += 1
        return out

    def _response(self, stop: StopReason | None = None, tokens: Any = None) -> dict[str, Any]:
        output = self.items if stop is not None else []
        return response_object(
            self.inbound, self.model, self.response_id, output, stop, tokens, self.echo
        )

    def written(self, item: StreamEvent) -> bytes:
        return self._started() + super().written(item)

    def _started(self) -> bytes:
        if self.started:
            return b""
        self.started = True
        pending = self._response()
        head = self._emit("response.created", response=pending)
        return head + self._emit("response.in_progress", response=pending)

    def _where(self, **more: Any) -> dict[str, Any]:
        return {"item_id": self.item["id"], "output_index": self.blocks - 1, **more}

    def open_block(self, kind: str, item: StreamEvent) -> bytes:
        self.buffer, self.cited, ids = [], [], self.ids
        if isinstance(item, ToolUseStart):
            item_id = ids and ids("fc_")
            self.item = call_item(item.tool_use_id, item.tool_name, "", "in_progress", item_id)
        elif kind == "thinking":
            item_id = ids("rs_") if ids else reasoning_id(self.response_id, self.thoughts)
            self.item, self.thoughts = reasoning_item(item_id, ""), self.thoughts + 1
            self.signature = ""
            if isinstance(item, ThinkingDelta) and self.sealing:
                if item.redacted_data:
                    self.signature = REDACTED + wrap(self.made_by, item.redacted_data)
                elif item.signature:  # known from the start: the item says it when added
                    self.signature = wrap(self.made_by, item.signature, item.provider_data)
                    self.item["encrypted_content"] = self.signature
        else:
            self.item = text_item("", "in_progress", ids and ids("msg_"))
        self.item_id = quoted(self.item["id"])
        added = self._emit("response.output_item.added", output_index=self.blocks, item=self.item)
        if kind == "text":  # the base counts the block once this returns: its index is blocks
            where = {"item_id": self.item["id"], "output_index": self.blocks, "content_index": 0}
            part = {"type": "output_text", "annotations": [], "logprobs": [], "text": ""}
            added += self._emit("response.content_part.added", **where, part=part)
        return added

    def _delta(self, kind: bytes, index: bytes, text: str, tail: bytes = b"}") -> bytes:
        """``_emit(kind, **_where(...), delta=text)`` from a template: most of a stream's
        events. ``index``: the members between ``output_index`` and ``delta``."""
        self.buffer.append(text)
        head = DELTA_HEAD % (kind, kind, self.sequence, self.item_id, self.blocks - 1, index)
        self.sequence += 1
        return b"".join((head, quoted(text), tail, b"\n\n"))

    def text(self, item: TextDelta) -> bytes:
        return self._delta(TEXT_DELTA, b',"content_index":0', item.text, b',"logprobs":[]}')

    def citation(self, item: CitationDelta) -> bytes:
        written = annotation(item.citation)
        self.cited += [written] if written else []
        return b""

    def thinking(self, item: ThinkingDelta) -> bytes:
        if item.signature and self.sealing:
            self.signature = wrap(self.made_by, item.signature, item.provider_data)
        if not item.thinking:
            return b""
        if not self.summarized:  # kept for the encrypted content, not written
            self.buffer.append(item.thinking)
            return b""
        opening = b""
        if not self.buffer:  # the summary's part opens with its first words
            summary = {"type": "summary_text", "text": ""}
            where = self._where(summary_index=0)
            opening = self._emit("response.reasoning_summary_part.added", **where, part=summary)
        return opening + self._delta(SUMMARY_DELTA, b',"summary_index":0', item.thinking)

    def tool_input(self, item: ToolUseInputDelta) -> bytes:
        return self._delta(ARGUMENTS_DELTA, b"", item.partial_json)

    def close_block(self, kind: str, end: ToolUseEnd | None) -> bytes:
        whole, out = "".join(self.buffer), b""
        if kind == "text":
            status = "incomplete" if cut_short(self.stopping) else "completed"
            done = text_item(whole, status, self.item["id"], self.cited)
            part = done["content"][0]
            where = self._where(content_index=0)
            for n, cited in enumerate(self.cited):
                added = "response.output_text.annotation.added"
                out += self._emit(added, **where, annotation_index=n, annotation=cited)
            out += self._emit("response.output_text.done", **where, text=whole, logprobs=[])
            out += self._emit("response.content_part.done", **where, part=part)
        elif kind == "thinking":
            if not self.signature and self.sealing:  # its maker gave none: the maker alone
                self.signature = unsigned(self.made_by)
            written = bool(self.buffer) and self.summarized
            summary = [{"type": "summary_text", "text": whole}] if written else []
            done = {**self.item, "summary": summary}
            if self.signature:
                sealed = self.signature
                done["encrypted_content"] = sealed if written else with_text(whole, sealed)
            if summary:
                where = self._where(summary_index=0)
                out += self._emit("response.reasoning_summary_text.done", **where, text=whole)
                out += self._emit("response.reasoning_summary_part.done", **where, part=summary[0])
        else:
            arguments = dumps(end.final_input) if end is not None else whole
            status = "incomplete" if cut_short(self.stopping) else "completed"
            done = {**self.item, "status": status, "arguments": arguments}
            where = self._where()
            out += self._emit("response.function_call_arguments.done", **where, arguments=arguments)
        self.items.append(done)
        index = self.blocks - 1
        return out + self._emit("response.output_item.done", output_index=index, item=done)

    def server_call(self, item: ServerToolCall) -> bytes:
        """A server tool's call: the API's own item at once; another provider's with its
        result, when that comes."""
        found = server_item(item.block, None) if own(item.block.provider_raw) else None
        if found is None:
            self.calls[item.block.id] = item.block
        return self.whole(found) if found else b""

    def server_result(self, item: ServerToolResult) -> bytes:
        call = self.calls.pop(item.block.tool_call_id, None)
        found = server_item(call, item.block) if call is not None else None
        return self.whole(found) if found else b""

    def kept(self, block: OpaqueBlock) -> bytes:
        """An item only the Responses API makes (a compaction item), whole."""
        item = (own(block.provider_raw) or {}).get("item")
        return self.whole(item) if isinstance(item, dict) else b""

    def whole(self, item: dict[str, Any]) -> bytes:
        """An item that comes whole, with its progress: a hosted tool's call (a web search, a
        code run), or any other (a compaction item)."""
        out = self._started() + self._close()
        index, self.blocks = self.blocks, self.blocks + 1
        where = {"item_id": item["id"], "output_index": index}
        if item["type"] == "web_search_call":  # its action is known once it is done
            opening = {"id": item["id"], "type": item["type"], "status": "in_progress"}
            out += self._emit("response.output_item.added", output_index=index, item=opening)
            for stage in ("in_progress", "searching", "completed"):
                out += self._emit(f"response.web_search_call.{stage}", **where)
        elif item["type"] == "code_interpreter_call":
            out += self._code(item, where)
        else:
            out += self._emit("response.output_item.added", output_index=index, item=item)
        self.items.append(item)
        return out + self._emit("response.output_item.done", output_index=index, item=item)

    def _code(self, item: dict[str, Any], where: dict[str, Any]) -> bytes:
        opening = {**item, "status": "in_progress", "code": "", "outputs": None}
        index, name = where["output_index"], "response.code_interpreter_call"
        out = self._emit("response.output_item.added", output_index=index, item=opening)
        out += self._emit(f"{name}.in_progress", **where)
        for piece in self.split(item["code"]):
            out += self._emit(f"{name}_code.delta", **where, delta=piece)
        out += self._emit(f"{name}_code.done", **where, code=item["code"])
        out += self._emit(f"{name}.interpreting", **where)
        return out + self._emit(f"{name}.completed", **where)

    def complete(self, item: MessageComplete) -> bytes:
        explained = item.stop_reason.explanation
        out = self.whole(refusal_item(explained)) if explained is not None else b""
        final = self.final = self._response(item.stop_reason, item.usage)
        kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
        return out + self._emit(kind, response=final)

    def error(self, status: int, body: dict[str, Any]) -> bytes:
        failed = {**self._response(StopReason(kind=StopKind.ERROR)), "status": "failed"}
        error = body.get("error") or {}
        failed["error"] = {
            "code": error.get("code") or "server_error",
            "message": error.get("message", ""),
        }
        failed["output"] = self._written_so_far()
        return self._emit("response.failed", response=failed)

    def _written_so_far(self) -> list[dict[str, Any]]:
        """The output items a stream that failed had written: those closed, and the open one
        with what its deltas gave, ``incomplete`` (as ``response.incomplete`` keeps it), so
        a client reading the failed response finds the text it was streamed."""
        if self.open_kind is None:
            return list(self.items)
        whole = "".join(self.buffer)
        if self.open_kind == "text":
            cut = text_item(whole, "incomplete", self.item["id"], self.cited)
        elif self.open_kind == "tool":
            cut = {**self.item, "status": "incomplete", "arguments": whole}
        else:
            written = bool(whole) and self.summarized
            cut = {**self.item, "summary": [{"type": "summary_text", "text": whole}] * written}
        return [*self.items, cut]
