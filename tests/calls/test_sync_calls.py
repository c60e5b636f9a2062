"""The synchronous forms' own event loop (metis/calls/background.py): Ctrl-C cancels the call
in flight, a running loop (a notebook) is served, a forked child gets a loop of its own, and
interpreter exit does not wait for a daemon thread's call."""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest

import metis
from metis.adapter import Adapter
from metis.calls import background
from metis.errors import BlockingCallError, OverloadedError
from metis.model import MessageComplete
from metis.routing import Router
from metis.testing.emulator import Emulator

MODEL = "anthropic:claude-sonnet-4-5"
GUARD_SECONDS = 30  # only ever reached when a test fails by hanging


class SilentServer:
    """Reads each request and never answers; says when one arrived and when the client closed
    its connection (the call was given up)."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        self.arrived = threading.Event()
        self.closed = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._hold, args=(connection,), daemon=True).start()

    def _hold(self, connection: socket.socket) -> None:
        with connection:
            if connection.recv(65536):
                self.arrived.set()
            while connection.recv(65536):
                pass
        self.closed.set()


@pytest.fixture
def silent(monkeypatch: pytest.MonkeyPatch) -> Iterator[SilentServer]:
    server = SilentServer()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    yield server
    server.listener.close()


@pytest.fixture
def ctrl_c() -> Iterator[None]:
    """SIGINT raises KeyboardInterrupt in this (the main) thread, as in a script."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals reach the main thread only")
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _press_ctrl_c_when(event: threading.Event) -> None:
    main = threading.main_thread().ident
    assert main is not None

    def press() -> None:
        if event.wait(GUARD_SECONDS):
            signal.pthread_kill(main, signal.SIGINT)

    threading.Thread(target=press, daemon=True).start()


