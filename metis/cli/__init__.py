"""``metis``: the command line.

    metis demo [--live]                 one conversation, a different provider every turn
    metis chat -m MODEL                 interactive streaming chat; /model X swaps mid-way
    metis stack PROVIDER [--mermaid]    a provider's pipeline, stage by stage
    metis replay CASSETTE               a recorded exchange, as canonical events
    metis record --provider P -m M ...  one real call (or --emulator) into a cassette
    metis emulator --port N             the provider emulator, in the foreground
    metis models [SEARCH] [--provider P]  the model catalog: limits, capabilities, prices
    metis serve --config FILE           the gateway: the providers' APIs over a models.yaml
    metis keys --config FILE [--reset NAME]  the gateway keys' spend (in Redis), or reset one's

Each command lives in its own module, imported only when it runs (so ``metis --help`` is
quick). User errors are one ``metis: error: ...`` line on stderr and a non-zero exit status:
2 for a usage error (a misspelt command or option named with the nearest one), 1 otherwise;
never a traceback (``METIS_DEBUG=1`` shows one for a bug).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metis.cli.log_lines import stderr_handler as stderr_handler
from metis.cli.log_lines import warnings_to_stderr as _warnings_to_stderr
from metis.cli.output import CliError, error
from metis.core.arg_suggest import SuggestingParser
from metis.core.digits import ascii_digits
from metis.core.version import VERSION

COMMANDS = {
    "demo": "metis.cli.demo",
    "chat": "metis.cli.chat",
    "stack": "metis.cli.stack",
    "replay": "metis.cli.replay",
    "record": "metis.cli.record",
    "models": "metis.cli.catalog",
    "serve": "metis.cli.serve",
    "keys": "metis.cli.gateway_keys",
}


class _Parser(SuggestingParser):
    def usage_error(self, message: str) -> BaseException:
        return CliError(message, status=2)


if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[_Parser]  # what add_subparsers gives


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="metis",
        description="One canonical format over every LLM provider: try it from the terminal.",
    )
    parser.add_argument("--version", action="version", version=f"metis {VERSION}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _add_demo(commands)
    _add_chat(commands)
    _add_stack(commands)
    _add_replay(commands)
    _add_record(commands)
    _add_models(commands)
    _add_emulator(commands)
    _add_serve(commands)
    _add_keys(commands)
    return parser


def _add_demo(commands: Commands) -> None:
    demo = commands.add_parser(
        "demo",
        help="a conversation with a tool, a different provider every turn (offline by default)",
        description="A scripted conversation with a local get_weather tool, swapping provider "
        "on every turn (anthropic, openai, openai_responses, gemini, ollama, groq, tgi, "
        "bedrock, vertex, azure; then a route whose first model is overloaded), streamed, then "
        "a table of the turns. Offline against the metis emulator unless --live.",
    )
    demo.add_argument(
        "--live", action="store_true", help="use the real APIs with the keys in the environment"
    )
    _models_option(demo)
    demo.add_argument(
        "--providers", metavar="LIST", help="only these providers, e.g. anthropic,openai"
    )
    _fault_options(demo)


def _add_chat(commands: Commands) -> None:
    chat = commands.add_parser(
        "chat",
        help="interactive streaming chat with any model",
        description="Streaming chat. /model NAME swaps the model and keeps the history, "
        "/models lists them, /clear forgets the history, /quit leaves. Ctrl-C during a reply "
        "stops it (the partial reply is kept); Ctrl-C at the prompt exits. A model whose "
        "provider has no key in the environment is served by the local emulator.",
    )
    chat.add_argument(
        "-m", "--model", required=True, help="a model id or alias, e.g. anthropic:claude-sonnet-4-5"
    )
    _models_option(chat)
    chat.add_argument("--offline", action="store_true", help="every model is the local emulator")
    chat.add_argument("--system", metavar="TEXT", help="a system prompt")
    chat.add_argument("--tool", action="store_true", help="offer the local get_weather tool")
    chat.add_argument(
        "--max-tokens", type=_positive, default=1024, metavar="N", help="(default 1024)"
    )
    _fault_options(chat)


def _add_stack(commands: Commands) -> None:
    stack = commands.add_parser(
        "stack",
        help="show a provider's pipeline, stage by stage",
        description="The stack a provider's adapter is built from: endpoint, auth, "
        "capabilities, and each stage with its options and the types it takes and gives.",
    )
    stack.add_argument("provider", metavar="PROVIDER", help="a built-in stack or a stack file")
    stack.add_argument("--mermaid", action="store_true", help="a Mermaid flowchart instead")
    stack.add_argument("-v", "--verbose", action="store_true", help="stage options in full")
    _import_option(stack)


def _import_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        default=[],
        metavar="MODULE",
        help="import MODULE first (where a stack's own stages are registered); repeatable",
    )


def _add_replay(commands: Commands) -> None:
    replay = commands.add_parser(
        "replay",
        help="replay a cassette through its provider's stack",
        description="Serve a cassette's recorded responses to the provider's stack and print "
        "the canonical events, one a line. The recorded request bodies are not checked.",
    )
    replay.add_argument("cassette", metavar="CASSETTE", help="a cassette file (YAML)")
    replay.add_argument("--provider", help="the stack (default: inferred from the URL)")
    replay.add_argument("--json", action="store_true", help="events as JSON lines")


def _add_record(commands: Commands) -> None:
    record = commands.add_parser(
        "record",
        help="record one call into a cassette (keys scrubbed)",
        description="Make one call and write the exchange as a cassette, keys scrubbed. "
        "Needs the provider's key, unless --emulator records against the local emulator.",
    )
    record.add_argument("--provider", required=True, help="a built-in stack or a stack file")
    record.add_argument("-m", "--model", required=True, help="the model, e.g. claude-sonnet-4-5")
    record.add_argument("--prompt", required=True, metavar="TEXT", help="the user message")
    record.add_argument("-o", "--output", required=True, metavar="FILE", help="cassette to write")
    record.add_argument("--emulator", action="store_true", help="record against the emulator")
    record.add_argument("--system", metavar="TEXT", help="a system prompt")
    record.add_argument("--tool", action="store_true", help="offer the get_weather tool")
    record.add_argument("--no-stream", action="store_true", help="a non-streamed call")
    record.add_argument(
        "--max-tokens", type=_positive, default=1024, metavar="N", help="(default 1024)"
    )


def _add_models(commands: Commands) -> None:
    models = commands.add_parser(
        "models",
        help="list catalogued models with their limits and prices",
        description="The model catalog (docs/catalog.md): every model with its context window, "
        "output limit, what it takes and its prices (USD per million tokens). Filter by a "
        "search string, a provider and capabilities; --refresh fetches the latest catalog.",
    )
    models.add_argument("search", nargs="?", default="", help="text in the model's id or name")
    models.add_argument("--provider", help="a catalog provider id or a built-in stack name")
    for need in ("tools", "reasoning", "images", "pdf", "structured-output", "prompt-caching"):
        models.add_argument(f"--{need}", action="store_true", help=f"only models with {need}")
    models.add_argument("--limit", type=_positive, default=50, metavar="N", help="(default 50)")
    models.add_argument("--json", action="store_true", help="one JSON object a line")
    models.add_argument(
        "--providers", action="store_true", help="list the providers and their model counts"
    )
    models.add_argument(
        "--refresh",
        action="store_true",
        help="fetch models.dev and genai-prices now and cache the result (needs metis[catalog])",
    )


def _add_emulator(commands: Commands) -> None:
    commands.add_parser(
        "emulator",
        help="run the provider emulator (see 'metis emulator --help')",
        add_help=False,
    )


def _add_keys(commands: Commands) -> None:
    keys = commands.add_parser(
        "keys",
        help="the gateway's keys: each one's spend in its period and its budget",
        description="Each key of FILE's gateway.keys: its spend in its budget period, its "
        "budget and when it renews, as the gateways sharing gateway.redis_url count them; "
        "--reset NAME sets that key's spend of its period back to 0. Needs gateway.redis_url: "
        "a gateway without it keeps its keys' spend in its own memory.",
    )
    keys.add_argument("--config", required=True, metavar="FILE", help="the models.yaml served")
    keys.add_argument("--reset", metavar="NAME", help="set this key's spend back to 0")


def _add_serve(commands: Commands) -> None:
    serve = commands.add_parser(
        "serve",
        help="serve the providers' APIs over the models of a models.yaml (docs/gateway.md)",
        description="The gateway: Anthropic Messages, OpenAI Chat Completions and Responses "
        "over every model, alias and route of FILE. Host and port default to its gateway: "
        "section (127.0.0.1:4000).",
    )
    serve.add_argument("--config", required=True, metavar="FILE", help="the models.yaml")
    serve.add_argument("--host", help="the address to listen on")
    serve.add_argument("--port", type=_port, help="the port to listen on (0: any free one)")
    serve.add_argument("--workers", type=_positive, default=1, help="worker processes")
    serve.add_argument(
        "--access-log",
        action="store_true",
        help="uvicorn's access log too (off: it costs CPU per request; the gateway's own "
        "line per request is gateway.access_log's)",
    )
    serve.add_argument(
        "--timeout-keep-alive",
        type=_positive,
        metavar="SECONDS",
        help="how long an idle client connection is kept open (default: the file's "
        "gateway.keep_alive_seconds, 5); longer than a load balancer's idle timeout",
    )
    _import_option(serve)


def _whole_number(text: str) -> bool:
    return ascii_digits(text.strip())


def _positive(text: str) -> int:
    if not _whole_number(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got {text!r}")
    return int(text)


def _port(text: str) -> int:
    if not _whole_number(text) or int(text) > 65535:
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return int(text)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected seconds >= 0, got {text!r}")
    return value


def _models_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--models", metavar="FILE", help="a models.yaml (default: one model per provider)"
    )


def _fault_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--faults", metavar="SPEC", help='emulator faults, e.g. "rate_limit:0.3" (offline only)'
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for the emulator's faults")
    parser.add_argument(
        "--pace",
        type=_seconds,
        default=0.02,
        metavar="SECONDS",
        help="the emulator's delay between streamed events (default 0.02; 0: none)",
    )


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        if args[:1] == ["emulator"]:
            from metis.testing.emulator.cli import main as emulator_main

            return emulator_main(args[1:])
        parsed = build_parser().parse_args(args)
        if parsed.command is None:
            build_parser().print_help(sys.stderr)
            return 2
        module: Any = importlib.import_module(COMMANDS[parsed.command])
        with _warnings_to_stderr():
            return int(module.run(parsed))
    except BaseException as raised:
        exc = _unwrap(raised)
        if isinstance(exc, KeyboardInterrupt):
            sys.stderr.write("\n")
            return 130
        if isinstance(exc, SystemExit):  # --help, --version
            return exc.code if isinstance(exc.code, int) else int(exc.code is not None)
        if isinstance(exc, BrokenPipeError):  # `metis replay x | head`: leave quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 141
        message, status = _explain(exc)
        if message is None:
            if os.environ.get("METIS_DEBUG"):
                raise
            message = (
                f"internal error: {type(exc).__name__}: {exc} (METIS_DEBUG=1 shows the traceback)"
            )
        error(message)
        return status


def _unwrap(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _explain(exc: BaseException) -> tuple[str | None, int]:
    """The one-line message for a user error and its exit status; None for a bug."""
    from metis.errors import AdapterError, ConfigError

    if isinstance(exc, CliError):
        return str(exc), exc.status
    if isinstance(exc, AdapterError | ConfigError):
        return str(exc), 1
    if isinstance(exc, OSError):
        where = f": {exc.filename}" if exc.filename else ""
        return f"{exc.strerror or exc}{where}", 1
    yaml = sys.modules.get("yaml")
    if yaml is not None and isinstance(exc, yaml.YAMLError):
        return f"not valid YAML: {exc}", 1
    pydantic = sys.modules.get("pydantic")
    if pydantic is not None and isinstance(exc, pydantic.ValidationError):
        return f"{exc.title}: {exc.error_count()} problems: {exc}", 1
    faults = sys.modules.get("metis.testing.emulator.faults")
    if faults is not None and isinstance(exc, faults.FaultSpecError):
        return f"--faults: {exc}", 2
    cassette = sys.modules.get("metis.testing.cassette")
    if cassette is not None and isinstance(exc, cassette.CassetteMismatch):
        return f"the cassette did not record this request: {exc}", 1
    return None, 1


__all__ = ["build_parser", "main"]
