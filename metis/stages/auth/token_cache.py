"""A cloud access token shared by every call of an adapter (docs/cloud.md).

Getting a token can take seconds (a token endpoint, a metadata service, a CLI), so a
:class:`TokenCache` gives every call the same one:

- **single-flight**: however many calls find no fresh token at the same moment, one fetch
  runs and every one of them gets its answer;
- **cached** until ``refresh_margin`` seconds before the token expires, when the fetch says
  when that is (a token of unknown lifetime is shared only by the calls that asked for it
  while it was being fetched);
- **bounded**: each call waits within its own deadline and ``adapter.cancel()``; a call whose
  time runs out leaves with a NetworkError, a cancelled one with CancelledError, and neither
  disturbs the others. When the call running the fetch leaves, a waiting call takes it over: a
  blocking fetch goes on in its worker thread and the new leader waits for that same thread;
  an async fetch starts again in the new leader's task;
- **classified**: a fetch that fails is raised to each call as its own AdapterError (the
  stage's ``classify`` names the provider's known failures; anything else is an AuthError),
  with the fetcher's exception chained as its cause and the call's secrets and the tokens
  hidden from both. A token becomes one of the call's secrets (:meth:`Call.add_secret`).
"""

from __future__ import annotations

import inspect
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.lowlevel
import anyio.to_thread

from metis.core.raised import is_stray_cancel
from metis.errors import AdapterError, AuthError, ConfigError, NetworkError, scrub_error
from metis.pipeline.call import Call
from metis.pipeline.request import WireRequest


@dataclass(frozen=True, slots=True)
class Token:
    """An access token and when it expires (seconds since the epoch; None: not known)."""

    value: str
    expires_at: float | None = None


BlockingFetch = Callable[[], Token]
"""Gets a token, blocking (files, the network): run in a worker thread."""
AsyncFetch = Callable[[], Awaitable[Token]]
"""Gets a token on the event loop."""
Classify = Callable[[Exception, Call], BaseException | None]
"""The stage's error for a fetch's exception (None: an AuthError)."""


class _NoToken(Exception):
    """The fetch returned something that is not a token."""


class _Flight:
    """One fetch, shared by the calls that asked for a token while it ran."""

    def __init__(self, fetch: BlockingFetch | AsyncFetch, loop: object) -> None:
        self.fetch = fetch
        self.blocking = not is_async_callable(fetch)
        self.loop = loop
        self.leading = True
        """Whether a call is running the fetch (or waiting for its thread)."""
        self.ended = anyio.Event()
        """Set when the fetch ends or its leader leaves, whichever is first."""
        self.outcome: Token | Exception | None = None
        self._thread_lock = threading.Lock()
        self._thread_outcome: Token | Exception | None = None

    def run_in_thread(self, keep: Callable[[Token], None]) -> Token | Exception:
        """The blocking fetch, run once however many leaders wait for it (a later one finds
        the first one's outcome); ``keep`` stores a token even when no one waits any more."""
        with self._thread_lock:
            if self._thread_outcome is None:
                self._thread_outcome = _checked(self.fetch)
                if isinstance(self._thread_outcome, Token):
                    keep(self._thread_outcome)
            return self._thread_outcome

    @property
    def abandoned(self) -> bool:
        """A blocking fetch that ended after every caller left: start afresh."""
        return not self.leading and self._thread_outcome is not None


