"""``metis chat -m MODEL``: interactive streaming chat with any configured model.

The event loop runs in a background thread (an anyio blocking portal); the main thread reads
the prompt and waits for each reply, so Ctrl-C lands there: during a reply it cancels the
stream (``adapter.cancel``) and keeps the partial text, at the prompt it exits. With stdin
not a terminal, each line read is echoed after the prompt so a piped session reads as one.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import os
import sys
from concurrent.futures import Future
from pathlib import Path

from anyio.from_thread import BlockingPortal, start_blocking_portal

from metis.calls.notes import unknown_model_note
from metis.cli.conversation import WEATHER, Renderer, run_tool, stream_reply, tool_calls
from metis.cli.models import Models, Target, price
from metis.cli.output import Output, duration, error, for_readline, note, one_line, usd
from metis.core.ids import new_request_id
from metis.errors import AdapterError, ConfigError, ErrorClass
from metis.model.content import ContentBlock, Message, TextBlock
from metis.model.request import CanonicalRequest
from metis.model.response import StopKind

HELP = (
    "/model NAME  switch model (the history is kept) · /models  list models · "
    "/clear  forget the history · /quit  leave · Ctrl-C  stop a reply"
)
MAX_TOOL_ROUNDS = 5


def _live_where(target: Target) -> str:
    """``live`` at the provider's own URL, else the URL its requests go to (an SDK's base URL
    variable pointed at an emulator or a proxy, say) and the variable that set it."""
    url = target.adapter.endpoint.base_url
    own = target.adapter.stack.endpoint
    given = own.env_base_url() if target.adapter.config.base_url is None else None
    if given is None and (url.rstrip("/") == own.base_url.rstrip("/") or "{" in own.base_url):
        return "live"
    return f"at {url}, set by ${own.base_url_env}" if given else f"at {url}"


class Chat:
    """The conversation; its coroutines run on the portal's event loop."""

    def __init__(self, args: argparse.Namespace, out: Output) -> None:
        self.out = out
        self.models = Models(
            args.models, offline=args.offline, faults=args.faults, seed=args.seed, pace=args.pace
        )
        self.system: str | None = args.system
        self.tools = [WEATHER] if args.tool else []
        self.max_tokens: int = args.max_tokens
        self.history: list[Message] = []
        self.session = f"chat-{new_request_id()}"
        self.target: Target | None = None
        self.request_id: str | None = None
        self.cancel_wanted = False

    async def select(self, name: str) -> None:
        target = self.models.resolve(name)
        self.target = target
        where = _live_where(target)
        if target.offline:
            emulator = self.models.start_emulator()
            why = f"{target.reason}: " if target.reason and target.reason != "offline" else ""
            where = f"offline, {why}replies come from the metis emulator at {emulator.url}"
        note(self.out, f"model {target.name} via {target.provider} ({where})")
        unknown = unknown_model_note(target.adapter, target.model)
        if unknown is not None:  # a misspelling, most often: said now, not after a 404
            note(self.out, unknown.removeprefix("metis: "))

    async def reply(self, text: str) -> None:
        assert self.target is not None
        mark = len(self.history)
        self.history.append(Message.user(text))
        try:
            for _ in range(MAX_TOOL_ROUNDS):
                if not await self._one_call(self.target):
                    return
        except BaseException:
            del self.history[mark:]  # the question failed: ask again from where we were
            raise

    async def _one_call(self, target: Target) -> bool:
        """One model call; True when it asked for tools (now answered in the history)."""
        request = CanonicalRequest(
            model=target.model,
            session_id=self.session,
            system_prompt=self.system,
            messages=list(self.history),
            tools=self.tools,
            max_output_tokens=min(self.max_tokens, target.adapter.capabilities.max_output_tokens),
        )
        self.request_id, self.cancel_wanted = request.request_id, False
        self.out.write(f"{target.name}>", "bold", "blue")
        self.out.write("\n")
        renderer = Renderer(self.out)
        try:
            reply = await stream_reply(target.adapter, request, renderer, self._cancel_if_wanted)
        finally:
            self.request_id = None
        final = reply.final
        usage = final.usage
        cost = price(target, usage)
        status = [
            final.stop_reason.kind.value,
            f"{usage.total_input_tokens} in / {usage.output_tokens} out",
            usd(cost.usd if cost else None, estimated=usage.estimated),
            duration(reply.latency_ms),
        ]
        if final.stop_reason.kind is StopKind.CANCELLED:
            kept: list[ContentBlock] = [b for b in final.final_content if isinstance(b, TextBlock)]
            if kept:
                self.history.append(Message.assistant(*kept))
            self.out.line("  [cancelled: the partial reply is kept]", "yellow")
            return False
        self.out.line("  " + " · ".join(status), "dim")
        if final.final_content:
            self.history.append(Message.assistant(*final.final_content))
        calls = tool_calls(final)
        if not calls:
            return False
        results = [run_tool(call) for call in calls]
        for result in results:
            renderer.tool_result(result)
        self.history.append(Message.tool(*results))
        return True

    async def _cancel_if_wanted(self) -> None:
        if self.cancel_wanted and self.target is not None and self.request_id is not None:
            # Ctrl-C came before the call was under way: cancel it now that it is.
            self.cancel_wanted = False
            self.target.adapter.cancel(self.request_id)

    async def cancel(self) -> None:
        self.cancel_wanted = True
        target, request_id = self.target, self.request_id
        if target is None or request_id is None:
            return
        if target.adapter.cancel(request_id):
            self.cancel_wanted = False

    async def aclose(self) -> None:
        await self.models.aclose()


