"""Provider batches: many canonical requests as one Anthropic Message Batch, OpenAI Batch
(over Chat Completions or Responses, and Azure OpenAI's over Chat Completions) or Gemini
batch (docs/batches.md).

``Batches(adapter)`` works through a chat adapter: each request is encoded by the adapter's
own stages and codec up to ``encode`` (as :mod:`metis.adapter.count_tokens` does), so an item
is exactly the body a single call would send, non-streamed; each result is read by the same
codec into a :class:`CanonicalResponse`. Every request of the flow (submit, status, results,
cancel) goes through the adapter's provider (``Provider.fetch``): its auth, transport,
deadlines, and error classification. A batch id is all it takes to follow or read a batch
later, from another process.
"""

from __future__ import annotations

import dataclasses
import json
import math
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any

import anyio

from metis.adapter.checks import a_request, check_ready, foreign_prefixes, of_adapter
from metis.adapter.count_tokens import Countable, model_call
from metis.adapter.delivery import folded
from metis.core.options import checked_options
from metis.errors import (
    MAX_RETRY_AFTER_SECONDS,
    AdapterError,
    CapabilityError,
    ErrorClass,
    InvalidRequestError,
    ProtocolError,
    error_for,
)
from metis.model.batches import BatchItem, BatchResults, BatchStatus
from metis.model.events import MessageComplete
from metis.model.request import CanonicalRequest
from metis.model.response import CanonicalResponse, DroppedContent
from metis.pipeline.call import Call
from metis.pipeline.provider import Provider
from metis.pipeline.request import WireRequest
from metis.wire.batches import RawItem, Send
from metis.wire.batches import anthropic as anthropic_batches
from metis.wire.batches import gemini as gemini_batches
from metis.wire.batches import openai as openai_batches
from metis.wire.response_reader import ResponseReader


class UnreadableResults(ProtocolError):
    """A batch's results file with lines that name no item (not JSON, no ``custom_id``): the
    items that were read are on ``partial_results``."""

    def __init__(self, message: str, partial_results: BatchResults, **details: Any) -> None:
        super().__init__(message, **details)
        self.partial_results = partial_results


class DuplicateResult(ProtocolError):
    """The error of an item the results name more than once (each id is submitted once):
    ``items`` holds every result read under that id, in the order of the results."""

    def __init__(self, message: str, items: tuple[BatchItem, ...], **details: Any) -> None:
        super().__init__(message, **details)
        self.items = items


class BatchWaitTimeout(AdapterError, TimeoutError):
    """:meth:`Batches.wait` ran out of time before the batch finished; ``status`` is the last
    one read (None when none came back in time). The batch goes on."""

    def __init__(self, message: str, status: BatchStatus | None, **details: Any) -> None:
        super().__init__(message, retryable=False, **details)
        self.status = status


def _check_seconds(name: str, value: object, most: float = math.inf) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if not number or not 0 <= value <= most:  # type: ignore[operator]  # NaN fails too
        raise InvalidRequestError(f"{name}: expected a number of seconds >= 0, got {value!r}")


KINDS = {
    ("anthropic", "anthropic"): "anthropic",
    ("openai", "openai_chat"): "openai",
    ("openai", "openai_responses"): "openai",
    ("azure", "openai_chat"): "azure",
    ("google", "schema"): "gemini",
}
"""Which batch API serves an adapter, by its stack's catalog provider and codec: the
first-party providers' own and Azure OpenAI's global batch (not Vertex AI's or Bedrock's,
which read and write cloud storage, nor the OpenAI-compatible services')."""

MAX_RESULTS_FILE = 1 << 30
"""The largest results file read (bytes): an Anthropic batch may be 256 MB of requests, and
its replies as much again; past this a ProtocolError, nothing more read."""


