"""retry: bounded retries of transient failures (docs/contract.md §4), with tenacity.

Total attempts are ``1 + config.max_retries``, or ``1 + call.max_retries`` when the caller set
the call's own (a router does). Which error classes are retried, and how long to wait, is the
table ``metis.errors.RETRY_POLICY``; a provider's Retry-After (seconds, an HTTP
date, or ``retry-after-ms``) wins, capped at 60 s. A streamed call is retried only while no
event has reached the caller: after that, a failure ends the stream as docs/contract.md §4 says.
The request is final when it reaches this stage: its body is serialized here, once, and every
attempt sends (and an auth step signs) those bytes. The call's deadline bounds the whole loop:
a wait (backoff or Retry-After) that would end past it is not slept; the last error is raised
at once, its ``retry_after_seconds`` as the provider sent it. Sleeping goes through anyio
(asyncio and trio), and ``adapter.cancel()`` cuts it short.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import anyio
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.stop import stop_base

from metis.errors import MAX_RETRY_AFTER_SECONDS, RETRY_POLICY, AdapterError
from metis.model.events import StreamEvent
from metis.pipeline.call import Call
from metis.pipeline.config import AdapterConfig
from metis.pipeline.request import WireRequest
from metis.pipeline.services import StageServices
from metis.pipeline.stage import Inner, Stage


class Retry(Stage[Any, Any, StreamEvent, StreamEvent]):
    name = "retry"
    takes_batches = True  # it hands on what comes, one chunk's events at a time

    sleep: Callable[[float], Awaitable[None]] | None = None
    """Tests may replace how the stage sleeps; by default the call's cancellable sleep."""
    _max_retries: int = AdapterConfig.model_fields["max_retries"].default

    def bind(self, services: StageServices) -> None:
        self._max_retries = services.config.max_retries

    def __call__(
        self, request: Any, call: Call, inner: Inner[Any, StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        if isinstance(
            request, WireRequest
        ):  # final now: its bytes are made once, for every attempt
            request = request.serialized()
        return _Attempts(self._attempts(request, call, inner))

    async def _attempts(
        self, request: Any, call: Call, inner: Inner[Any, StreamEvent]
    ) -> tuple[AsyncIterator[Any], Any] | None:
        """Attempts until one hands out its first item: that attempt's iterator and the item
        (None: it ended with none). Only a failure before the first item is retried."""
        retries = call.terms.max_retries
        retries = self._max_retries if retries is None else retries
        call.attempt = 0
        iterator = inner(request, call)
        try:
            return iterator, await anext(iterator)
        except StopAsyncIteration:
            return None
        except AdapterError as exc:
            if retries <= 0 or not exc.retryable:
                raise
            failed = exc  # tenacity is set up only once an attempt failed
        return await self._retried(request, call, inner, retries, failed)

    async def _retried(
        self,
        request: Any,
        call: Call,
        inner: Inner[Any, StreamEvent],
        retries: int,
        failed: AdapterError,
    ) -> tuple[AsyncIterator[Any], Any] | None:
        """The attempts after the first, which ended with ``failed``: tenacity's loop, whose
        first attempt gives that failure again (its stop and wait then see it as they would
        have seen the first attempt's)."""
        deadline = StopAtDeadline(call)
        retrying = AsyncRetrying(
            stop=stop_after_attempt(1 + retries) | deadline,
            wait=backoff,
            retry=retry_if_exception(_transient),
            sleep=self.sleep or call.cancel.sleep,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    number = attempt.retry_state.attempt_number
                    if number == 1:
                        raise failed
                    call.attempt = number - 1
                    iterator = inner(request, call)
                    try:
                        first = await anext(iterator)
                    except StopAsyncIteration:
                        return None
                    return iterator, first
        except AdapterError as exc:
            exc.add_note(attempts_note(call.attempt + 1, retries, deadline.wait, exc.retryable))
            raise
        return None  # not reached: the last attempt's error is raised


def attempts_note(attempts: int, retries: int, wait: float | None, retryable: bool) -> str:
    """What the retries of a call that failed came to, said with its last error."""
    if wait is not None:
        before = "not retried" if attempts == 1 else f"{attempts} attempts failed"
        return (
            f"metis: {before}: the wait before a{'nother' if attempts > 1 else ' retry'} "
            f"({wait:.3g} s) would end past the call's deadline (timeout_seconds)"
        )
    if retryable:
        return f"metis: {attempts} attempts failed (max_retries={retries}); the last one's error"
    return f"metis: {attempts} attempts failed, the last with an error that is not retried"


def _transient(exc: BaseException) -> bool:
    return isinstance(exc, AdapterError) and exc.retryable


class _Attempts:
    """retry's stream: the attempts until one has handed out its first item, then that
    attempt's own iterator, asked directly (no frame of retry's per item: after the first
    item nothing is retried, so a failure goes out as it is)."""

    __slots__ = ("_next", "_start")

    def __init__(self, start: Awaitable[tuple[AsyncIterator[Any], Any] | None]) -> None:
        self._start: Awaitable[tuple[AsyncIterator[Any], Any] | None] | None = start
        self._next: Callable[[], Awaitable[Any]] = self._first

    def __aiter__(self) -> _Attempts:
        return self

    def __anext__(self) -> Awaitable[Any]:
        return self._next()

    async def _first(self) -> Any:
        start, self._start = self._start, None
        self._next = _exhausted  # however the attempts end, they are not run again
        if start is None:
            raise StopAsyncIteration
        found = await start
        if found is None:
            raise StopAsyncIteration
        iterator, first = found
        self._next = iterator.__anext__
        return first

    async def aclose(self) -> None:
        """The attempt in progress is closed by whoever opened it (the pipeline closes every
        iterator a call opened); the attempts not begun are dropped."""
        self._next = _exhausted
        start, self._start = self._start, None
        close = getattr(start, "close", None)
        if close is not None:
            close()


async def _exhausted() -> Any:
    raise StopAsyncIteration


class StopAtDeadline(stop_base):
    """Stop when the wait before the next attempt would end at or past the call's deadline."""

    def __init__(self, call: Call) -> None:
        self.call = call
        self.wait: float | None = None
        """The wait it stopped the retries before, once it has."""

    def __call__(self, state: RetryCallState) -> bool:
        wait = state.upcoming_sleep or 0.0
        if anyio.current_time() + wait < self.call.deadline:
            return False
        self.wait = wait
        return True


def backoff(state: RetryCallState) -> float:
    """Seconds to wait before the next attempt, for the error that ended the last one."""
    error = state.outcome.exception() if state.outcome else None
    if not isinstance(error, AdapterError):
        return 0.0
    if error.retry_after_seconds is not None:
        return float(min(error.retry_after_seconds, MAX_RETRY_AFTER_SECONDS))
    policy = RETRY_POLICY[error.error_class]
    delay = min(policy.max_delay, policy.base_delay * 2 ** (state.attempt_number - 1))
    return float(delay * random.uniform(1.0, 1.25))
