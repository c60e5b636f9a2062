"""ollama_lifecycle: a local server's setup and teardown (docs/contract.md §1), and clear failures.

The stage is the provider's lifespan (docs/engine.md). ``adapter.init()`` (or ``async with
build_adapter("ollama") as adapter``) enters it: it checks that the server answers
(``GET /api/version``) and, when a default model is configured (this stage's ``model``
option, or the adapter's ``model`` setting), that the model is pulled (``POST /api/show``),
and hands back what the server reports the model can do, which the adapter takes as its
capabilities: tools, images (``vision``) and thinking as listed (servers since 0.6 list
them), and the context window capped at the length the model was trained for (never raised
past what was declared: it is also the ``num_ctx`` the server allocates memory for). Each
change from the declaration is logged. With ``preload`` it loads the model into memory so the
first call does not wait for it. ``adapter.dispose()`` leaves it, unloading the model when
``unload`` is set. Every check is sent the way every request to the provider is
(``Provider.fetch``: the transport's deadlines, redirect policy and error classification),
each within ``check_timeout``.

Without ``init()`` nothing is checked ahead: a call to a model that is not pulled fails with
the server's 404, classified by the codec with the ``ollama pull`` command to run; a server
that is down fails with a NetworkError naming the URL and ``ollama serve``: the stage is also
a hook whose watch rewords the transport's connection failure, after the retries.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Protocol

import anyio
from pydantic import BaseModel, ConfigDict, Field

from metis.core.ids import new_request_id
from metis.errors import AdapterError, InvalidRequestError, NetworkError, error_for
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.call import Call
from metis.pipeline.hooks import EventHook, Watch
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.transport.clients import is_connect_failure

log = logging.getLogger("metis")


class Sender(Protocol):
    """What the lifespan sends through: the provider (its name, and its one send path)."""

    name: str

    async def fetch(self, request: WireRequest, call: Call) -> Any:
        """The whole answer to ``request``: its ``body`` (a JSON object), or an error."""


# What /api/show lists for a model, and the capability flag that claims it.
_FEATURES = {
    "tools": "supports_tools",
    "vision": "supports_images",
    "thinking": "supports_thinking",
}


class OllamaLifecycle(EventHook[Any]):
    name = "ollama_lifecycle"
    role = "lifespan"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

        model: str | None = Field(
            default=None, description="the model init() checks; else the adapter's model setting"
        )
        preload: bool = Field(default=False, description="load the model into memory at init")
        unload: bool = Field(default=False, description="unload the model at dispose")
        check_timeout: float = Field(
            default=5.0, gt=0, description="seconds, for each check and the unload"
        )

    options: Options
    _services = StageServices()

    def bind(self, services: StageServices) -> None:
        services.require_endpoint(self.name)
        self._services = services

    async def open(self, request: Any, call: Call) -> tuple[Any, Watch]:
        return request, _Reworded(self._base_url())

    def _base_url(self) -> str:
        endpoint = self._services.endpoint
        return endpoint.base_url if endpoint is not None else ""

    @asynccontextmanager
    async def lifespan(
        self, provider: Sender, declared: AdapterCapabilities
    ) -> AsyncIterator[AdapterCapabilities]:
        """The server checked (and the model loaded) on the way in, the model unloaded on the
        way out; yields the capabilities as the server reports them."""
        checks = _Checks(self, provider)
        base = checks.base
        version = await checks.version()
        log.info("ollama %s at %s", version or "(version unknown)", base)
        model = self._model()
        found = declared
        if model is not None:
            found = _adopt(provider.name, declared, model, await checks.show(model))
            if self.options.preload:
                loading = self._services.config.timeout_seconds  # a model takes time to load
                await checks.chat(model, "loading", loading, keep_alive=self._setting("keep_alive"))
        try:
            yield found
        finally:
            if self.options.unload and model is not None:
                with anyio.CancelScope(shield=True):
                    await checks.unload(model)

    def _setting(self, name: str) -> Any:
        return self._services.settings.value(name)

    def _model(self) -> str | None:
        model = self.options.model or self._setting("model")
        if not isinstance(model, str) or not model:
            return None
        prefix = f"{self._services.provider}:"
        return model[len(prefix) :] if model.startswith(prefix) else model


class _Reworded(Watch):
    """A server that is down, said as such: the URL, and ``ollama serve``."""

    kinds = ()
    __slots__ = ("base_url",)

    def __init__(self, base_url: str) -> None:
        self.base_url = base_url

    def close(self, error: BaseException | None) -> BaseException | None:
        if not isinstance(error, NetworkError):
            return None
        cause = _connect_failure(error)
        if cause is None:
            return None
        reworded = _unreachable(self.base_url, cause, error.provider or "", error.request_id)
        reworded.__cause__ = cause
        return reworded


_OPENAI_PATH = (
    "metis: a base URL ending in /v1 is Ollama's OpenAI-compatible API; the ollama stack speaks "
    "Ollama's own, at the server's root: base_url='{root}' (or the openai_compatible stack at "
    "the /v1 URL)"
)


class _Checks:
    """The lifespan's requests, each sent through the provider's one send path."""

    def __init__(self, stage: OllamaLifecycle, provider: Sender) -> None:
        self.stage, self.provider = stage, provider
        self.base = stage._base_url().rstrip("/")

    async def version(self) -> str | None:
        url = f"{self.base}/api/version"
        try:
            answer = await self.send("GET", url)
        except AdapterError as error:
            if error.provider_status is None:  # not an answer: the server is down, say
                raise
            if error.provider_status != 404:  # 404: a server older than /api/version
                raise self.reworded(error, f"GET {url}") from None
            try:
                await self.send("GET", f"{self.base}/api/tags", what=f"GET {self.base}/api/tags")
            except AdapterError as tags_error:
                if tags_error.provider_status == 404 and self.base.endswith("/v1"):
                    tags_error.add_note(_OPENAI_PATH.format(root=self.base.removesuffix("/v1")))
                raise
            return None
        version = answer.body.get("version")
        return version if isinstance(version, str) else None

    async def show(self, model: str) -> dict[str, Any]:
        url = f"{self.base}/api/show"
        try:
            shown: dict[str, Any] = (await self.send("POST", url, {"model": model})).body
            return shown
        except AdapterError as error:
            if error.provider_status is None:  # not an answer: the server is down, say
                raise
            if error.provider_status != 404:
                raise self.reworded(error, f"POST {url}") from None
            raise InvalidRequestError(
                f"model {model!r} is not on the Ollama server at {self.base}; "
                f"pull it first: `ollama pull {model}`",
                provider=self.provider.name,
                provider_status=404,
                provider_message=error.provider_message,
            ) from None

    async def chat(self, model: str, what: str, wait: float | None, **extra: Any) -> None:
        body = {"model": model, "messages": [], "stream": False}
        body.update({key: value for key, value in extra.items() if value is not None})
        await self.send("POST", f"{self.base}/api/chat", body, wait=wait, what=f"{what} {model}")

    async def unload(self, model: str) -> None:
        """Within ``check_timeout``: Ollama answers an unload once it is under way, and the
        wait is shielded from cancellation (dispose runs it even when cancelled); a deadline
        hit names check_timeout, not the call's timeout."""
        try:
            await self.chat(model, "unloading", None, keep_alive=0)
        except AdapterError as error:  # the server is gone: nothing left to unload
            log.warning("could not unload %s from %s: %s", model, self.base, error)

    async def send(
        self,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        *,
        wait: float | None = None,
        what: str | None = None,
    ) -> Any:
        endpoint = self.stage._services.require_endpoint(self.stage.name)
        headers = endpoint.request_headers()
        if body is None:
            headers.pop("content-type", None)
        call = self.call(wait or self.stage.options.check_timeout)
        request = WireRequest(url, body or {}, headers, method=method)
        try:
            return await self.provider.fetch(request, call)
        except NetworkError as error:
            cause = _connect_failure(error)
            if cause is None and wait is None and anyio.current_time() >= call.deadline:
                raise self.out_of_time(error, what or f"{method} {url}") from error
            if cause is None:
                raise
            raise _unreachable(endpoint.base_url, cause, self.provider.name) from cause
        except AdapterError as error:
            if what is None:
                raise
            raise self.reworded(error, what) from None

    def call(self, seconds: float) -> Call:
        return Call(
            request_id=new_request_id(),
            provider=self.provider.name,
            model="",
            wire_model="",
            deadline=anyio.current_time() + seconds,
        )

    def out_of_time(self, error: NetworkError, what: str) -> NetworkError:
        """The transport says the call's timeout ran out; the deadline was ``check_timeout``."""
        seconds = self.stage.options.check_timeout
        return NetworkError(
            f"{what}: {self.stage.name}'s check_timeout ({seconds:g} s) ran out",
            provider=self.provider.name,
            request_id=error.request_id,
        )

    def reworded(self, error: AdapterError, what: str) -> AdapterError:
        status = f"HTTP {error.provider_status}: " if error.provider_status else ""
        return error_for(
            error.error_class,
            f"{what}: {status}{error.message}",
            provider=self.provider.name,
            provider_status=error.provider_status,
            provider_message=error.provider_message,
            retryable=error.retryable,
            retry_after_seconds=error.retry_after_seconds,
        )


