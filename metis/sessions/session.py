"""Session: one conversation as an object (docs/sessions.md).

The adapter (or router) is the application's, shared and stateless per call; a session owns
one conversation (its history, its id and the tool-id map kept under it, its model, options
and per-provider state) and has one owner: one turn at a time; a turn's events are read once.
"""

from __future__ import annotations

import contextlib
import inspect
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Iterator, Mapping
from contextlib import aclosing
from typing import Any, TypeVar, Unpack

from metis.adapter.adapter import Adapter
from metis.calls import request as call_request
from metis.calls.request import MessagesLike, ModelLike, ModelOptions, as_messages
from metis.catalog.usage_cost import Cost
from metis.core.ids import new_ulid
from metis.core.money import USD
from metis.errors import AdapterError, ConfigError, InvalidRequestError, ProtocolError
from metis.model.content import Message
from metis.model.dicts import MessageDict
from metis.model.events import StreamEvent
from metis.model.response import CanonicalResponse, TokenUsage
from metis.sessions.agent import DEFAULT_MAX_STEPS, RunSettings, run_events
from metis.sessions.blocking import BlockingForms, EventHandler
from metis.sessions.context import CONTEXT_CHECKS, Compact, ContextCheck, checked_compact
from metis.sessions.control import TurnControl, abandoned_turn_ended
from metis.sessions.core import CallRecord, Conversation
from metis.sessions.events import AskedT, RunComplete, RunEvent, RunResult
from metis.sessions.models import checked_adapters, checked_model
from metis.sessions.options import (
    OptionsRead,
    check_constructor,
    check_defaults,
    checked_turn,
)
from metis.sessions.provider_state import ProviderState, close_connections
from metis.sessions.saving import SavingForms
from metis.sessions.spending import Spending
from metis.sessions.stream import Reader, TurnStream
from metis.tools import checked_timeout

T = TypeVar("T")
_BRIEF = frozenset({"save", "add", "set messages"})
"""What holds a session only a moment: another owner waits for it instead of being refused."""
BRIEF_SECONDS = 30.0
"""The longest such a wait (a save of a long history); past it, SessionBusyError."""


class SessionBusyError(RuntimeError):
    """A turn was started on a session that has one in flight: a session has one owner."""


