"""``run_tools(..., timeout_seconds=...)``: the synchronous form bounds each call as
``arun_tools`` does; a call that outlasts it is answered as timed out while its worker thread,
which Python cannot stop, runs on to its end."""

from __future__ import annotations

import contextvars
import math
import threading
from types import SimpleNamespace

import pytest

import metis.tools
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


class DeadlineClock:
    """Stands in for the clock ``run_tools`` measures its deadline with, so that the deadline
    passes when the test says, never when the machine is slow: the first reading (taken as the
    calls start) is 0; every later one waits until the calls that must finish in time have
    ended, then reads far past the deadline."""

    def __init__(self, in_time: int) -> None:
        self.in_time = in_time
        self.threads: list[threading.Thread] = []
        self.started = threading.Event()
        self.readings = 0

    def entered(self) -> None:
        self.threads.append(threading.current_thread())
        if len(self.threads) == self.in_time:
            self.started.set()

    def monotonic(self) -> float:
        self.readings += 1
        if self.readings == 1:
            return 0.0
        assert self.started.wait(30)  # a guard: never a hang
        for thread in self.threads:
            thread.join(30)
            assert not thread.is_alive()
        return 1e6


def test_a_call_that_outlasts_the_timeout_is_answered_as_timed_out_the_others_kept(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The deadline passes only once the quick calls have ended and while the blocked one
    still waits for the test, whatever the machine's load."""
    clock = DeadlineClock(in_time=2)
    monkeypatch.setattr(metis.tools, "time", SimpleNamespace(monotonic=clock.monotonic))
    released = threading.Event()
    finished = threading.Event()
    threads: list[threading.Thread] = []

    @tool
    def measure(key: str) -> int:
        """The key's length."""
        clock.entered()
        return len(key)

    @tool
    def fail(key: str) -> int:
        """Always fails."""
        clock.entered()
        raise RuntimeError(f"no {key}")

    @tool
    def block_thread(key: str) -> str:
        """Blocks its worker thread until the test lets it go."""
        threads.append(threading.current_thread())
        released.wait(30)  # a guard: never a hang, even when the timeout is not kept
        finished.set()
        return "too late"

    reply = calling("measure", "block_thread", "fail")
    try:
        message = run_tools(reply, [measure, block_thread, fail], timeout_seconds=5)
        assert not finished.is_set()  # answered while the tool still ran
    finally:
        released.set()
    assert texts(message) == [
        (False, "3"),
        (True, "block_thread did not finish within 5 s"),
        (True, "RuntimeError: no abc"),
    ]
    assert finished.wait(30)  # the thread was not stopped: it ran on to its end
    assert threads[0] is not threading.current_thread() and threads[0].daemon


def test_a_call_still_blocked_is_answered_as_timed_out_under_the_real_clock() -> None:
    """With the real clock: the blocked call cannot end before the test releases it, which
    it does only after ``run_tools`` has answered, so however slow the machine, the answer is
    a timeout (load can only make the wait longer, never change the answer)."""
    released = threading.Event()

    @tool
    def block_thread(key: str) -> str:
        """Blocks its worker thread until the test lets it go."""
        released.wait(30)
        return "too late"

    try:
        message = run_tools(calling("block_thread"), [block_thread], timeout_seconds=0.05)
    finally:
        released.set()
    assert texts(message) == [(True, "block_thread did not finish within 0.05 s")]


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