def run(args: argparse.Namespace) -> int:
    out = Output()
    with start_blocking_portal("asyncio") as portal:
        chat = Chat(args, out)
        try:
            portal.call(chat.select, args.model)
            note(out, HELP)
            _loop(portal, chat, out)
        finally:
            portal.call(chat.aclose)
    return 0


def _line_editing() -> None:
    """Line editing and history for ``input()`` on a terminal (readline, where Python has it),
    with the history kept between sessions in the user's cache folder."""
    try:
        import readline
    except ImportError:  # Windows without pyreadline: plain input
        return
    history = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "metis"
    path = history / "chat_history"
    with contextlib.suppress(OSError):
        readline.read_history_file(path)
    readline.set_history_length(1000)

    def save() -> None:
        with contextlib.suppress(OSError):
            history.mkdir(parents=True, exist_ok=True)
            readline.write_history_file(path)

    atexit.register(save)


def _loop(portal: BlockingPortal, chat: Chat, out: Output) -> None:
    interactive = sys.stdin.isatty()
    if interactive:
        _line_editing()
    prompt = out.style("you>", "bold", "green") + " "
    while True:
        try:
            line = input(for_readline(prompt) if interactive else "")
        except EOFError:
            if interactive:
                out.line()
            return
        except KeyboardInterrupt:
            out.line()
            return
        if not interactive:
            out.line(prompt + line)
        text = line.strip()
        if not text:
            continue
        if text.startswith("/"):
            if not _command(portal, chat, out, text):
                return
            continue
        _wait(portal, chat, portal.start_task_soon(chat.reply, text))


def _command(portal: BlockingPortal, chat: Chat, out: Output, text: str) -> bool:
    """Run a /command; False to leave."""
    command, _, rest = text.partition(" ")
    rest = rest.strip()
    if command in ("/quit", "/exit", "/q"):
        return False
    if command == "/model":
        if not rest:
            assert chat.target is not None
            note(out, f"model {chat.target.name}")
            return True
        try:
            portal.call(chat.select, rest)
        except (AdapterError, ConfigError) as exc:
            assert chat.target is not None
            reason = exc.message if isinstance(exc, AdapterError) else str(exc)
            _problem(
                out,
                f"{one_line(reason)}; the chat stays on {chat.target.name} (type /models to "
                "list the models, /model NAME to switch)",
            )
    elif command == "/models":
        note(out, "models: " + ", ".join(chat.models.names()) + " (or any provider:model)")
    elif command == "/clear":
        chat.history.clear()
        note(out, "history cleared")
    elif command == "/help":
        note(out, HELP)
    else:
        _problem(out, f"unknown command {command}: type /help for the commands")
    return True


def _problem(out: Output, message: str) -> None:
    """A command that did not work, said in the chat, which goes on (not ``metis: error:``)."""
    out.line(f"({message})", "yellow")


def _wait(portal: BlockingPortal, chat: Chat, future: Future[None]) -> None:
    """Wait for a reply; Ctrl-C cancels it (and the wait goes on until it has ended)."""
    while True:
        try:
            future.result()
            return
        except KeyboardInterrupt:
            portal.call(chat.cancel)
        except AdapterError as exc:
            error(one_line(exc) + _offline_hint(chat, exc))
            return


def _offline_hint(chat: Chat, exc: AdapterError) -> str:
    """A local server that is not running falls back to the emulator only when asked."""
    target = chat.target
    if exc.error_class is not ErrorClass.NETWORK or target is None or target.offline:
        return ""
    return " (or run `metis chat --offline` to talk to the metis emulator instead)"