class Session(SavingForms, BlockingForms):
    """One conversation with a model: ``send`` a message and get the reply, ``stream`` a turn's
    events, or ``run`` the agent loop with tools; the history grows as it goes.

    ``model``: ``"provider:model"`` or a :class:`~metis.routing.Router`; assign another
    between turns (or between a run's steps) to move the conversation. ``messages``: the
    history to start from. ``adapters``: the application's adapters by stack name
    (``{"anthropic": adapter}``) or by model (``{"ollama:qwen3": local, "ollama:llama3.3":
    remote}``: two Ollama servers, or two models' settings), a model's taken before its
    stack's; a stack not given uses the adapter the one-line calls keep (key from the stack's
    variable or ``api_key=``). ``compact`` and ``context_check``: see
    :mod:`metis.sessions.context`. Options: the one-line calls' (``system``, ``tools``,
    ``max_output_tokens``, ...; an unknown one is a TypeError naming the nearest), the
    session's defaults, overridden per turn.
    """

    def __init__(
        self,
        model: ModelLike,
        messages: MessagesLike | None = None,
        *,
        session_id: str | None = None,
        adapters: Mapping[str, Adapter] | None = None,
        compact: Compact = None,
        context_check: ContextCheck = "auto",
        **options: Unpack[ModelOptions],
    ) -> None:
        check_constructor(options)
        if session_id is not None and not isinstance(session_id, str):
            raise ConfigError(f"session_id is a string, got {type(session_id).__name__}")
        if context_check not in CONTEXT_CHECKS:
            raise ConfigError(
                f"context_check {context_check!r}: expected one of {', '.join(CONTEXT_CHECKS)}"
            )
        self._conversation = Conversation(
            checked_model(model),
            as_messages(messages) if messages is not None else [],
            session_id or f"ses_{new_ulid()}",
            checked_adapters(adapters),
            ModelOptions(**options),
            compact=checked_compact(compact),
            context_check=context_check,
            provider_state=ProviderState(),
            spending=Spending(TokenUsage(), []),
        )
        self._lock = threading.Lock()
        self._holding = threading.Lock()  # the lock taken and its holder named, as one step
        self._holder: str | None = None
        self._control: TurnControl | None = None

    def __repr__(self) -> str:
        conversation = self._conversation
        return (
            f"<Session {conversation.session_id}: {len(conversation.history)} messages, "
            f"model {conversation.model!r}>"
        )

    # The conversation ----------------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The conversation's id: the tool-id store keeps its map under it."""
        return self._conversation.session_id

    @property
    def model(self) -> ModelLike:
        """The model the next call goes to; assigning another is the swap."""
        return self._conversation.model

    @model.setter
    def model(self, model: ModelLike) -> None:
        self._conversation.model = checked_model(model)

    @property
    def adapters(self) -> dict[str, Adapter]:
        """The application's adapters by stack or model name (add one to use it from the next
        call)."""
        return self._conversation.adapters

    @property
    def messages(self) -> list[Message]:
        """The history (a copy; assign a list to replace it between turns)."""
        return list(self._conversation.history)

    @messages.setter
    def messages(self, messages: MessagesLike) -> None:
        with self._owned("set messages"):
            self._conversation.history[:] = as_messages(messages)

    def add(self, *messages: Message | MessageDict) -> None:
        """Append messages to the history between turns (tool results the application
        answered, say)."""
        with self._owned("add"):
            self._conversation.history.extend(as_messages(list(messages)))

    @property
    def options(self) -> ModelOptions:
        """The session's default options (a copy, which refuses changes: assign new ones,
        between turns or steps, when the next model needs others: a swap to a model that
        cannot think, say)."""
        return OptionsRead(self._conversation.options)  # type: ignore[return-value]

    @options.setter
    def options(self, options: Mapping[str, Any]) -> None:
        if not isinstance(options, Mapping):
            raise ConfigError(
                f"Session.options is a mapping of options, got {type(options).__name__}"
            )
        check_defaults(options)
        self._conversation.options = ModelOptions(**options)  # type: ignore[typeddict-item]

    @property
    def usage(self) -> TokenUsage:
        """Every model call's usage so far, summed."""
        return self._conversation.spending.usage

    @property
    def costs(self) -> tuple[Cost, ...]:
        """Every model call's cost so far, in order, at the model catalog's prices (a call
        no table prices: ``priced`` False, and ``unpriced`` says why)."""
        return tuple(self._conversation.spending.costs)

    @property
    def cost_usd(self) -> USD | None:
        """What the conversation has cost so far in USD: every call's cost summed; None
        (unknown) when a call's price is unknown, never that call counted as 0."""
        return self._conversation.spending.cost_usd

    @property
    def busy(self) -> bool:
        """Whether a turn is in flight."""
        return self._lock.locked() and self._holder not in _BRIEF

    # One turn ------------------------------------------------------------------------------

    async def asend(
        self, message: MessagesLike | None = None, **options: Unpack[ModelOptions]
    ) -> CanonicalResponse:
        """Send ``message`` (or, without one, the history as it is) and return the reply,
        appended to the history. Options override the session's for this turn."""
        overrides = self._checked("send", options)
        record = CallRecord()
        async with self._turn("send") as control:
            mark = self._begin(message)
            events = self._conversation.call(overrides, control, record, mark)
            try:
                async with aclosing(events):
                    async for _ in events:
                        pass
            except AdapterError as error:
                reply = record.reply.response if record.reply is not None else None
                if error.partial_response is None and reply is not None:
                    error.partial_response = reply
                raise
        response = record.reply.response if record.reply is not None else None
        if response is None:
            raise ProtocolError(f"{record.model} ended its stream without message.complete")
        return response

    def astream(
        self, message: MessagesLike | None = None, **options: Unpack[ModelOptions]
    ) -> TurnStream[StreamEvent]:
        """Send ``message`` and yield the reply's canonical events, ending with
        ``message.complete``; the reply is appended when the stream ends (what arrived of it,
        if it is closed early or cancelled). Leave early inside ``async with``
        (:class:`~metis.sessions.stream.TurnStream`)."""
        overrides = self._checked("stream", options)
        return TurnStream(self._streamed(message, overrides, reader := Reader()), reader)

    async def _streamed(
        self, message: MessagesLike | None, options: ModelOptions, reader: Reader
    ) -> AsyncGenerator[StreamEvent, None]:
        async with self._turn("stream", reader) as control:
            mark = self._begin(message)
            events = self._conversation.call(options, control, CallRecord(), mark)
            async with aclosing(events):
                async for event in events:
                    yield event

    # The agent loop ------------------------------------------------------------------------

    async def arun(
        self,
        message: MessagesLike | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        tool_timeout_seconds: float | None = None,
        output_type: type[AskedT] | None = None,
        on_event: EventHandler | None = None,
        **options: Unpack[ModelOptions],
    ) -> RunResult[AskedT]:
        """Run the agent loop (:mod:`metis.sessions.agent`) from ``message``: the model is
        called, its tool calls answered with the session's ``tools``, until it stops calling
        them or ``max_steps`` model calls were made. ``on_event`` (plain or async) sees every
        event as it happens; ``output_type`` validates the last reply as that type
        (``RunResult.output``)."""
        events = self.astream_run(
            message,
            max_steps=max_steps,
            tool_timeout_seconds=tool_timeout_seconds,
            output_type=output_type,
            **options,
        )
        result: RunResult[AskedT] | None = None
        async with events:
            async for event in events:
                if on_event is not None:
                    handled = on_event(event)
                    if inspect.isawaitable(handled):
                        await handled
                if isinstance(event, RunComplete):
                    result = event.result
        assert result is not None  # run.complete is always the run's last event
        return result

    def astream_run(
        self,
        message: MessagesLike | None = None,
        *,
        max_steps: int = DEFAULT_MAX_STEPS,
        tool_timeout_seconds: float | None = None,
        output_type: type[Any] | None = None,
        **options: Unpack[ModelOptions],
    ) -> TurnStream[StreamEvent | RunEvent]:
        """:meth:`arun`'s events as they happen (:mod:`metis.sessions.events`), ending with
        ``run.complete``; the model is read again at each ``step.start``. Leave early inside
        ``async with`` (:class:`~metis.sessions.stream.TurnStream`)."""
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or max_steps < 1:
            raise ConfigError(f"max_steps is a whole number, at least 1; got {max_steps!r}")
        overrides = self._checked("run", options)
        output = call_request.structured_output(output_type, overrides)
        settings = RunSettings(max_steps, checked_timeout(tool_timeout_seconds), output)
        return TurnStream(self._run(message, overrides, settings, reader := Reader()), reader)

    async def _run(
        self,
        message: MessagesLike | None,
        options: ModelOptions,
        settings: RunSettings,
        reader: Reader,
    ) -> AsyncGenerator[StreamEvent | RunEvent, None]:
        async with self._turn("run", reader) as control:
            new = self._new(message)
            events = run_events(self._conversation, new, options, settings, control)
            async with aclosing(events):
                async for event in events:
                    yield event

    async def aclose(self) -> None:
        """Release what providers keep open for this conversation (the connection of a
        WebSocket stack, docs/websocket.md). The history stays; a later turn opens what it
        needs again. ``async with Session(...)`` closes it at the end."""
        with self._owned("aclose"):
            await close_connections(self._conversation.connections, self.session_id)

    async def __aenter__(self) -> Session:
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not self._left():  # else a turn's stream left unclosed: it ends once finalized
            await self.aclose()

    def _left(self) -> bool:
        """The block is left: a turn in flight (its stream held unclosed) is cancelled, what
        providers keep open released when it ends; False when none was in flight."""
        control = self._control
        if control is not None:
            control.release = True
        return self.cancel()

    def cancel(self) -> bool:
        """Stop the turn in flight, from any task or thread: a reply being streamed ends with
        what arrived (stop reason ``cancelled``), tools still running are answered as
        cancelled, a run ends with reason ``cancelled``. True if a turn was in flight."""
        control = self._control
        if control is None:
            return False
        control.cancel()
        return True

    # Internals -----------------------------------------------------------------------------

    @contextlib.contextmanager
    def _owned(self, what: str) -> Iterator[None]:
        """The session, held for ``what``; refused while a turn is in flight (a save or an
        edit holds it a moment: it is waited for)."""
        with self._holding:
            taken = self._lock.acquire(blocking=False)
            if taken:
                self._holder = what
            holder = self._holder
        if not taken:
            brief = holder is None or holder in _BRIEF  # None: taken, its holder not yet named
            if not (brief and self._lock.acquire(timeout=BRIEF_SECONDS)):
                raise SessionBusyError(
                    f"session {self.session_id}: {what} while a turn is in flight; a session "
                    "has one owner and one turn at a time (wait for the turn, or cancel() it; "
                    "a stream left early ends once closed: 'async with session.astream(...) "
                    "as events')"
                )
            with self._holding:
                self._holder = what
        try:
            yield
        finally:
            with self._holding:
                self._holder = None
                self._lock.release()

    @contextlib.asynccontextmanager
    async def _turn(self, what: str, reader: Reader | None = None) -> AsyncIterator[TurnControl]:
        """The session, held for a turn on the running loop (a dropped stream's turn ended)."""
        await abandoned_turn_ended(self._control)
        with self._owned(what):
            self._control = control = TurnControl(reader)
            try:
                yield control
            finally:
                self._control = None
                control.ended.set()

    def _checked(self, what: str, options: Mapping[str, Any]) -> ModelOptions:
        """A turn's options, checked: they override the session's, read at each call."""
        return checked_turn(what, options)

    def _new(self, message: MessagesLike | None) -> list[Message]:
        new = as_messages(message) if message is not None else []
        if not new and not self._conversation.history:
            raise InvalidRequestError(
                f"session {self.session_id}: nothing to send: the history is empty; give a message"
            )
        return new

    def _begin(self, message: MessagesLike | None) -> int:
        """Append the turn's messages; where the history stood before them."""
        new = self._new(message)
        mark = len(self._conversation.history)
        self._conversation.history.extend(new)
        return mark
