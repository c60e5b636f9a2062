"""The emulator: every wire format behind one request handler, served on a loopback socket
(:meth:`Emulator.start`) or in process through an httpx transport (:meth:`Emulator.transport`,
no socket at all)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Self

import httpx

from metis.core.options import checked_init
from metis.testing.emulator.cache import PromptCache
from metis.testing.emulator.catalog import Served
from metis.testing.emulator.faults import FaultPlan, FaultRule, parse_faults
from metis.testing.emulator.formats import ALIASES, MOUNTS, all_formats
from metis.testing.emulator.formats.base import Env
from metis.testing.emulator.handler import Handler, RecordedRequest, Stats
from metis.testing.emulator.model import Model, Prompt
from metis.testing.emulator.responder import Responder
from metis.testing.emulator.script import ReplyLike, as_model
from metis.testing.emulator.server import Server
from metis.testing.emulator.transport import EmulatorTransport


@checked_init
class Emulator:
    """Anthropic, OpenAI Chat and Responses (and the OpenAI-compatible services), Gemini,
    Ollama, Bedrock, Vertex AI and Azure OpenAI, each with its provider's rules and errors.

    ``model`` answers every request: the built-in scripted model (default; ``tool_preamble``
    makes it say a sentence before its tool calls), a list of replies (a :class:`~.Script`), or
    a function of the :class:`~.Prompt` (see :mod:`metis.testing.emulator.script`). ``models``
    is which model names are served: ``"catalog"`` (metis's model catalog; others get the
    provider's 404), ``"any"``, or a list. ``faults`` is a run's fault plan (see
    :mod:`metis.testing.emulator.faults`), ``seed`` seeds its draws. ``api_keys``: only these
    keys are accepted (otherwise any non-empty key). ``context_tokens`` overrides a provider's
    context window (``{"anthropic": 1000}``). ``cache_min_tokens`` is the smallest prefix the
    simulated prompt cache keeps. ``strict_signatures`` refuses thinking signatures and
    encrypted reasoning this emulator did not issue (as the providers do). ``record`` is how
    many requests :attr:`requests` keeps. ``websocket``: the Responses endpoints also speak
    the WebSocket mode (:mod:`.websocket`; off, an upgrade gets the 405 of a POST-only path);
    ``websocket_max_seconds`` is how long a connection serves turns.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        faults: str | Sequence[FaultRule] | None = None,
        seed: int = 0,
        *,
        model: Model | Iterable[ReplyLike] | Callable[[Prompt], Any] | None = None,
        models: str | Iterable[str] = "catalog",
        api_keys: Sequence[str] | None = None,
        context_tokens: dict[str, int] | None = None,
        cache_min_tokens: int = 1024,
        tool_preamble: bool = False,
        strict_signatures: bool = True,
        record: int = 1000,
        verbose: bool = False,
        websocket: bool = True,
        websocket_max_seconds: float = 3600.0,
    ) -> None:
        self.host, self.port, self.seed, self.verbose = host, port, seed, verbose
        self.websocket, self.websocket_max_seconds = websocket, websocket_max_seconds
        self.model = (
            as_model(model) if model is not None else Responder(tool_preamble=tool_preamble)
        )
        env = Env(
            model=self.model,
            cache=PromptCache(min_tokens=cache_min_tokens),
            context_tokens={ALIASES.get(k, k): v for k, v in (context_tokens or {}).items()},
            strict_signatures=strict_signatures,
            served=Served(models),
        )
        keys = frozenset(api_keys) if api_keys is not None else None
        self.handler = Handler(all_formats(), env, FaultPlan.parse(faults, seed), keys, record)
        self._server: Server | None = None
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------

    def start(self) -> Self:
        if self._server is not None:
            return self
        server = self._server = Server(
            (self.host, self.port),
            self.handler,
            self.verbose,
            self.websocket,
            self.websocket_max_seconds,
        )
        self.port = int(server.server_address[1])
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"metis-emulator:{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def drop_connections(self) -> None:
        """Closes every open connection now, serving on (what a server's restart or its idle
        timeout looks like to the clients; a WebSocket session's connection included)."""
        server = self._server
        if server is not None:
            server.drop_connections()

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        server.close_all()
        if thread is not None:
            thread.join()
        self._server = self._thread = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}"

    def base_url(self, provider: str) -> str:
        """The base URL to configure a client for ``provider`` with (the root: every path the
        real API has is served under it; Azure's under its mount, ``/azure``)."""
        return self.url + MOUNTS.get(_served_as(provider), "")

    def transport(self) -> EmulatorTransport:
        """An httpx transport (sync and async) that answers through this emulator in process,
        with no socket; base URLs may name any host (``http://emulator/``)."""
        return EmulatorTransport(self.handler)

    def client(self) -> httpx.AsyncClient:
        """An ``httpx.AsyncClient`` over :meth:`transport`: give it to an adapter
        (``AdapterConfig(http_client=...)``) and the stack's own URLs reach this emulator."""
        return httpx.AsyncClient(transport=self.transport())

    # --- faults, counters, records --------------------------------------------------------

    def push_fault(self, spec: str, times: int = 1, provider: str | None = None) -> None:
        """The next ``times`` requests (to ``provider``, or any) get ``spec`` (``"drop=3"``)."""
        faults = parse_faults(spec)
        self.handler.push(ALIASES[provider] if provider is not None else None, faults, times)

    def clear_faults(self) -> None:
        self.handler.clear_faults()

    @property
    def stats(self) -> Stats:
        return self.handler.stats

    @property
    def requests_served(self) -> int:
        return self.stats.requests

    @property
    def faults_injected(self) -> int:
        return self.stats.faults_injected

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.handler.records

    def bodies(self, provider: str | None = None) -> list[Any]:
        """The JSON bodies of the recorded requests (to ``provider``, or all), in order; a
        body that is not JSON (a file upload's form or bytes) is left out."""
        wanted = _served_as(provider) if provider is not None else None
        found = []
        for record in self.requests:
            if wanted is None or record.provider == wanted:
                try:
                    found.append(record.json())
                except ValueError:  # json's errors, and bytes that are not UTF-8
                    continue
        return found

    @property
    def stored(self) -> dict[str, list[dict[str, Any]]]:
        """The Responses API's stored responses: each id, with the conversation it ends (the
        items it continued, then its output)."""
        with self.handler.env.lock:
            return {key: list(items) for key, items in self.handler.env.responses.items()}

    def call_ids(self, provider: str | None = None) -> list[str]:
        """The tool call ids the replies gave out (to ``provider``, or all), in order."""
        wanted = _served_as(provider) if provider is not None else None
        return [
            i for r in self.requests if wanted is None or r.provider == wanted for i in r.call_ids
        ]

    def reset(self) -> None:
        """Forgets counters, records, queued faults, stored responses and the prompt cache."""
        self.handler.reset()


def _served_as(provider: str) -> str:
    """The name the emulator records ``provider``'s requests under; a ValueError naming the
    known ones for a name it does not know (a misspelling would read as no requests)."""
    if provider not in ALIASES:
        raise ValueError(f"unknown provider {provider!r}; known: {', '.join(ALIASES)}")
    return ALIASES[provider]
