"""A route's request (docs/gateway.md "Pass-through"): the router chooses each model in turn,
as for a library call (its limits, its availability, the fallback), and the gateway answers
each attempt its own way: passed through to a model whose API is the caller's, translated to
any other. A route falls back from one to the other within one request. Every answer names the
model that gave it (``x-metis-model``), each attempt that failed before answering is counted by
model and class, and a route whose every model failed says each one in its error message."""

from __future__ import annotations

import copy
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

from metis.errors import AdapterError
from metis.gateway.begun import begun
from metis.gateway.errors import metric_class
from metis.gateway.keys import KeyState
from metis.gateway.models import Target
from metis.gateway.passthrough import PATH_HEADER, PassThrough
from metis.gateway.passthrough_call import Passing
from metis.gateway.prepared import Prepared
from metis.gateway.service import (
    JsonResult,
    StreamResult,
    aclose_shielded,
    dropped_headers,
    log_dropped,
    next_by,
)
from metis.gateway.spent import Spent, spent_by
from metis.gateway.stream_writers import ending, stream_writer
from metis.routing.attempt import Attempt
from metis.routing.router import Router

MODEL_HEADER = "x-metis-model"
STREAM_HEADERS = {"content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache"}


@dataclass(slots=True)
class Served:
    """The attempt that answers a routed request: its headers, what it spent, and the bytes
    that end its stream by the deadline."""

    headers: dict[str, str] = field(default_factory=dict)
    spent: Spent = field(default_factory=Spent)
    failed: Callable[[AdapterError], bytes] | None = None
    ended: Callable[[], bool] = lambda: False
    failures: list[tuple[str, AdapterError]] = field(default_factory=list)
    """Each attempt that failed before answering: its model and its error."""
    logged: bool = False


