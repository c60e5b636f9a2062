"""``metis demo``: one conversation with a tool, a different provider on every turn.

Offline (the default) every provider is the in-process emulator; ``--live`` uses the keys in
the environment and skips the providers without one. Each model call is a turn: its reply is
streamed as it arrives, tool calls are run locally and their results go to the next provider,
and a table of the turns (stop reason, tokens, cost, latency) closes the run.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from decimal import Decimal
from urllib.parse import urlsplit

import anyio

from metis.cli.conversation import WEATHER, Renderer, Reply, run_tool, stream_reply, tool_calls
from metis.cli.demo_fallback import fallback_turn
from metis.cli.models import Models, Target, price
from metis.cli.output import CliError, Output, duration, note, usd
from metis.core.ids import new_request_id
from metis.errors import AdapterError
from metis.model.content import Message, ToolUseBlock
from metis.model.request import CanonicalRequest
from metis.registry.registry import NotConfiguredError
from metis.telemetry import CallStarted, TelemetryEvent

SYSTEM = "You are a weather assistant. Look the weather up with your tool; answer in one sentence."
SCRIPT = (
    "What's the weather in Paris?",
    "What about the weather in Tokyo and Oslo?",
    "And the weather in Rome?",
    "And in Madrid, please?",
    "One more: the weather in Lisbon?",
    "Thanks! That is all for today.",
)
MAX_CALLS_PER_MESSAGE = 4


@dataclass(slots=True)
class Row:
    turn: int
    target: Target
    stop: str
    tokens_in: int | None = None
    tokens_out: int | None = None
    cost: Decimal | None = None
    estimated: bool = False
    latency_ms: float = 0.0
    ids_mapped: int = 0
    """Canonical tool ids this turn's request carried, each sent as the provider's own."""
    dropped: int = 0
    """Blocks the provider could not take (another model's signed reasoning, ...)."""
    retries: int = 0


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
                f"--providers: no model for {', '.join(unknown)} in {models.source}; "
                f"providers: {', '.join(sorted(known))}"
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
    _table(out, rows)
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


def _table(out: Output, rows: list[Row]) -> None:
    body = [
        [
            str(r.turn),
            r.target.provider,
            r.target.model.partition(":")[2] or r.target.model,
            r.stop,
            "-" if r.tokens_in is None else str(r.tokens_in),
            "-" if r.tokens_out is None else str(r.tokens_out),
            usd(r.cost, estimated=r.estimated),
            duration(r.latency_ms) if r.tokens_in is not None else "-",
            str(r.ids_mapped),
            str(r.dropped),
            str(r.retries),
        ]
        for r in rows
    ]
    out.table(
        ["turn", "provider", "model", "stop", "in", "out", "cost", "latency", "ids", "dropped",
         "retries"],
        body,
        right=(0, 4, 5, 6, 7, 8, 9, 10),
    )  # fmt: skip
    providers = len({r.target.provider for r in rows if r.tokens_in is not None})
    tokens_in = sum(r.tokens_in or 0 for r in rows)
    tokens_out = sum(r.tokens_out or 0 for r in rows)
    total = sum((r.cost for r in rows if r.cost is not None), Decimal(0))
    out.line(
        f"{len(rows)} turns, {providers} providers, {tokens_in} tokens in, {tokens_out} out, "
        f"{usd(total)} (prices: the model catalog, $0 on a local server; -: not priced)",
        "dim",
    )
    out.line(
        "ids: tool ids the turn sent in the provider's own form; dropped: blocks that provider "
        "could not take (warned once per session); retries: attempts after the first",
        "dim",
    )


def _tool_ids(history: list[Message]) -> int:
    return len({b.id for m in history for b in m.content if isinstance(b, ToolUseBlock)})
