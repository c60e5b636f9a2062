"""``metis demo``: one conversation with a tool, a different provider on every turn.

Offline (the default) every provider is the in-process emulator; ``--live`` uses the keys in
the environment and skips the providers without one. Each model call is a turn: its reply is
streamed as it arrives, tool calls are run locally and their results go to the next provider,
and a table of the turns (stop reason, tokens, cost, latency) closes the run.

Offline, one more question closes the conversation (the fallback turn): it goes to a route of
the first two providers, the first of which the emulator answers with "overloaded"; the second
takes the turn, tool calls from the first in its history, and the decision is shown.
"""

from __future__ import annotations

import argparse
import os
import time
from decimal import Decimal
from urllib.parse import urlsplit

import anyio

from metis.cli.conversation import (
    SYSTEM,
    WEATHER,
    Renderer,
    Reply,
    run_tool,
    stream_reply,
    tool_calls,
)
from metis.cli.demo_table import Row, print_table
from metis.cli.models import Models, Target, price
from metis.cli.output import CliError, Output, note
from metis.core.ids import new_request_id
from metis.core.suggest import did_you_mean
from metis.errors import AdapterError, NotConfiguredError
from metis.model.content import Message, ToolUseBlock
from metis.model.events import MessageComplete
from metis.model.request import CanonicalRequest
from metis.routing import Router, RouteTarget
from metis.telemetry import CallStarted, RouteDecided, TelemetryEvent

SCRIPT = (
    "What's the weather in Paris?",
    "What about the weather in Tokyo and Oslo?",
    "And the weather in Rome?",
    "And the weather in Madrid, please?",
    "One more: the weather in Lisbon?",
)
MAX_CALLS_PER_MESSAGE = 4


class AttemptCounter:
    """A telemetry sink that counts the attempts of each request (retries are the rest)."""

    def __init__(self) -> None:
        self.attempts: dict[str, int] = {}

    def emit(self, event: TelemetryEvent) -> None:
        if isinstance(event, CallStarted):
            self.attempts[event.request_id] = self.attempts.get(event.request_id, 0) + 1


def run(args: argparse.Namespace) -> int:
    return anyio.run(_demo, args, Output())


async def _demo(args: argparse.Namespace, out: Output) -> int:
    models = Models(
        args.models, offline=not args.live, faults=args.faults, seed=args.seed, pace=args.pace
    )
    try:
        targets = _targets(models, args, out)
        return await _converse(models, targets, args.live, out)
    finally:
        await models.aclose()


def _targets(models: Models, args: argparse.Namespace, out: Output) -> list[Target]:
    families = models.family_models()
    if args.providers:
        wanted = [p.strip() for p in args.providers.split(",") if p.strip()]
        known = {p for p, _ in families}
        unknown = [p for p in wanted if p not in known]
        if unknown:
            raise CliError(
                f"--providers: no model for {', '.join(unknown)} in {models.source}"
                f"{did_you_mean(unknown[0], known)} (providers: {', '.join(sorted(known))})"
            )
        families = [(p, m) for p, m in families if p in wanted]
    targets: list[Target] = []
    missing: list[str] = []
    for provider, model in families:
        try:
            target = models.resolve(model, fallback=False)
        except NotConfiguredError as exc:
            missing.append(exc.api_key_env or provider)
            why = f"{exc.api_key_env} is not set" if exc.api_key_env else str(exc)
            note(out, f"skipping {provider}: {why}")
            continue
        unasked = _unasked_reason(target) if args.live and not args.providers else None
        if unasked:
            note(out, f"skipping {provider}: {unasked} (ask for it with --providers)")
            continue
        targets.append(target)
    if not targets:
        keys = ", ".join(dict.fromkeys(missing)) or "a provider's key"
        raise CliError(f"no provider has a key for --live: set {keys} (or run without --live)")
    return targets


def _unasked_reason(target: Target) -> str | None:
    """Why ``--live`` leaves out a provider whose key is optional (a local server, or a cloud
    signing with its own credential chain) unless it is named, or its key is set; else None."""
    auth = target.adapter.stack.auth
    if not auth.optional or (auth.env and os.environ.get(auth.env)):
        return None
    host = urlsplit(target.adapter.endpoint.base_url).hostname or ""
    if host in _LOCAL_HOSTS:
        return "a local server"
    return "no API key; signs with the platform's own credentials, if any"


