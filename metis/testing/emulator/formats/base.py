"""A wire format as the one request handler sees it: where it is served, how it authenticates
and fails, and four steps for a model turn (read the request into a Prompt, render the Reply,
frame it as a stream, shape an error). Each provider is a subclass with its rule table.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from metis.testing.emulator.catalog import Listed
from metis.testing.emulator.model import Model, Prompt, Reply
from metis.testing.emulator.rules import Check, Refused, Rule, check
from metis.testing.emulator.wire import Frame, HttpRequest, Ids, JsonReply
from metis.testing.emulator.wire import Reply as HttpReply


@dataclass(slots=True)
class Env:
    """What formats share besides the request: the model, the prompt cache, stored
    responses, context windows, which models are served, and whether only signatures this
    emulator issued are accepted back."""

    model: Model
    cache: Any
    context_tokens: dict[str, int] = field(default_factory=dict)
    strict_signatures: bool = True
    served: Any = None  # metis.testing.emulator.catalog.Served
    responses: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    batches: dict[str, Any] = field(default_factory=dict)
    """The batches and uploaded files of the batch endpoints, by id."""
    cached_contents: dict[str, Any] = field(default_factory=dict)
    """Gemini's cached contents, by name (``cachedContents/{id}``)."""
    answer: Any = None
    """How one request is answered (``handler.answer``): a batch answers its items with it."""


@dataclass(slots=True)
class Call:
    """One request to a format's endpoint while it is answered. ``options`` carry what the
    request asked of the reply's shape (usage in the stream, thought summaries...);
    ``issued`` the tool call ids the reply gives out."""

    endpoint: str
    request: HttpRequest
    match: re.Match[str]
    env: Env
    body: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    model: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    issued: list[str] = field(default_factory=list)

    def call_id(self, ids: Ids, prefix: str, length: int, alphabet: str = "alnum") -> str:
        issued = prefix + ids.token(length, alphabet)
        self.issued.append(issued)
        return issued


Route = tuple[str, str, str]  # method, path pattern, endpoint


class Format:
    """One wire format. ``routes`` say where it is served; ``catalog`` names the catalog
    providers whose models it serves; ``window`` is its default context window."""

    name: ClassVar[str] = ""
    routes: ClassVar[Sequence[Route]] = ()
    rules: ClassVar[Sequence[Rule | Check]] = ()
    catalog: ClassVar[tuple[str, ...]] = ()
    window: ClassVar[int | None] = 200_000
    mount: ClassVar[str] = ""  # a path prefix standing for the service's own host
    too_long: ClassVar[str] = ""
    """How it refuses a request over the model's window (``{tokens}``, ``{limit}``)."""
    no_model: ClassVar[tuple[int, str]] = (404, "")
    """The status and words of its refusal of a model it does not serve (``{model}``)."""
    too_long_named: ClassVar[tuple[str | None, str | None]] = (None, None)
    no_model_named: ClassVar[tuple[str | None, str | None]] = (None, None)
    """The ``param`` and ``code`` of those two refusals (OpenAI's)."""

    def route(self, method: str, path: str) -> tuple[str, re.Match[str]] | None:
        for wanted, pattern, endpoint in self.routes:
            match = re.fullmatch(pattern, path)
            if match is not None and method == wanted:
                return endpoint, match
        return None

    def claims(self, endpoint: str, request: HttpRequest) -> bool:
        """Whether this format answers ``request`` (two formats may share a path)."""
        return True

    def allowed(self, path: str) -> list[str]:
        return [method for method, pattern, _ in self.routes if re.fullmatch(pattern, path)]

    # --- how it refuses -------------------------------------------------------------------

    def authenticate(self, request: HttpRequest, keys: frozenset[str] | None) -> JsonReply | None:
        raise NotImplementedError

    def refusal(self, refused: Refused, request: HttpRequest) -> JsonReply:
        raise NotImplementedError

    def fault(self, kind: str, request: HttpRequest, retry_after: float) -> JsonReply:
        """The reply of a status fault: rate_limit, overloaded, server_error, auth,
        context_overflow."""
        raise NotImplementedError

    def stream_error(self, kind: str, call: Call) -> list[Frame]:
        raise NotImplementedError

    def overflow(self, tokens: int, limit: int) -> Refused:
        return Refused(self.too_long.format(tokens=tokens, limit=limit), *self.too_long_named)

    def unknown_model(self, model: str) -> Refused:
        status, words = self.no_model
        return Refused(words.format(model=model), *self.no_model_named, status=status)

    def headers(self, request: HttpRequest) -> dict[str, str]:
        return {}

    def stream_headers(self, call: Call) -> dict[str, str]:
        return {"content-type": "text/event-stream; charset=utf-8"}

    # --- how it answers -------------------------------------------------------------------

    def takes_json(self, endpoint: str) -> bool:
        """Whether a POST to ``endpoint`` carries a JSON body (a file upload does not)."""
        return True

    def parse(self, call: Call) -> None:
        """Reads ``call.body`` (already a JSON object), ``call.stream`` and ``call.model``,
        checking the rule table first."""
        check(self.rules, call.body, call)
        call.stream = call.body.get("stream") is True
        call.model = str(call.body.get("model", ""))

    def serves(self, env: Env, model: str) -> bool:
        """Whether ``model`` is one this format serves (else the provider's 404)."""
        return bool(env.served.known(self.catalog, model))

    def serve(self, call: Call) -> HttpReply | None:
        """The answer of an endpoint that is not a model turn (token counts, model lists)."""
        return None

    def models(
        self, call: Call, catalogs: Sequence[str], unlisted: tuple[int, int] = (128_000, 8_192)
    ) -> list[Listed]:
        """``GET .../models``: the models of ``catalogs`` served, in id order; ``GET
        .../models/{id}``: the one asked for alone (as listed, else under its own name with
        the ``unlisted`` context and output limits), or the API's 404 when it is not served."""
        served = call.env.served
        listed: list[Listed] = served.listing(catalogs)
        if call.endpoint != "model":
            return listed
        wanted = call.match["model"]
        if not served.known(self.catalog, wanted):
            raise self.unknown_model(wanted)
        alone = Listed(wanted, wanted, "2025-01-01", *unlisted)
        return [next((m for m in listed if m.id == wanted), alone)]

    def read(self, call: Call) -> Prompt:
        raise NotImplementedError

    def render(self, call: Call, prompt: Prompt, reply: Reply, ids: Ids) -> Any:
        raise NotImplementedError

    def frames(self, call: Call, rendered: Any, reply: Reply, ids: Ids) -> list[Frame]:
        raise NotImplementedError

    def cached(self, call: Call, prompt: Prompt, reply: Reply) -> None:
        """Sets the reply's cache reads (and writes) as the provider's prompt cache would."""
        reply.usage.cache_read = call.env.cache.implicit(self.name, prompt.segments, 128)
