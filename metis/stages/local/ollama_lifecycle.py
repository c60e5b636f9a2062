"""ollama_lifecycle: a local server's setup and teardown (docs/contract.md §1), and clear failures.

``adapter.init()`` (or ``async with build_adapter("ollama") as adapter``) checks that the
server answers (``GET /api/version``) and, when a default model is configured (this stage's
``model`` option, or ``AdapterConfig.options["model"]``), that the model is pulled
(``POST /api/show``), and takes what the server reports the model can do as the adapter's
capabilities: tools, images (``vision``) and thinking as listed (servers since 0.6 list
them), and the context window capped at the length the model was trained for (never raised
past what was declared: it is also the ``num_ctx`` the server allocates memory for). Each
change from the declaration is logged. With ``preload`` it loads the model into memory so the
first call does not wait for it. ``adapter.dispose()`` unloads it when ``unload`` is set.

Without ``init()`` nothing is checked ahead: a call to a model that is not pulled fails with
the server's 404, classified by the codec with the ``ollama pull`` command to run; a server
that is down fails with a NetworkError naming the URL and ``ollama serve`` (this stage
rewords the transport's connection failure, after the retries).
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field

from metis.errors import AdapterError, ErrorClass, InvalidRequestError, NetworkError, error_for
from metis.model.capabilities import AdapterCapabilities
from metis.pipeline.call import Call
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage
from metis.transport.clients import http_errors, is_connect_failure
from metis.wire.ollama import error_from_http

log = logging.getLogger("metis")

# What /api/show lists for a model, and the capability flag that claims it.
_FEATURES = {
    "tools": "supports_tools",
    "vision": "supports_images",
    "thinking": "supports_thinking",
}


class OllamaLifecycle(Stage[Any, Any, Any, Any]):
    name = "ollama_lifecycle"

    class Options(BaseModel):
        model_config = ConfigDict(extra="forbid", frozen=True)

        model: str | None = Field(
            default=None, description="the model init() checks; else AdapterConfig.options.model"
        )
        preload: bool = Field(default=False, description="load the model into memory at init")
        unload: bool = Field(default=False, description="unload the model at dispose")
        check_timeout: float = Field(default=5.0, gt=0, description="seconds, for each check")

    options: Options
    _base_url = ""

    def bind(self, services: StageServices) -> None:
        self._base_url = services.require_endpoint(self.name).base_url

    async def __call__(
        self, request: Any, call: Call, inner: Inner[Any, Any]
    ) -> AsyncIterator[Any]:
        try:
            async for item in inner(request, call):
                yield item
        except NetworkError as error:
            cause = _connect_failure(error)
            if cause is None:
                raise
            base = self._base_url
            raise _unreachable(base, cause, call.provider, call.request_id) from cause

    async def init(self, adapter: Any) -> None:
        base = adapter.endpoint.base_url.rstrip("/")
        version = await self._get_version(adapter, base)
        log.info("ollama %s at %s", version or "(version unknown)", base)
        model = self._model(adapter)
        if model is None:
            return
        shown = await self._send(adapter, "POST", f"{base}/api/show", {"model": model})
        if shown.status_code == 404:
            raise InvalidRequestError(
                f"model {model!r} is not on the Ollama server at {base}; "
                f"pull it first: `ollama pull {model}`",
                provider=adapter.name,
                provider_status=404,
                provider_message=_error_text(shown),
            )
        _raise_for(shown, adapter.name, f"POST {base}/api/show")
        adapter.capabilities = _adopt(adapter, model, _json(shown))
        if self.options.preload:
            body = {"model": model, "messages": [], "stream": False}
            keep_alive = adapter.config.options.get("keep_alive")
            if keep_alive is not None:
                body["keep_alive"] = keep_alive
            loaded = await self._send(
                adapter, "POST", f"{base}/api/chat", body, adapter.config.timeout_seconds
            )
            _raise_for(loaded, adapter.name, f"loading {model}")

    async def dispose(self, adapter: Any) -> None:
        model = self._model(adapter)
        if not self.options.unload or model is None:
            return
        base = adapter.endpoint.base_url.rstrip("/")
        body = {"model": model, "messages": [], "keep_alive": 0, "stream": False}
        try:
            response = await self._send(adapter, "POST", f"{base}/api/chat", body)
        except AdapterError as error:  # the server is gone: nothing left to unload
            log.warning("could not unload %s from %s: %s", model, base, error)
            return
        if response.status_code >= 300:
            log.warning("could not unload %s from %s: HTTP %s", model, base, response.status_code)

    def _model(self, adapter: Any) -> str | None:
        model = self.options.model or adapter.config.options.get("model")
        return adapter.wire_model(model) if isinstance(model, str) and model else None

    async def _get_version(self, adapter: Any, base: str) -> str | None:
        response = await self._send(adapter, "GET", f"{base}/api/version")
        if response.status_code == 404:  # a server older than /api/version
            response = await self._send(adapter, "GET", f"{base}/api/tags")
            _raise_for(response, adapter.name, f"GET {base}/api/tags")
            return None
        _raise_for(response, adapter.name, f"GET {base}/api/version")
        version = _json(response).get("version")
        return version if isinstance(version, str) else None

    async def _send(
        self,
        adapter: Any,
        method: str,
        url: str,
        body: dict[str, Any] | None = None,
        wait: float | None = None,
    ) -> httpx.Response:
        headers = adapter.endpoint.request_headers()
        if body is None:
            headers.pop("content-type", None)
        try:
            return await adapter.http_client().request(  # type: ignore[no-any-return]
                method,
                url,
                json=body,
                headers=headers,
                timeout=wait or self.options.check_timeout,
            )
        except http_errors() as exc:
            if is_connect_failure(exc):
                raise _unreachable(adapter.endpoint.base_url, exc, adapter.name) from exc
            raise NetworkError(
                f"{method} {url} failed: {type(exc).__name__}: {exc}", provider=adapter.name
            ) from exc


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


def _raise_for(response: httpx.Response, provider: str, what: str) -> None:
    if response.status_code < 300:
        return
    error = error_from_http(response.status_code, dict(response.headers), response.content)
    raise error_for(
        error.error_class,
        f"{what}: HTTP {response.status_code}: {error.message}",
        provider=provider,
        provider_status=response.status_code,
        provider_message=error.provider_message,
        retryable=error.retryable,
        retry_after_seconds=error.retry_after_seconds,
    )


def _json(response: httpx.Response) -> dict[str, Any]:
    try:
        data = response.json()
    except ValueError:
        data = None
    if not isinstance(data, dict):
        raise error_for(
            ErrorClass.OTHER,
            f"{response.request.url} did not answer with a JSON object: {response.text[:120]!r}",
        )
    return data


def _error_text(response: httpx.Response) -> str:
    try:
        error = response.json().get("error")
    except (ValueError, AttributeError):
        error = None
    return error if isinstance(error, str) else response.text[:300]


def _adopt(adapter: Any, model: str, shown: dict[str, Any]) -> AdapterCapabilities:
    """The adapter's capabilities as the server reports them for ``model``."""
    caps: AdapterCapabilities = adapter.capabilities
    update: dict[str, Any] = {}
    listed = shown.get("capabilities")
    if isinstance(listed, list):  # servers since 0.6 list what the model can do
        for feature, flag in _FEATURES.items():
            if getattr(caps, flag) != (feature in listed):
                update[flag] = feature in listed
                _changed(adapter, model, flag, update[flag], f"{feature!r} listed: {update[flag]}")
    trained = _context_length(shown.get("model_info"))
    if trained is not None and caps.max_context_tokens > trained:
        update["max_context_tokens"] = trained
        _changed(adapter, model, "max_context_tokens", trained, f"trained for {trained}")
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


def _changed(adapter: Any, model: str, flag: str, value: Any, why: str) -> None:
    """A declared capability the server's report overrides: a loss is a WARN, a gain news."""
    level = logging.WARNING if value is False or flag == "max_context_tokens" else logging.INFO
    log.log(
        level,
        "%s: %s is now %s for %s, as the Ollama server reports (%s; declared %s)",
        adapter.name,
        flag,
        value,
        model,
        why,
        getattr(adapter.capabilities, flag),
        extra={"event": "metis.capability_mismatch", "adapter": adapter.name, "capability": flag},
    )
