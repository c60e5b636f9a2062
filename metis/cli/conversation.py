"""What the demo and the chat share: the local weather tool, and streaming one reply to the
terminal as it arrives."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from metis.adapter.adapter import Adapter
from metis.cli.output import Output
from metis.errors import ProtocolError
from metis.model.content import ToolResultBlock, ToolUseBlock
from metis.model.events import (
    MessageComplete,
    StreamEvent,
    TextDelta,
    ThinkingDelta,
    ToolUseEnd,
    ToolUseInputDelta,
    ToolUseStart,
)
from metis.model.request import CanonicalRequest, ToolDefinition

SYSTEM = "You are a weather assistant. Look the weather up with your tool; answer in one sentence."
"""The demo's system prompt, for the weather tool below."""

WEATHER = ToolDefinition(
    name="get_weather",
    description="Current weather for a city",
    input_schema={
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
        },
        "required": ["city"],
    },
)
_SKIES = ("sunny", "partly cloudy", "overcast", "light rain", "clear", "windy")


def get_weather(city: str, unit: str = "celsius") -> str:
    """The tool, run locally: made-up weather, the same for a city every time."""
    seed = zlib.crc32(city.strip().lower().encode())
    celsius = 4 + seed % 26
    sky = _SKIES[seed // 26 % len(_SKIES)]
    if unit == "fahrenheit":
        return f"{city}: {celsius * 9 // 5 + 32}°F, {sky}"
    return f"{city}: {celsius}°C, {sky}"


def run_tool(call: ToolUseBlock) -> ToolResultBlock:
    """Run one tool call locally; an unknown tool or bad arguments is an error result."""
    if call.name == WEATHER.name:
        city = call.input.get("city")
        unit = call.input.get("unit", "celsius")
        if isinstance(city, str) and city.strip():
            text = get_weather(city, unit if unit in ("celsius", "fahrenheit") else "celsius")
            return ToolResultBlock(tool_use_id=call.id, content=text)
        return ToolResultBlock(tool_use_id=call.id, content="city is required", is_error=True)
    return ToolResultBlock(tool_use_id=call.id, content=f"no tool {call.name!r}", is_error=True)


def tool_calls(final: MessageComplete) -> list[ToolUseBlock]:
    return [b for b in final.final_content if isinstance(b, ToolUseBlock)]


class Renderer:
    """Prints a reply's events as they arrive: text, dimmed thinking, tool calls."""

    def __init__(self, out: Output, indent: str = "  ") -> None:
        self.out = out
        self.indent = indent
        self.at_line_start = True
        self._mode = ""
        self._tool_input_seen = False

    def _text(self, text: str, *styles: str) -> None:
        for i, piece in enumerate(text.split("\n")):
            if i:
                self.out.write("\n")
                self.at_line_start = True
            if piece:
                if self.at_line_start:
                    self.out.write(self.indent)
                    self.at_line_start = False
                self.out.write(piece, *styles)

    def newline(self) -> None:
        if not self.at_line_start:
            self.out.write("\n")
            self.at_line_start = True

    def _switch(self, mode: str) -> None:
        if mode != self._mode:
            self.newline()
            self._mode = mode

    def event(self, event: StreamEvent) -> None:
        if isinstance(event, TextDelta):
            self._switch("text")
            self._text(event.text)
        elif isinstance(event, ThinkingDelta):
            if event.thinking:
                self._switch("thinking")
                self._text(event.thinking, "dim", "magenta")
        elif isinstance(event, ToolUseStart):
            self._switch("tool")
            self._text(f"→ {event.tool_name}(", "cyan")
            self._tool_input_seen = False
        elif isinstance(event, ToolUseInputDelta):
            if event.partial_json:
                self._tool_input_seen = True
                self._text(event.partial_json, "cyan")
        elif isinstance(event, ToolUseEnd):
            if not self._tool_input_seen:
                self._text(json.dumps(event.final_input, ensure_ascii=False), "cyan")
            self._text(")", "cyan")
            self.newline()
        elif isinstance(event, MessageComplete):
            self.newline()
            self._mode = ""

    def tool_result(self, result: ToolResultBlock) -> None:
        self.newline()
        mark = "✗" if result.is_error else "←"
        self._text(f"{mark} {result.text}", "red" if result.is_error else "green")
        self.newline()


@dataclass(slots=True)
class Reply:
    final: MessageComplete
    latency_ms: float


async def stream_reply(
    adapter: Adapter,
    request: CanonicalRequest,
    renderer: Renderer,
    on_event: Callable[[], Awaitable[None]] | None = None,
) -> Reply:
    """Stream one call, rendering it; the ``message.complete`` and the time it took.

    An :class:`~metis.errors.AdapterError` propagates (after the partial message, if any,
    was rendered)."""
    started = time.monotonic()
    final: MessageComplete | None = None
    try:
        async for event in adapter.stream(request):
            renderer.event(event)
            if isinstance(event, MessageComplete):
                final = event
            if on_event is not None:
                await on_event()
    finally:
        renderer.newline()
    if final is None:  # the adapter guarantees one; be safe anyway
        raise ProtocolError(f"{adapter.name} gave no message.complete", provider=adapter.name)
    return Reply(final, (time.monotonic() - started) * 1000)
