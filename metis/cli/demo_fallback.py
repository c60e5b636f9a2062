"""``metis demo``'s fallback turn (offline): the conversation so far goes to a route of the
first two providers, the first of which the emulator answers with "overloaded"; the second
takes the turn, tool calls from the first in its history, and the decision is shown."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from metis.cli.conversation import WEATHER, Renderer, run_tool, tool_calls
from metis.cli.models import Models, Target, price
from metis.cli.output import Output, note
from metis.errors import AdapterError
from metis.model.content import Message
from metis.model.events import MessageComplete
from metis.model.request import CanonicalRequest
from metis.routing import Router, RouteTarget
from metis.telemetry import RouteDecided, TelemetryEvent

if TYPE_CHECKING:
    from metis.cli.demo import Row

QUESTION = "What's the weather in Lima?"


class _Decisions:
    def __init__(self) -> None:
        self.last: RouteDecided | None = None

    def emit(self, event: TelemetryEvent) -> None:
        if isinstance(event, RouteDecided):
            self.last = event


async def fallback_turn(
    models: Models,
    targets: list[Target],
    history: list[Message],
    session: str,
    out: Output,
    turn: int,
) -> list[Row]:
    """The rows of the fallback turn (none when it cannot be staged)."""
    from metis.cli.demo import SYSTEM

    emulator = models.emulator
    if emulator is None or len(targets) < 2:
        return []
    from metis.testing.emulator.server import PROVIDER_ALIASES

    if targets[0].adapter.name not in PROVIDER_ALIASES:
        return []
    first, second = targets[:2]
    decisions = _Decisions()
    route = Router(
        [RouteTarget(first.model, first.adapter, max_retries=0), second.model],
        adapters={second.adapter.name: second.adapter},
        name="demo",
        telemetry=decisions,
    )
    out.line()
    out.line(out.style("user:", "bold") + f" {QUESTION}")
    history.append(Message.user(QUESTION))
    note(out, f"a route: {first.model}, else {second.model}; {first.provider} is overloaded now")
    emulator.push_fault("overloaded", provider=first.adapter.name)
    rows: list[Row] = []
    for number in (turn, turn + 1):  # the tool call, then the answer
        out.line(out.style(f"[{number}] route {route.name}", "bold", "blue"))
        request = CanonicalRequest(
            model="route:demo",
            session_id=session,
            system_prompt=SYSTEM,
            messages=list(history),
            tools=[WEATHER],
            max_output_tokens=1024,
        )
        renderer = Renderer(out)
        started = time.monotonic()
        try:
            final = await _streamed(route, request, renderer)
        except AdapterError as error:
            note(out, f"the route failed: {error}")
            return rows
        assert decisions.last is not None
        served = first if decisions.last.served_by == first.model else second
        for model, outcome, reason in decisions.last.steps:
            note(out, f"{model} {outcome}: {reason}")
        rows.append(_row(number, served, final, (time.monotonic() - started) * 1000))
        if not _continue(final, history, renderer):
            break
    return rows


def _row(number: int, served: Target, final: MessageComplete, latency_ms: float) -> Row:
    from metis.cli.demo import Row

    usage, cost = final.usage, price(served, final.usage)
    return Row(
        number,
        served,
        final.stop_reason.kind.value,
        usage.total_input_tokens,
        usage.output_tokens,
        cost.usd if cost else None,
        usage.estimated,
        latency_ms,
    )


async def _streamed(
    route: Router, request: CanonicalRequest, renderer: Renderer
) -> MessageComplete:
    final: MessageComplete | None = None
    try:
        async for event in route.stream(request):
            renderer.event(event)
            final = event if isinstance(event, MessageComplete) else final
    finally:
        renderer.newline()
    assert final is not None  # a stream ends with message.complete or raises
    return final


def _continue(final: MessageComplete, history: list[Message], renderer: Renderer) -> bool:
    """Add the reply (and the results of its tool calls) to the history; True when the model
    wants the results."""
    if final.final_content:
        history.append(Message.assistant(*final.final_content))
    wanted = tool_calls(final)
    if not wanted:
        return False
    results = [run_tool(call) for call in wanted]
    for result in results:
        renderer.tool_result(result)
    history.append(Message.tool(*results))
    return True