class Routed:
    """Answers the requests to a route with a model of the caller's API."""

    def __init__(self, passer: PassThrough) -> None:
        self.passer = passer
        self.gateway = passer.gateway

    def takes(self, api: str, prepared: Prepared) -> bool:
        """Whether ``prepared`` names a route (each of its attempts answered here, passed
        through or translated)."""
        return isinstance(prepared.target.chat_model, Router)

    def _passing(
        self, api: str, prepared: Prepared, body: dict[str, Any], raw: bytes, attempt: Attempt
    ) -> Passing | None:
        """The attempt's pass-through, or None when it is translated (as is a model the route
        gives options of its own: they are set on the canonical request)."""
        chosen = attempt.target
        if chosen.options or not self.gateway.settings.pass_through:
            return None
        target = Target(
            prepared.target.name,
            chosen.adapter,
            chosen.model,
            chosen.capabilities,
            chosen.wire_model,
        )
        given = copy.deepcopy(body) if b"metis1." in raw else body  # its thinking, per model
        return self.passer.plan_for(api, given, raw, target, chosen.adapter, prepared.owner)

    # Whole answers ----------------------------------------------------------------------------

    async def complete(
        self,
        api: str,
        prepared: Prepared,
        body: dict[str, Any],
        raw: bytes,
        headers: Mapping[str, str],
        key: KeyState | None,
    ) -> JsonResult:
        router = prepared.target.chat_model
        assert isinstance(router, Router)
        if key is not None:
            await self.gateway.keys.admit(key, prepared.inbound.model)
        served = Served()

        async def answer(attempt: Attempt) -> JsonResult:
            try:
                result = await self._whole(api, prepared, body, raw, headers, attempt, served)
            except AdapterError as error:
                self._failed(attempt, error, served)
                raise
            result.headers[MODEL_HEADER] = attempt.target.model
            return result

        try:
            with anyio.fail_after(self.gateway.settings.request_timeout_seconds):
                return await router.serve(prepared.request, answer)
        except AdapterError as error:
            _name_failures(router.name, error, served)
            raise
        except TimeoutError:
            raise self.gateway.time_limit.exceeded() from None
        finally:
            if key is not None:
                await self.gateway.keys.release(key, served.spent.model, served.spent.usage)

    async def _whole(
        self,
        api: str,
        prepared: Prepared,
        body: dict[str, Any],
        raw: bytes,
        headers: Mapping[str, str],
        attempt: Attempt,
        served: Served,
    ) -> JsonResult:
        passing = self._passing(api, prepared, body, raw, attempt)
        if passing is None:
            _log_dropped(prepared, served)
            response = await attempt.complete()
            served.spent.model, served.spent.usage = spent_by(response)
            return await self.gateway.answered(api, prepared, response)
        await self.passer.converse(passing)
        try:
            answered = await self.passer.whole(passing, headers)
        finally:
            await self.passer.settle(passing, None)
        usage = passing.relay.usage if passing.relay is not None else None
        served.spent.model, served.spent.usage = passing.target.request_model, usage
        await attempt.settle(usage)
        return JsonResult(200, answered, self.passer.headers(passing, False))

    def _failed(self, attempt: Attempt, error: AdapterError, served: Served) -> None:
        """An attempt failed before it answered: counted, and kept for the route's error."""
        served.failures.append((attempt.target.model, error))
        self.gateway.metrics.failed_attempt(attempt.target.model, error)

    # Streams ----------------------------------------------------------------------------------

    async def stream(
        self,
        api: str,
        prepared: Prepared,
        body: dict[str, Any],
        raw: bytes,
        headers: Mapping[str, str],
        key: KeyState | None,
    ) -> StreamResult:
        """The first bytes are awaited here, so a route whose every model failed before them
        is an error reply with its status."""
        router = prepared.target.chat_model
        assert isinstance(router, Router)
        if key is not None:
            await self.gateway.keys.admit(key, prepared.inbound.model)
        served = Served()

        def open_(attempt: Attempt) -> AsyncIterator[bytes]:
            passing = self._passing(api, prepared, body, raw, attempt)
            if passing is None:
                return self._translated(api, prepared, attempt, served)
            return self._passed(passing, headers, attempt, served)

        chunks = router.serve_stream(prepared.request, open_)
        deadline = anyio.current_time() + self.gateway.settings.request_timeout_seconds
        try:
            first = await next_by(chunks, deadline, self.gateway.time_limit)
        except BaseException as error:
            if isinstance(error, AdapterError):
                _name_failures(router.name, error, served)
            await aclose_shielded(chunks)
            if key is not None:
                await self.gateway.keys.release(key, None, None)
            raise
        assert served.failed is not None
        rest = await begun(self._rest(first, chunks, served, key))
        limit = self.gateway.time_limit
        return StreamResult(
            rest, served.headers, deadline, limit, served.failed, lambda: served.ended()
        )

    async def _rest(
        self,
        first: bytes | None,
        chunks: AsyncIterator[bytes],
        served: Served,
        key: KeyState | None,
    ) -> AsyncGenerator[bytes, None]:
        try:
            yield first or b""  # at once: begun() takes it (an empty one is not sent)
            async for chunk in chunks:
                yield chunk
        finally:
            await aclose_shielded(chunks)
            if key is not None:
                await self.gateway.keys.release(key, served.spent.model, served.spent.usage)

    async def _passed(
        self, passing: Passing, headers: Mapping[str, str], attempt: Attempt, served: Served
    ) -> AsyncIterator[bytes]:
        """A pass-through attempt's bytes; a refusal before them lets the route move on."""
        passer = self.passer
        try:
            await passer.converse(passing)
            chunks = await passer.opened(passing, headers)
            served.headers = passer.headers(passing, True)
            served.headers[MODEL_HEADER] = attempt.target.model
            served.failed = lambda error: passer.error_bytes(passing, error)
            served.ended = lambda: passer.ended(passing)
            async for chunk in chunks:
                yield chunk
            await chunks.aclose()  # type: ignore[attr-defined]
        except AdapterError as error:
            if not attempt.served:
                self._failed(attempt, error, served)
            raise
        finally:
            usage = await passer.settle(passing, None)  # a cut stream's: an estimate
            served.spent.model, served.spent.usage = passing.target.request_model, usage
            await attempt.settle(usage)

    async def _translated(
        self, api: str, prepared: Prepared, attempt: Attempt, served: Served
    ) -> AsyncIterator[bytes]:
        """A translated attempt's bytes, as :meth:`Gateway.stream` writes them."""
        gateway = self.gateway
        _log_dropped(prepared, served)
        events = attempt.stream()
        try:
            first = await anext(events)
        except StopAsyncIteration:
            first = None
        except AdapterError as error:
            self._failed(attempt, error, served)
            raise
        writer, response_id = stream_writer(api, prepared)
        served.headers = {
            **STREAM_HEADERS,
            PATH_HEADER: "translated",
            MODEL_HEADER: attempt.target.model,
        }
        served.headers.update(dropped_headers(prepared.reported))

        served.failed = failed = ending(api, prepared, writer)
        served.ended = failed.ended
        chunks = gateway._chunks(
            api,
            prepared,
            events,
            first,
            writer,
            response_id,
            spent=served.spent,
            priced=attempt.target.model,
        )
        try:
            async for chunk in chunks:
                yield chunk
        finally:
            await aclose_shielded(chunks)


def _log_dropped(prepared: Prepared, served: Served) -> None:
    """What the request left out, logged once however many models it is translated for."""
    if prepared.reported and not served.logged:
        served.logged = True
        log_dropped(prepared, prepared.reported)


def _name_failures(route: str, error: AdapterError, served: Served) -> None:
    """The error of a route whose every model was tried says each one's class, not only the
    last one's message (its class, and so its status, stays the last one's)."""
    if len(served.failures) < 2 or served.failures[-1][1] is not error:
        return
    tried = ", ".join(f"{model} ({metric_class(failed)})" for model, failed in served.failures)
    error.message = f"every model of route {route} failed: {tried}; the last: {error.message}"
