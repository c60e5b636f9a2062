"""``run_tools(..., timeout_seconds=...)``: the synchronous form bounds each call as
``arun_tools`` does; a call that outlasts it is answered as timed out while its worker thread,
which Python cannot stop, runs on to its end."""

from __future__ import annotations

import contextvars
import math
import threading

import pytest

from metis.errors import ConfigError
from metis.model import Message, Role, ToolResultBlock, ToolUseBlock
from metis.tools import run_tools, tool


def calling(*names: str) -> Message:
    calls = [ToolUseBlock(id=f"tu_{i}", name=n, input={"key": "abc"}) for i, n in enumerate(names)]
    return Message(role=Role.ASSISTANT, content=calls)


def texts(message: Message) -> list[tuple[bool, str]]:
    blocks = [b for b in message.content if isinstance(b, ToolResultBlock)]
    return [(b.is_error, b.text) for b in blocks]


@tool
def lookup(key: str) -> int:
    """The key's length."""
    return len(key)


@tool
def broken(key: str) -> int:
    """Always fails."""
    raise RuntimeError(f"no {key}")


def test_a_call_that_outlasts_the_timeout_is_answered_as_timed_out_the_others_kept() -> None:
    released = threading.Event()
    finished = threading.Event()
    threads: list[threading.Thread] = []

    @tool
    def block_thread(key: str) -> str:
        """Blocks its worker thread until the test lets it go."""
        threads.append(threading.current_thread())
        released.wait(30)  # a guard: never a hang, even when the timeout is not kept
        finished.set()
        return "too late"

    reply = calling("lookup", "block_thread", "broken")
    try:
        message = run_tools(reply, [lookup, block_thread, broken], timeout_seconds=0.05)
        assert not finished.is_set()  # answered while the tool still ran
    finally:
        released.set()
    assert texts(message) == [
        (False, "3"),
        (True, "block_thread did not finish within 0.05 s"),
        (True, "RuntimeError: no abc"),
    ]
    assert finished.wait(30)  # the thread was not stopped: it ran on to its end
    assert threads[0] is not threading.current_thread() and threads[0].daemon


def test_with_a_timeout_calls_that_finish_in_time_are_answered_as_without_one() -> None:
    reply = calling("lookup", "broken", "nosuch", "lookup")
    assert texts(run_tools(reply, [lookup, broken], timeout_seconds=30)) == texts(
        run_tools(reply, [lookup, broken])
    )


@pytest.mark.parametrize("bad", [0, -1, math.nan, math.inf, "5", True])
def test_a_timeout_that_is_not_a_number_of_seconds_above_0_is_refused(bad: object) -> None:
    with pytest.raises(ConfigError, match="timeout_seconds"):
        run_tools(calling("lookup"), [lookup], timeout_seconds=bad)  # type: ignore[arg-type]


REQUEST_ID: contextvars.ContextVar[str] = contextvars.ContextVar("request_id", default="unset")


@tool
def whose(key: str) -> str:
    """The request the caller is serving, from its context."""
    return f"{REQUEST_ID.get()}:{key}"


def test_a_call_run_in_a_worker_thread_sees_the_callers_context_variables() -> None:
    """As without a timeout (and in arun_tools), a tool reads what the caller's context holds
    (a request id, a tracing span): the worker thread runs in a copy of it."""
    token = REQUEST_ID.set("req_7")
    try:
        plain = run_tools(calling("whose"), [whose])
        bounded = run_tools(calling("whose", "whose"), [whose], timeout_seconds=60)
    finally:
        REQUEST_ID.reset(token)
    assert texts(plain) == [(False, "req_7:abc")]
    assert texts(bounded) == [(False, "req_7:abc"), (False, "req_7:abc")]