@pytest.fixture
def at_emulator(emulator: Emulator, monkeypatch: pytest.MonkeyPatch) -> Emulator:
    monkeypatch.setenv("ANTHROPIC_BASE_URL", emulator.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key")
    return emulator


# Ctrl-C ----------------------------------------------------------------------------------


def test_ctrl_c_cancels_a_blocking_complete_and_the_loop_serves_on(
    silent: SilentServer, ctrl_c: None, emulator: Emulator
) -> None:
    _press_ctrl_c_when(silent.arrived)
    with pytest.raises(KeyboardInterrupt):
        metis.complete(MODEL, "Hi", max_retries=0)
    assert silent.closed.wait(GUARD_SECONDS)  # the request was cancelled, not left running
    reply = metis.complete(MODEL, "Hi", base_url=emulator.url, api_key="k")
    assert reply.text


def test_ctrl_c_during_a_sync_stream_is_a_clean_keyboard_interrupt(
    silent: SilentServer, ctrl_c: None, emulator: Emulator
) -> None:
    _press_ctrl_c_when(silent.arrived)
    with pytest.raises(KeyboardInterrupt) as caught:
        for _ in metis.stream(MODEL, "Hi", max_retries=0):
            pass
    assert caught.value.__context__ is None  # not a RuntimeError from aclose() on the way
    assert silent.closed.wait(GUARD_SECONDS)
    events = list(metis.stream(MODEL, "Hi", base_url=emulator.url, api_key="k"))
    assert isinstance(events[-1], MessageComplete)


@pytest.mark.parametrize("form", ["complete", "stream"])
def test_ctrl_c_landing_as_the_call_is_handed_to_the_loop_still_cancels_it(
    silent: SilentServer, monkeypatch: pytest.MonkeyPatch, form: str
) -> None:
    """The interrupt arrives after the loop took the call, before the sync side holds its
    future (a race seen once under load): the call is still cancelled, its connection closed."""
    loop = background.background_loop()
    start = loop.portal.start_task_soon

    def start_then_interrupted(*args: Any, **kwargs: Any) -> Any:
        start(*args, **kwargs)
        assert silent.arrived.wait(GUARD_SECONDS)
        raise KeyboardInterrupt

    monkeypatch.setattr(loop.portal, "start_task_soon", start_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        if form == "complete":
            metis.complete(MODEL, "Hi", max_retries=0)
        else:
            list(metis.stream(MODEL, "Hi", max_retries=0))
    monkeypatch.undo()
    assert silent.closed.wait(GUARD_SECONDS)


def test_ctrl_c_between_events_closes_the_stream(at_emulator: Emulator, ctrl_c: None) -> None:
    at_emulator.push_fault("stall=600")  # one event, then nothing
    with pytest.raises(KeyboardInterrupt):
        for _ in metis.stream(MODEL, "Tell me a story."):
            signal.raise_signal(signal.SIGINT)  # while the loop body runs
    assert list(metis.stream(MODEL, "Hi"))[-1].stop_reason.kind == "end_turn"


def test_a_sync_stream_yields_what_arrived_then_raises_the_error_that_ended_it(
    at_emulator: Emulator,
) -> None:
    at_emulator.push_fault("stream_error")  # after one event, the provider's in-stream error
    seen: list[object] = []
    with pytest.raises(OverloadedError):
        for event in metis.stream(MODEL, "Tell me a story.", max_retries=0):
            seen.append(event)
    assert isinstance(seen[-1], MessageComplete) and seen[-1].stop_reason.kind == "error"


# Inside a running event loop (a notebook) --------------------------------------------------


def test_the_sync_forms_serve_a_thread_that_runs_an_event_loop(at_emulator: Emulator) -> None:
    """A notebook's cell runs in the kernel's event loop: the README's first example works."""

    async def cell() -> tuple[str, object]:
        reply = metis.complete(MODEL, "Name three moons of Jupiter.")
        events = list(metis.stream(MODEL, "Count to five."))
        return reply.text, events[-1]

    for backend in ("asyncio", "trio"):
        text, last = anyio.run(cell, backend=backend)
        assert text and isinstance(last, MessageComplete)


def test_a_router_is_refused_inside_a_running_loop_pointing_at_valid_async_code() -> None:
    router = Router([MODEL])

    async def cell() -> None:
        metis.complete(router, "Hi")

    with pytest.raises(
        BlockingCallError, match=r"'reply = await metis\.acomplete\(router, \.\.\.\)'"
    ):
        asyncio.run(cell())

    async def streamed() -> None:
        list(metis.stream(router, "Hi"))

    with pytest.raises(
        BlockingCallError, match=r"'async for event in metis\.astream\(router, \.\.\.\)"
    ):
        anyio.run(streamed, backend="trio")


@pytest.mark.parametrize("what", ["complete", "stream", "count_tokens"])
def test_a_sync_call_on_the_background_loop_is_refused_with_code_that_runs(what: str) -> None:
    """There it would wait for itself (a stage, sink or store calling metis.complete)."""

    async def inside() -> None:
        result = getattr(metis.calls, what)(MODEL, "Hi")
        list(result) if what == "stream" else None

    with pytest.raises(BlockingCallError, match="would wait for itself") as caught:
        background.background_loop().call(inside)
    assert isinstance(caught.value, RuntimeError)  # what it was, still caught as one
    suggested = str(caught.value).rpartition("use '")[2].rstrip("'")
    compile(f"async def cell():\n    {suggested}\n", "<suggested>", "exec")  # valid code
    assert f"metis.a{what}(" in suggested
    assert "await metis.astream" not in suggested and "in metis.acomplete" not in suggested


# Fork and exit ---------------------------------------------------------------------------


def test_a_forked_child_gets_a_loop_of_its_own(at_emulator: Emulator) -> None:
    assert metis.complete(MODEL, "Hi").text  # the parent's loop is running
    pid = os.fork()
    if pid == 0:  # the child: exits with 0 only if its call was answered
        code = 1
        try:
            signal.alarm(GUARD_SECONDS)  # a hang ends the child (SIGALRM) instead
            code = 0 if metis.complete(MODEL, "Hi again").text else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert metis.complete(MODEL, "And the parent?").text


def test_stopping_the_loop_cancels_the_calls_in_flight() -> None:
    loop = background.BackgroundLoop()
    started = threading.Event()
    outcome: list[BaseException] = []

    async def forever() -> None:
        started.set()
        await anyio.sleep_forever()

    def call() -> None:
        try:
            loop.call(forever)
        except BaseException as exc:
            outcome.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    assert started.wait(GUARD_SECONDS)
    loop.stop()
    caller.join(GUARD_SECONDS)
    assert not caller.is_alive() and len(outcome) == 1
    assert not loop.thread.is_alive()


def test_stopping_the_loop_closes_its_adapters(
    at_emulator: Emulator, monkeypatch: pytest.MonkeyPatch
) -> None:
    disposed: list[Adapter] = []
    aclose = Adapter.aclose

    async def recording(self: Adapter) -> None:
        disposed.append(self)
        await aclose(self)

    monkeypatch.setattr(Adapter, "aclose", recording)
    loop = background.BackgroundLoop()
    assert loop.call(functools.partial(metis.acomplete, MODEL, "Hi")).text
    assert disposed == []
    loop.stop()
    assert len(disposed) == 1 and not loop.thread.is_alive()


def _script(body: str) -> str:
    return textwrap.dedent(
        """
        import os, socket, sys, threading
        import metis
        from metis.testing.emulator import Emulator

        listener = socket.create_server(("127.0.0.1", 0))
        arrived, closed = threading.Event(), threading.Event()

        def hold():
            while True:
                connection, _ = listener.accept()
                connection.recv(65536)
                arrived.set()
                while connection.recv(65536):
                    pass
                closed.set()

        threading.Thread(target=hold, daemon=True).start()
        os.environ["ANTHROPIC_BASE_URL"] = "http://127.0.0.1:%d" % listener.getsockname()[1]
        os.environ["ANTHROPIC_API_KEY"] = "test-key"
        MODEL = "anthropic:claude-sonnet-4-5"
        """
    ) + textwrap.dedent(body)


def _run(script: str, send_sigint: bool = False) -> subprocess.CompletedProcess[str]:
    process = subprocess.Popen(
        [sys.executable, "-c", script],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        if send_sigint:
            assert process.stdout is not None
            assert process.stdout.readline().strip() == "waiting"
            process.send_signal(signal.SIGINT)
        out, err = process.communicate(timeout=GUARD_SECONDS * 2)
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGKILL)
            process.communicate()
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


@pytest.mark.slow
@pytest.mark.parametrize(
    "call",
    [
        "metis.complete(MODEL, 'Hi', max_retries=0)",
        "[e for e in metis.stream(MODEL, 'Hi', max_retries=0)]",
    ],
)
def test_a_real_sigint_interrupts_a_sync_call_and_the_process_calls_on(call: str) -> None:
    script = _script(
        f"""
        threading.Thread(target=lambda: arrived.wait() and print("waiting", flush=True)).start()
        try:
            {call}
        except KeyboardInterrupt:
            print("interrupted; connection closed:", closed.wait(30), flush=True)
        with Emulator(host="127.0.0.1", port=0) as emulator:
            print(metis.complete(MODEL, "Hi", base_url=emulator.url).stop_reason.kind)
        """
    )
    done = _run(script, send_sigint=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["interrupted; connection closed: True", "end_turn"]
    assert "RuntimeError" not in done.stderr


@pytest.mark.slow
def test_a_child_forked_after_a_sync_call_calls_without_hanging() -> None:
    script = _script(
        """
        with Emulator(host="127.0.0.1", port=0) as emulator:
            os.environ["ANTHROPIC_BASE_URL"] = emulator.url
            print("parent", metis.complete(MODEL, "Hi").stop_reason.kind, flush=True)
            pid = os.fork()
            if pid == 0:
                print("child", metis.complete(MODEL, "Hi").stop_reason.kind, flush=True)
                os._exit(0)
            _, status = os.waitpid(pid, 0)
            print("child exit", os.waitstatus_to_exitcode(status))
        """
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["parent end_turn", "child end_turn", "child exit 0"]


@pytest.mark.slow
def test_exit_does_not_wait_for_a_daemon_threads_call() -> None:
    """Before: exit waited for the call (its retry made a new connection), up to its
    timeout_seconds (600 here; the guard ends the test long before)."""
    script = _script(
        """
        call = lambda: metis.complete(MODEL, "Hi", timeout_seconds=600)
        threading.Thread(target=call, daemon=True).start()
        arrived.wait()
        print("exiting", flush=True)
        """
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["exiting"]


def test_a_router_called_synchronously_is_closed_at_exit_with_nothing_said() -> None:
    # The README's routing snippet as a script: nobody closes the router, and the process
    # ends without an unclosed-adapter warning or an error from a collector at shutdown.
    script = textwrap.dedent(
        """
        import os, warnings
        warnings.simplefilter("always", ResourceWarning)
        import metis
        from metis.routing import Router
        from metis.testing.emulator import Emulator

        emulator = Emulator(host="127.0.0.1", port=0).__enter__()
        os.environ.update(ANTHROPIC_BASE_URL=emulator.url, ANTHROPIC_API_KEY="k")
        router = Router(["anthropic:claude-sonnet-4-5"])
        print(metis.complete(router, "Hi").stop_reason.kind, flush=True)
        """
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "end_turn"
    assert "never closed" not in done.stderr
    assert "Exception ignored" not in done.stderr


def test_a_signal_handler_may_call_as_the_first_call_starts_the_loop() -> None:
    """The handler runs in the thread that was starting the loop, with its lock held.
    Before: the handler's call waited for that lock for good (the process hung)."""
    script = _script(
        """
        import signal
        from metis.calls import background

        with Emulator(host="127.0.0.1", port=0) as emulator:
            os.environ["ANTHROPIC_BASE_URL"] = emulator.url

            def handler(signum, frame):
                print("handler", metis.complete(MODEL, "Hi").stop_reason.kind, flush=True)

            signal.signal(signal.SIGUSR1, handler)
            start, raised = background.BackgroundLoop.__init__, []

            def starting(self):
                if not raised:
                    raised.append(True)
                    signal.raise_signal(signal.SIGUSR1)  # the handler runs here
                start(self)

            background.BackgroundLoop.__init__ = starting
            print("main", metis.complete(MODEL, "Hi").stop_reason.kind, flush=True)
            loops = [t for t in threading.enumerate() if t.name == "metis-sync-calls"]
            print("loops", len(loops), flush=True)
        """
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["handler end_turn", "main end_turn", "loops 1"]


def test_ctrl_c_as_the_loop_starts_leaves_no_loop_running(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the interrupted start left its loop's thread running, owned by no one (never
    stopped, even at exit), and the next call started another."""

    class Interrupted(concurrent.futures.Future[Any]):
        def result(self, timeout: float | None = None) -> Any:
            if timeout is None:  # the start's own wait, interrupted
                raise KeyboardInterrupt
            return super().result(timeout)

    def loops() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "metis-sync-calls"]

    before = loops()
    monkeypatch.setattr(background.concurrent.futures, "Future", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        background.BackgroundLoop()
    assert loops() == before