_LOCAL_HOSTS = frozenset({"localhost", "127.0.0.1", "::1"})


async def _converse(models: Models, targets: list[Target], live: bool, out: Output) -> int:
    _announce(models, live, out)
    history: list[Message] = []
    rows: list[Row] = []
    active = list(targets)
    cursor = failures = 0
    session = f"demo-{new_request_id()}"
    attempts = AttemptCounter()
    for target in targets:
        target.adapter.telemetry = attempts
    for text in SCRIPT:
        out.line()
        out.line(out.style("user:", "bold") + f" {text}")
        history.append(Message.user(text))
        calls = 0
        while calls < MAX_CALLS_PER_MESSAGE:
            target = active[cursor % len(active)]
            cursor += 1
            turn = len(rows) + 1
            wire = target.model.partition(":")[2] or target.model
            label = out.style(f"[{turn}] {target.provider}", "bold", "blue")
            out.line(f"{label} {out.style('· ' + wire, 'dim')}")
            request = _request(target, session, history)
            renderer = Renderer(out)
            try:
                reply = await stream_reply(target.adapter, request, renderer)
            except AdapterError as exc:
                rows.append(Row(turn, target, f"error: {exc.error_class.value}"))
                failures += 1
                if live:
                    active.remove(target)
                    cursor -= 1
                if not active or failures > 2 * len(targets):
                    raise
                note(out, f"{target.provider} failed: {exc}; the next provider takes the turn")
                continue
            calls += 1
            retries = attempts.attempts.get(request.request_id, 1) - 1
            rows.append(_row(turn, target, reply, _tool_ids(history), retries))
            final = reply.final
            if final.final_content:
                history.append(Message.assistant(*final.final_content))
            wanted = tool_calls(final)
            if not wanted:
                break
            results = [run_tool(call) for call in wanted]
            for result in results:
                renderer.tool_result(result)
            history.append(Message.tool(*results))
    if not live:  # one more question, through a route whose first model is overloaded
        rows += await fallback_turn(models, active, history, session, out, len(rows) + 1)
    out.line()
    print_table(out, rows)
    return 0


def _announce(models: Models, live: bool, out: Output) -> None:
    where = (
        "live: the providers' real APIs"
        if live
        else f"offline: every provider is the metis emulator at {models.start_emulator().url}"
    )
    out.line("metis demo: one conversation, a different provider on every turn", "bold")
    note(out, f"{where}; the get_weather tool runs locally")


def _request(target: Target, session: str, history: list[Message]) -> CanonicalRequest:
    return CanonicalRequest(
        model=target.model,
        session_id=session,
        system_prompt=SYSTEM,
        messages=list(history),
        tools=[WEATHER],
        max_output_tokens=min(1024, target.adapter.capabilities.max_output_tokens),
    )


def _row(turn: int, target: Target, reply: Reply, ids_mapped: int, retries: int) -> Row:
    """The table row of a turn that answered."""
    final = reply.final
    usage = final.usage
    cost = price(target, usage)
    # A model on a local server (a stack with no catalog provider) costs nothing.
    local = Decimal(0) if cost is None and target.adapter.stack.catalog is None else None
    return Row(
        turn,
        target,
        final.stop_reason.kind.value,
        usage.total_input_tokens,
        usage.output_tokens,
        cost.usd if cost else local,
        usage.estimated,
        reply.latency_ms,
        ids_mapped=ids_mapped,
        dropped=len(final.warnings),
        retries=retries,
    )


def _tool_ids(history: list[Message]) -> int:
    return len({b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)})


# The fallback turn ----------------------------------------------------------------------------

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
        rows.append(_fallback_row(number, served, final, (time.monotonic() - started) * 1000))
        if not _continue(final, history, renderer):
            break
    return rows


def _fallback_row(number: int, served: Target, final: MessageComplete, latency_ms: float) -> Row:
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