class TokenCache:
    """The token of one identity, for every call of one adapter (see the module)."""

    def __init__(
        self,
        source: str,
        *,
        classify: Classify | None = None,
        refresh_margin: float = 0.0,
        secrets: Callable[[], Iterable[str | None]] = tuple,
    ) -> None:
        self.source = source
        """What gives the token, for messages (``"the Entra ID token provider"``)."""
        self.refresh_margin = refresh_margin
        self._classify = classify
        self._secrets = secrets
        self._token: Token | None = None
        self._flight: _Flight | None = None

    def fresh(self) -> Token | None:
        """The cached token, while it is good for more than ``refresh_margin`` seconds."""
        token = self._token
        if token is None or token.expires_at is None:
            return None
        return token if time.time() < token.expires_at - self.refresh_margin else None

    def forget(self, value: str) -> None:
        """Drop the cached token if it is ``value`` (one a server refused)."""
        if self._token is not None and self._token.value == value:
            self._token = None

    async def token(self, call: Call, fetch: BlockingFetch | AsyncFetch) -> str:
        """A fresh token for ``call``: the cached one, the one being fetched, or a new one
        from ``fetch`` (blocking functions run in a worker thread)."""
        while True:
            cached = self.fresh()
            if cached is not None:
                return self._settle(cached, call)
            flight = self._flight
            loop = anyio.lowlevel.current_token()
            if flight is None or flight.loop != loop or flight.abandoned:
                flight = self._flight = _Flight(fetch, loop)
                return await self._lead(flight, call)
            if not flight.leading:  # its leader left: take the fetch over
                flight.leading, flight.ended = True, anyio.Event()
                return await self._lead(flight, call)
            ended = flight.ended
            with call.cancel.guard(call.deadline) as scope:
                await ended.wait()
            if scope.cancelled_caught:
                raise self._expired(call)
            if flight.outcome is not None:
                return self._settle(flight.outcome, call)

    async def _lead(self, flight: _Flight, call: Call) -> str:
        outcome: Token | Exception | None = None
        try:
            with call.cancel.guard(call.deadline):
                outcome = await self._run(flight)
        finally:
            if outcome is None:  # cancelled, out of time, or the task itself was cancelled
                flight.leading = False
            else:
                flight.outcome = outcome
                if self._flight is flight:
                    self._flight = None
            flight.ended.set()
        if outcome is None:
            raise self._expired(call)
        return self._settle(outcome, call)

    async def _run(self, flight: _Flight) -> Token | Exception:
        if flight.blocking:
            return await anyio.to_thread.run_sync(
                flight.run_in_thread, self._keep, abandon_on_cancel=True
            )
        try:
            token = await flight.fetch()  # type: ignore[misc]
        except Exception as exc:
            return exc
        except BaseException as raised:  # a CancelledError no one cancelled the call for
            if not is_stray_cancel(raised):
                raise
            return _stray(raised)
        outcome = _checked(lambda: token)
        if isinstance(outcome, Token):
            self._keep(outcome)
        return outcome

    def _keep(self, token: Token) -> None:
        if token.expires_at is not None:
            self._token = token

    def _settle(self, outcome: Token | Exception, call: Call) -> str:
        if isinstance(outcome, Token):
            call.add_secret(outcome.value)
            return outcome.value
        error = self._error(outcome, call)
        if error is not outcome:
            error.__cause__ = outcome  # before scrubbing: the cause's text is scrubbed too
        secrets = (*call.secrets, *(s for s in self._secrets() if s))
        scrub_error(error, tuple(sorted(set(secrets), key=len, reverse=True)))
        raise error

    def _error(self, exc: Exception, call: Call) -> BaseException:
        classified = self._classify(exc, call) if self._classify is not None else None
        if classified is not None:
            return classified
        if isinstance(exc, AdapterError | ConfigError):
            return exc
        what = str(exc) if isinstance(exc, _NoToken) else f"failed: {printable(exc)}"
        return AuthError(
            f"{call.provider}: {self.source} {what}",
            provider=call.provider,
            request_id=call.request_id,
        )

    def _expired(self, call: Call) -> NetworkError:
        return NetworkError(
            f"{call.provider}: the call's deadline ran out while waiting for {self.source}",
            provider=call.provider,
            request_id=call.request_id,
        )


async def refused_forgotten(
    sign: Callable[[WireRequest, Call], Awaitable[WireRequest]],
    request: WireRequest,
    call: Call,
    inner: Callable[[WireRequest, Call], AsyncIterator[Any]],
    refused: Callable[[WireRequest], None],
    challenged: Callable[[AuthError], bool] | None = None,
) -> AsyncIterator[Any]:
    """The items of ``inner`` for ``request`` as ``sign`` made it; an answer of 401 to it has
    ``refused`` called with what was sent (so the next call gets another token), and the
    AuthError goes on as it is: the refused request is not sent again, unless the 401 asked
    for a token with more claims and ``challenged`` says the next token carries them: then it
    is signed and sent once more (as azure-core's bearer token policy does)."""
    for again in (True, False):
        signed = await sign(request, call)
        try:
            async for item in inner(signed, call):
                yield item
            return
        except AuthError as error:
            if error.provider_status != 401:
                raise
            refused(signed)
            if not again or error.claims is None or challenged is None or not challenged(error):
                raise


def bearer_of(request: WireRequest) -> str | None:
    """The bearer token ``request`` carries, if any."""
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    return token if scheme.lower() == "bearer" and token else None


def _checked(fetch: Callable[[], Any]) -> Token | Exception:
    """What ``fetch`` gives: a token with a non-empty string, or the exception why not."""
    try:
        token = fetch()
    except Exception as exc:
        return exc
    except BaseException as raised:  # in a worker thread, no CancelledError is the call's
        asyncio = sys.modules.get("asyncio")
        if asyncio is None or not isinstance(raised, asyncio.CancelledError):
            raise
        return _stray(raised)
    if not isinstance(token, Token) or not isinstance(token.value, str) or not token.value:
        value = token.value if isinstance(token, Token) else token
        return _NoToken(f"gave no token (got {type(value).__name__})")
    return token


def _stray(raised: BaseException) -> _NoToken:
    """The fetch's failure for an asyncio CancelledError it raised of its own (a task it
    awaited, cancelled elsewhere): the call was not cancelled, so it is not ended as if it
    were (its caller would take it for its own cancellation)."""
    failed = _NoToken("failed: CancelledError (a task it awaited was cancelled)")
    failed.__cause__ = raised
    return failed


def printable(exc: BaseException) -> str:
    """``Type: message``, even for an exception whose ``str()`` fails."""
    try:
        text = str(exc)
    except Exception:  # an exception whose __str__ raises still gets reported
        text = "<its message could not be printed>"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def is_async_callable(function: Any) -> bool:
    """An async function, or an object whose ``__call__`` is one."""
    call = getattr(function, "__call__", None)  # noqa: B004 - the method itself is wanted
    return inspect.iscoroutinefunction(function) or inspect.iscoroutinefunction(call)
