"""``metis emulator``: run the emulator in the foreground until interrupted."""

from __future__ import annotations

import argparse
import contextlib
import logging
import signal
import sys
import textwrap
import threading
from collections.abc import Sequence

from metis.core.arg_suggest import SuggestingParser
from metis.core.digits import ascii_digits
from metis.testing.emulator.emulator import Emulator
from metis.testing.emulator.faults import FaultSpecError

ENDPOINTS = (
    ("anthropic", "POST /v1/messages, /v1/messages/count_tokens; GET /v1/models"),
    ("openai", "POST /v1/chat/completions; GET /v1/models"),
    ("  compatible", "the same under /chat/completions (DeepSeek), /openai/v1 (Groq), /api/v1"),
    ("", "(OpenRouter), /inference/v1, /v1/openai, /api/paas/v4, /compatible-mode/v1"),
    ("openai_responses", "POST /v1/responses, /v1/responses/input_tokens"),
    ("gemini", "POST /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse,"),
    ("", ":countTokens; GET /v1beta/models"),
    ("ollama", "POST /api/chat, /api/show; GET /api/tags, /api/version"),
    ("bedrock", "POST /model/{id}/converse, /converse-stream, /invoke,"),
    ("", "/invoke-with-response-stream, /count-tokens (SigV4 or a Bedrock API key)"),
    ("vertex", "POST /v1/projects/{p}/locations/{l}/publishers/google/models/{m}:generateContent"),
    ("", "(and :streamGenerateContent, :countTokens; v1beta1 too)"),
    ("vertex_anthropic", "POST /v1/projects/{p}/locations/{l}/publishers/anthropic/models/{m}"),
    ("", ":rawPredict, :streamRawPredict; .../models/count-tokens:rawPredict"),
    ("azure", "under /azure (base URL <url>/azure): POST /openai/v1/chat/completions,"),
    ("", "/openai/v1/responses, and with ?api-version=...: /openai/deployments/{d}/chat/"),
    ("", "completions, /openai/responses; GET /openai/v1/models (api-key or an Entra ID token)"),
    ("embeddings", "POST /v1/embeddings (OpenAI, Mistral, Voyage), /azure/openai/v1/embeddings,"),
    ("", "/v2/embed (Cohere), /v1beta/models/{m}:batchEmbedContents, Vertex :predict,"),
    ("", "Bedrock /model/{titan|cohere embed id}/invoke, /api/embed (Ollama)"),
    ("files", "POST /v1/files (OpenAI's; Anthropic's with an anthropic-version header),"),
    ("", "GET /v1/files/{id}/content; POST /upload/v1beta/files (Gemini, resumable)"),
    ("batches", "/v1/messages/batches (Anthropic), /v1/batches (OpenAI, Azure under"),
    ("", "/azure/openai/v1), /v1beta/models/{m}:batchGenerateContent and /v1beta/batches"),
    ("caches", "/v1beta/cachedContents (Gemini: POST, GET, PATCH, DELETE)"),
)


def endpoints() -> str:
    return "\n".join(f"  {name:<17} {paths}" for name, paths in ENDPOINTS)


class _UsageError(Exception):
    pass


class _Parser(SuggestingParser):
    def usage_error(self, message: str) -> BaseException:
        return _UsageError(message)


def _fail(message: str, status: int) -> int:
    """One ``metis: error:`` line on stderr, like every other metis command."""
    print(f"metis: error: {message}", file=sys.stderr)
    return status


POINTING = """\
metis's calls and the official SDKs reach it through the SDKs' variables (any key):
  export ANTHROPIC_BASE_URL=http://127.0.0.1:8900 ANTHROPIC_API_KEY=sk-emulator
  export OPENAI_BASE_URL=http://127.0.0.1:8900/v1 OPENAI_API_KEY=sk-emulator
  export GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:8900 GEMINI_API_KEY=sk-emulator
  export AWS_ENDPOINT_URL_BEDROCK_RUNTIME=http://127.0.0.1:8900 AWS_BEARER_TOKEN_BEDROCK=sk-emulator
  export OLLAMA_HOST=http://127.0.0.1:8900
(docs/emulator.md)"""


def _port(text: str) -> int:
    if not ascii_digits(text.strip()) or int(text) > 65535:  # not modulo 65536
        raise argparse.ArgumentTypeError(f"expected a port from 0 to 65535, got {text!r}")
    return int(text)


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="metis emulator",
        description=textwrap.fill(
            "Serve the Anthropic, OpenAI (Chat and Responses, and the OpenAI-compatible "
            "services), Gemini, Ollama, AWS Bedrock, Vertex AI and Azure OpenAI wire formats "
            "on loopback, with a scripted model and optional fault injection.",
            width=79,
        ),
        epilog="endpoints:\n" + endpoints() + "\n\n" + POINTING,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=_port, default=8900, help="port (0: any free; default 8900)")
    plan = 'fault plan, e.g. "rate_limit:0.1,overloaded:0.05,drop=3:0.05"'
    parser.add_argument("--faults", help=plan)
    parser.add_argument("--seed", type=int, default=0, help="seed for the fault draws")
    only = "accept only this key (repeatable; default: any non-empty key)"
    parser.add_argument("--api-key", action="append", dest="api_keys", help=only)
    parser.add_argument(
        "--context-tokens",
        action="append",
        default=[],
        metavar="PROVIDER=N",
        help="a provider's context window, e.g. anthropic=2000 (repeatable)",
    )
    parser.add_argument(
        "--models",
        default="catalog",
        metavar="catalog|any|NAME,...",
        help="the models served: the model catalog's (default; others get the provider's 404), "
        "any name, or the catalog's and these",
    )
    parser.add_argument(
        "--tool-preamble",
        action="store_true",
        help="the model says a sentence before its tool calls",
    )
    parser.add_argument("--verbose", "-v", action="store_true", help="log every request")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    if args_list[:1] == ["emulator"]:
        args_list = args_list[1:]
    try:
        args = _parser().parse_args(args_list)
    except _UsageError as exc:
        return _fail(str(exc), 2)
    context: dict[str, int] = {}
    for item in args.context_tokens:
        name, _, value = item.partition("=")
        try:
            context[name] = int(value)
        except ValueError:
            return _fail(f"--context-tokens {item!r}: expected PROVIDER=N", 2)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        emulator = Emulator(
            args.host,
            args.port,
            faults=args.faults,
            seed=args.seed,
            api_keys=args.api_keys,
            context_tokens=context,
            tool_preamble=args.tool_preamble,
            models=args.models if args.models in ("catalog", "any") else args.models.split(","),
            verbose=args.verbose,
        )
        emulator.start()
    except FaultSpecError as exc:
        return _fail(f"--faults: {exc}", 2)
    except OSError as exc:
        return _fail(f"cannot listen on {args.host}:{args.port}: {exc}", 1)
    # Before the banner: whoever waits for it may send SIGTERM at once.
    stop = threading.Event()
    with contextlib.suppress(ValueError):  # not the main thread: Ctrl-C only
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"metis emulator listening on {emulator.url}  (Ctrl-C to stop)")
    print(endpoints())
    if args.faults:
        print(f"  faults: {args.faults} (seed {args.seed})")
    print(
        '  per request: header "x-emulator-fault: rate_limit" (see metis.testing.emulator.faults)',
        flush=True,
    )
    try:
        while not stop.wait(0.5):
            pass
    except KeyboardInterrupt:
        pass
    finally:
        emulator.stop()
        stats = emulator.stats
        print(f"\nserved {stats.requests} requests, injected {stats.faults_injected} faults")
    return 0