def _unreachable(
    base_url: str, exc: Exception, provider: str, request_id: str | None = None
) -> NetworkError:
    return NetworkError(
        f"cannot reach the Ollama server at {base_url} ({type(exc).__name__}: {exc}); "
        "is it running? Start it with `ollama serve`, or point base_url at it",
        provider=provider,
        request_id=request_id,
    )


def _connect_failure(error: BaseException) -> Exception | None:
    """The HTTP client's connect failure behind ``error``, if that is what it is. The transport
    raises from it, but a stage may re-raise ``from None``, so the implicit context counts too."""
    seen: BaseException | None = error
    for _ in range(4):
        seen = seen.__cause__ or seen.__context__ if seen is not None else None
        if isinstance(seen, Exception) and is_connect_failure(seen):
            return seen
    return None


def _adopt(
    provider: str, caps: AdapterCapabilities, model: str, shown: dict[str, Any]
) -> AdapterCapabilities:
    """``caps`` as the server reports them for ``model``."""
    update: dict[str, Any] = {}
    listed = shown.get("capabilities")
    if isinstance(listed, list):  # servers since 0.6 list what the model can do
        for feature, flag in _FEATURES.items():
            if getattr(caps, flag) != (feature in listed):
                update[flag] = feature in listed
                why = f"{feature!r} listed: {update[flag]}"
                _changed(provider, caps, model, flag, update[flag], why)
    trained = _context_length(shown.get("model_info"))
    if trained is not None and caps.max_context_tokens > trained:
        update["max_context_tokens"] = trained
        _changed(provider, caps, model, "max_context_tokens", trained, f"trained for {trained}")
        if caps.max_output_tokens > trained:  # no reply is longer than the whole window
            update["max_output_tokens"] = trained
    return caps.model_copy(update=update) if update else caps


def _context_length(info: Any) -> int | None:
    if not isinstance(info, dict):
        return None
    lengths = [v for k, v in info.items() if k.endswith(".context_length")]
    if lengths and type(lengths[0]) is int and lengths[0] > 0:
        return lengths[0]
    return None


def _changed(
    provider: str, caps: AdapterCapabilities, model: str, flag: str, value: Any, why: str
) -> None:
    """A declared capability the server's report overrides: a loss is a WARN, a gain news."""
    level = logging.WARNING if value is False or flag == "max_context_tokens" else logging.INFO
    log.log(
        level,
        "%s: %s is now %s for %s, as the Ollama server reports (%s; declared %s)",
        provider,
        flag,
        value,
        model,
        why,
        getattr(caps, flag),
        extra={"event": "metis.capability_mismatch", "adapter": provider, "capability": flag},
    )