class Batches:
    """Submit, follow and read provider batches through one chat adapter."""

    def __init__(self, adapter: Countable) -> None:
        of_adapter(adapter, "Batches(adapter)")
        provider = adapter.pipeline.provider
        codec = provider.codec_name if provider is not None else None
        kind = KINDS.get((adapter.stack.catalog or "", codec or ""))
        if provider is None or kind is None:
            raise CapabilityError(
                f"{adapter.name}: no batch API metis speaks (Anthropic Message Batches, OpenAI "
                "Batch over Chat Completions and Responses, Azure OpenAI global batch over Chat "
                "Completions, Gemini batch mode; docs/batches.md)",
                provider=adapter.name,
            )
        self.adapter, self.kind = adapter, kind
        self.provider: Provider = provider
        self.base_url = adapter.endpoint.base_url.rstrip("/").partition("?")[0]
        self.root, self.item_path = self._root(adapter.endpoint.path)

    def _root(self, path: str) -> tuple[str, str]:
        """Where the batch API's resources live and the items' endpoint as it names it: OpenAI's
        under ``/v1`` with the whole path (``/v1/chat/completions``), Azure's under
        ``/openai/v1`` with the rest (``/chat/completions``)."""
        if self.kind not in ("openai", "azure"):
            return self.base_url, path
        prefix, version, rest = path.partition("/v1/")
        if not version:
            raise CapabilityError(
                f"{self.adapter.name}: the endpoint {path!r} is not under a /v1/ API root, "
                "where the batch API lives",
                provider=self.adapter.name,
            )
        root = f"{self.base_url}{prefix}/v1"
        return root, (f"/{rest}" if self.kind == "azure" else path)

    # Submitting ------------------------------------------------------------------------

    async def submit(
        self, requests: Mapping[str, CanonicalRequest] | Iterable[tuple[str, CanonicalRequest]]
    ) -> BatchStatus:
        """One batch of ``requests`` by the caller's ids; its status (``.id`` resumes it)."""
        pairs = self._checked(requests)
        models = {self.adapter.wire_model(r.model) for _, r in pairs}
        if self.kind == "gemini" and len(models) != 1:
            raise InvalidRequestError(f"a Gemini batch runs one model; these name {sorted(models)}")
        bodies: list[tuple[str, dict[str, Any]]] = []
        dropped: dict[str, list[DroppedContent]] = {}
        logged: set[Any] = set()  # one WARN line a kind of drop for the batch, not one an item
        for key, request in pairs:
            body, warnings = await self._body(request, logged)
            bodies.append((key, body))
            if warnings:
                dropped[key] = warnings
        status = await self._send(bodies, models)
        return dataclasses.replace(status, warnings=dropped)

    async def _send(
        self, bodies: list[tuple[str, dict[str, Any]]], models: set[str]
    ) -> BatchStatus:
        if self.kind == "anthropic":
            (send,) = anthropic_batches.submit(self.base_url, bodies)
            answer = await self._json(send)
            return anthropic_batches.read_status(answer, self.adapter.name)
        if self.kind == "gemini":
            (send,) = gemini_batches.submit(self.base_url, models.pop(), bodies)
            answer = await self._json(send)
            return gemini_batches.read_status(answer, self.adapter.name)
        path = self.item_path
        uploaded = await self._json(openai_batches.upload(self.root, path, bodies))
        file_id = openai_batches.file_id(uploaded)
        try:
            answer = await self._json(openai_batches.create(self.root, path, file_id))
        except AdapterError as error:  # the upload is kept by the provider: said, not lost
            error.add_note(f"the requests were uploaded as file {file_id}; it stays until deleted")
            raise
        return openai_batches.read_status(answer, self.adapter.name)

    def _checked(
        self, requests: Mapping[str, CanonicalRequest] | Iterable[tuple[str, CanonicalRequest]]
    ) -> list[tuple[str, CanonicalRequest]]:
        """``requests`` as (id, request) pairs, each a request this adapter can send."""
        pairs = list(requests.items() if isinstance(requests, Mapping) else requests)
        if not pairs:
            raise InvalidRequestError("a batch needs at least one request")
        for pair in pairs:
            if not (isinstance(pair, tuple) and len(pair) == 2):
                raise InvalidRequestError(
                    "a batch is your ids and their CanonicalRequests, {'a': request} or "
                    f"[('a', request)]; got an item {type(pair).__name__} {repr(pair)[:60]}"
                )
        keys = [key for key, _ in pairs]
        if len(set(keys)) != len(keys) or not all(isinstance(k, str) and k for k in keys):
            raise InvalidRequestError("batch ids must be distinct non-empty strings")
        adapter = self.adapter
        foreign = foreign_prefixes(adapter.stack)
        for _, request in pairs:
            a_request(request, adapter.name)
            check_ready(adapter.name, adapter.stack, adapter.endpoint, request, foreign)
        return pairs

    async def _body(
        self, request: CanonicalRequest, logged: set[Any]
    ) -> tuple[dict[str, Any], list[DroppedContent]]:
        """The item's wire body, and what encoding it left out (``logged``: the kinds of drop
        the batch's items logged already)."""
        encode = self.provider.part("encode")
        assert encode is not None
        call = self._call(request.model)
        call.drops.logged = logged
        unstreamed = request.model_copy(update={"stream": False})
        wire: WireRequest = await self.adapter.pipeline.prepare(unstreamed, call, through=encode)
        body = dict(wire.body)
        if self.kind == "gemini":
            body.pop("model", None)
        return body, list(call.drops.warnings)

    # Following -------------------------------------------------------------------------

    async def status(self, batch_id: str) -> BatchStatus:
        """Where the batch stands now (one request to the provider; ``wait`` polls it)."""
        answer = await self._json(self._module().status_request(self.root, batch_id))
        status: BatchStatus = self._module().read_status(answer, self.adapter.name)
        return status

    @checked_options  # poll_second= says poll_seconds, as CachedContents' methods do
    async def wait(
        self, batch_id: str, *, poll_seconds: float = 30.0, timeout_seconds: float | None = None
    ) -> BatchStatus:
        """The batch's status once it is final, asked every ``poll_seconds``; a
        :class:`BatchWaitTimeout` when it is not within ``timeout_seconds``. A poll that fails
        retryably (the network, a 5xx, a 429) is asked again at the next poll (after the wait
        the provider asks for, if longer), up to the adapter's ``max_retries`` in a row."""
        _check_seconds("poll_seconds", poll_seconds, sys.float_info.max)
        if timeout_seconds is not None:
            _check_seconds("timeout_seconds", timeout_seconds)
        status: BatchStatus | None = None
        failures = 0
        with anyio.move_on_after(timeout_seconds):
            while True:
                try:
                    status, failures = await self.status(batch_id), 0
                except AdapterError as error:
                    failures += 1
                    if not error.retryable or failures > self.adapter.config.max_retries:
                        raise
                    asked = min(error.retry_after_seconds or 0, MAX_RETRY_AFTER_SECONDS)
                    await anyio.sleep(max(poll_seconds, asked))
                    continue
                if status.done:
                    return status
                await anyio.sleep(poll_seconds)
        stood = f"it was {status.raw}" if status is not None else "no status had come back"
        raise BatchWaitTimeout(
            f"batch {batch_id} did not finish within timeout_seconds={timeout_seconds:g} ({stood})",
            status,
            provider=self.adapter.name,
        )

    async def cancel(self, batch_id: str) -> BatchStatus:
        """Ask the provider to stop the batch; its status after asking (items already done
        keep their results)."""
        await self._json(self._module().cancel_request(self.root, batch_id))
        return await self.status(batch_id)

    async def results(self, batch_id: str) -> BatchResults:
        """Every item of a finished batch by the caller's id; an ``InvalidRequestError``
        while the batch is still running."""
        answer = await self._json(self._module().status_request(self.root, batch_id))
        status = self._module().read_status(answer, self.adapter.name)
        if not status.done:
            raise InvalidRequestError(
                f"batch {batch_id} is {status.raw}: its results are not ready"
            )
        raw: list[RawItem] = []
        failed: AdapterError | None = None
        if self.kind == "anthropic":
            send = anthropic_batches.results_request(self.root, answer)
            if send is not None:
                raw = anthropic_batches.read_results(await self._bytes(send))
        elif self.kind in ("openai", "azure"):
            for send in openai_batches.results_requests(self.root, answer):
                try:
                    raw += openai_batches.read_results(await self._bytes(send))
                except AdapterError as error:  # the other file is read: what it holds is kept
                    failed = failed or error
        else:
            raw = gemini_batches.read_results(answer)
        results = BatchResults(status, self._items(batch_id, raw))
        if failed is not None:
            failed.partial_results = results
            raise failed
        unread = [item.fault for item in raw if not item.custom_id]
        if unread:
            raise UnreadableResults(
                f"batch {batch_id}: {len(unread)} results line(s) name no item, the first: "
                f"{unread[0]}; the {len(results)} items read are on error.partial_results",
                results,
                provider=self.adapter.name,
            )
        return results

    def _items(self, batch_id: str, raw: list[RawItem]) -> dict[str, BatchItem]:
        """The items by id; an id named more than once is an errored item keeping them all."""
        read: dict[str, list[BatchItem]] = {}
        for item in raw:
            if item.custom_id:
                read.setdefault(item.custom_id, []).append(self._item(item))
        return {key: self._one(batch_id, key, found) for key, found in read.items()}

    def _one(self, batch_id: str, key: str, found: list[BatchItem]) -> BatchItem:
        if len(found) == 1:
            return found[0]
        outcomes = ", ".join(item.outcome for item in found)
        error = DuplicateResult(
            f"batch {batch_id}: {key!r} has {len(found)} results ({outcomes}), though each id "
            "is sent once; all of them are on error.items",
            tuple(found),
            provider=self.adapter.name,
        )
        return BatchItem(key, "errored", None, error)

    def _item(self, item: RawItem) -> BatchItem:
        if item.fault is not None:
            return BatchItem(
                item.custom_id,
                "errored",
                None,
                ProtocolError(item.fault, provider=self.adapter.name),
            )
        if item.body is not None:
            try:
                return BatchItem(item.custom_id, "succeeded", self._response(item.body))
            except AdapterError as unreadable:  # this item only: the others are kept
                unreadable.provider = self.adapter.name
                return BatchItem(item.custom_id, "errored", None, unreadable)
        codec = self.provider.codec
        if item.error is not None:
            error: Exception = codec.error_from_http(
                item.status, {}, json.dumps(item.error).encode()
            )
        else:
            kind = ErrorClass.CANCELLED if item.outcome == "cancelled" else ErrorClass.OTHER
            error = error_for(kind, f"batch item {item.custom_id} was {item.outcome}")
        if isinstance(error, AdapterError):
            error.provider = self.adapter.name
        return BatchItem(item.custom_id, item.outcome, None, error)  # type: ignore[arg-type]

    def _response(self, body: dict[str, Any]) -> CanonicalResponse:
        model = body.get("model") or body.get("modelVersion") or "unknown"
        call = self._call(f"{self.adapter.name}:{model}")
        reader = ResponseReader(self.provider.codec, call, secrets=self.provider.services.secrets)
        events = [*reader.body(body), *reader.finish()]
        final = next(e for e in events if isinstance(e, MessageComplete))
        return folded(self.adapter.name, call, final, time.monotonic())

    # Sending ---------------------------------------------------------------------------

    def _module(self) -> Any:
        modules = {"anthropic": anthropic_batches, "gemini": gemini_batches}
        return modules.get(self.kind, openai_batches)

    def _wire(self, send: Send) -> WireRequest:
        headers = dict(self.adapter.endpoint.request_headers())
        content = send.content
        if send.content_type is not None:
            headers["content-type"] = send.content_type
        if send.method == "GET":
            headers.pop("content-type", None)
            content = b""
        return WireRequest(send.url, send.body, headers, method=send.method, content=content)

    async def _json(self, send: Send) -> dict[str, Any]:
        fetched = await self.provider.fetch(
            self._wire(send), self._call(f"{self.adapter.name}:batch")
        )
        return fetched.body

    async def _bytes(self, send: Send) -> bytes:
        _, _, raw = await self.provider.fetch_bytes(
            self._wire(send), self._call(f"{self.adapter.name}:batch"), max_bytes=MAX_RESULTS_FILE
        )
        return raw

    def _call(self, model: str) -> Call:
        return model_call(self.adapter, model)


__all__ = ["BatchWaitTimeout", "Batches", "DuplicateResult", "UnreadableResults"]
