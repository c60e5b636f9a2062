"""Shared fixtures, and the two switches that keep the default test run short.

Async backends: an async test runs under asyncio and under trio, unless it is marked
``backend_independent`` (on the test, a ``pytest.param``, its class, or a module's
``pytestmark``): then it has no trio run (a mark on a ``pytest.param`` deselects it; the others
are never made, which keeps collection short). Mark a test so only when what it checks
does not depend on the event loop: a codec or stage fed from memory, a replay through a mock
transport, a wire format checked against the emulator (the socket reads under it are tested
under both backends by test_transport, test_socket_reads, test_deadlines, test_cancellation).
The gateway's tests (tests/gateway) count as marked: the server runs on asyncio alone.
Keep both backends wherever the backend matters (sockets, the transport, cancellation,
deadlines, timeouts, task groups, threads, the stores, concurrency). In a module marked so,
a test that does depend on the backend is marked ``backend_independent(False)``.
``--every-backend`` runs every async test under both anyway. ``anyio_backend`` is a module-scoped
parameter, so a module's asyncio tests run one after the other, then its trio ones, and such a
run of tests shares one event loop (``SharedRunner``) instead of making one per test; the next
test file starts on a loop of its own.

Slow tests: ``@pytest.mark.slow`` tests (whole processes, soaks, long property searches,
exhaustive matrices of waits for timeouts) are left out of the default run (``addopts`` in
pyproject.toml). ``python -m pytest -m slow`` runs them; ``python -m pytest -m "slow or not
slow"`` runs everything.
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The fixtures import what they patch: xdist's controller, which runs no test, loads none of it.

BACKENDS = ("asyncio", "trio")
GATEWAY_TESTS = Path(__file__).parent / "gateway"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--every-backend",
        action="store_true",
        help="run backend_independent async tests under trio as well as asyncio",
    )


DEFAULT_RUN_EXAMPLES = 30
FULL_SEARCH_EXAMPLES = 300


def pytest_configure(config: pytest.Config) -> None:
    # Collection builds thousands of objects that live to the end, and xdist's controller
    # keeps three reports of every test: the cyclic garbage collector, run every 700 new
    # objects, walked them again and again (a fifth of the controller's CPU over 6,000
    # trivial tests; 0.2 s of each worker's collection here). Nothing is
    # frozen yet (pytest_collection_finish does it in a worker): trio, imported later,
    # registers its Random with hypothesis, which looks for the Random's referrers and would
    # find none that are frozen.
    gc.set_threshold(10_000, 10, 10)
    from .xdist_partition import SHARED
    from .xdist_setup import configure

    configure(config, SHARED)
    # In xdist's controller too, which runs no test: hypothesis's summary imports it there at
    # the end anyway, and importing it looks up a Random's referrers over every object the
    # process holds by then (pytest_sessionfinish).
    _load_search_profile()


def _load_search_profile() -> None:
    """How many examples a property search tries (this module's docstring)."""
    from hypothesis import settings

    full = os.environ.get("METIS_FULL_SEARCH", "") not in ("", "0")
    examples = FULL_SEARCH_EXAMPLES if full else DEFAULT_RUN_EXAMPLES
    # No per-example deadline: it is a timed assertion, and on a loaded machine a scheduler
    # pause fails an example that is right (test_sse.py's any-chunking search did, at load 22).
    settings.register_profile("metis", max_examples=examples, deadline=None)
    settings.load_profile("metis")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: a worker per core and one more, which runs while another waits on a socket,
    a subprocess or a timer (measured on two loaded cores: 4:09 of wall with three workers,
    6:52 with two; 183 s of CPU against 171 s, a worker's collection being the difference)."""
    return len(os.sched_getaffinity(0)) + 1


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` with the longest files first (tests/xdist_schedule.py), each worker
    having collected only the files it runs when the files could be shared out among them
    (tests/xdist_partition.py)."""
    from .xdist_partition import SHARED
    from .xdist_setup import make_scheduler

    return make_scheduler(config, log, SHARED)


@pytest.fixture
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The event loop an async test runs under: ``pytest_generate_tests`` names it."""
    return str(request.param)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """An async test runs under each backend; a ``backend_independent`` one (marked on itself,
    its class or its module) under asyncio alone, its trio run never made."""
    if "anyio_backend" not in metafunc.fixturenames:
        return
    everywhere = metafunc.config.getoption("--every-backend")
    alone = not everywhere and _backend_independent(metafunc.definition)
    metafunc.parametrize("anyio_backend", BACKENDS[:1] if alone else BACKENDS, scope="module")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Leaves out the trio run of a test whose ``pytest.param`` is marked
    ``backend_independent`` (reported as deselected)."""
    if config.getoption("--every-backend"):
        return
    keep, drop = [], []
    for item in items:
        callspec = getattr(item, "callspec", None)
        trio = callspec is not None and callspec.params.get("anyio_backend") == "trio"
        (drop if trio and _backend_independent(item) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection built (the test modules, thousands of test items and their parameters,
    the recorded traffic) lives until the run ends: frozen out of the cyclic garbage
    collector's full passes, which walked all of it again each time (a tenth of a worker's
    CPU); the collector runs every 10,000 new objects (``pytest_configure``)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(10_000, 10, 10)
    gc.unfreeze = _unfreezes  # type: ignore[assignment]


class Unfreezes:
    """``gc.unfreeze`` while the tests run: what ``pytest_collection_finish`` froze, once
    unfrozen, is walked again by every later full collection (a test that collects 60 times
    took 24 s of CPU instead of 2). mypy's build unfreezes everything (tests/calls/
    test_tool_typing.py runs it in the process): the test that did is followed by a collection
    and a freeze of what lives then (``pytest_runtest_teardown``)."""

    def __init__(self) -> None:
        self.unfreeze = gc.unfreeze
        self.seen = False

    def __call__(self) -> None:
        self.seen = True
        self.unfreeze()

    def freeze_again(self) -> None:
        if self.seen:
            self.seen = False
            gc.collect()
            gc.freeze()


_unfreezes = Unfreezes()


class SharedRunner:
    """One event loop (anyio's test runner) for consecutive tests of one backend in one test
    file, closed when a test of the other backend, a sync test or another file's test comes
    next: anyio's plugin makes a runner for a test only when none is open, and a new one per
    test cost ~0.4 ms (asyncio) and ~0.9 ms (trio) of CPU, 2,500 times a run. What a test
    leaves running is cancelled when the runner closes, as before, only later; never in another
    file's tests, whose neighbours change from run to run (xdist shares the files out by their
    last timings): an asyncio task, a callback or an async generator's close that a file left
    on the loop ran inside the first asyncio test of the next file, where a check of what
    happens in a block (tests/transport/test_request_body.py's ResourceWarnings) saw it."""

    def __init__(self) -> None:
        self.scope: tuple[str, Path] | None = None
        self.lease: Any = None
        self.runner: Any = None  # anyio's TestRunner of the open lease

    def use(self, backend: str | None, file: Path) -> None:
        scope = None if backend is None else (backend, file)
        if scope == self.scope:
            return
        self.release()
        if scope is not None:
            from anyio.pytest_plugin import get_runner

            self.lease = get_runner(scope[0], {})
            self.runner = self.lease.__enter__()
            self.scope = scope

    def release(self) -> None:
        if self.lease is not None:
            lease, self.lease, self.scope, self.runner = self.lease, None, None, None
            lease.__exit__(None, None, None)


_shared_runner = SharedRunner()


def pytest_sessionfinish(session: pytest.Session) -> None:
    _shared_runner.release()
    if not hasattr(session.config, "workerinput"):
        # What the run leaves in this process (in xdist's controller, three reports of every
        # test) is kept to the end: out of the two full garbage collections pytest makes at
        # exit.
        gc.collect()
        gc.freeze()


def _backend_independent(item: pytest.Item) -> bool:
    """The closest ``backend_independent`` mark decides; ``backend_independent(False)`` on a
    test takes back its module's mark. Unmarked, the gateway's tests are: ``metis serve`` runs
    on uvicorn's asyncio loop, so its application is tested under asyncio (the library under
    it keeps its trio runs in the other folders)."""
    marker = item.get_closest_marker("backend_independent")
    if marker is not None:
        return marker.args[:1] != (False,)
    return GATEWAY_TESTS in item.path.parents


@pytest.fixture(autouse=True, scope="session")
def one_default_tls_context() -> Iterator[None]:
    """Every httpx client with the default TLS settings shares one context. httpx builds a
    new one per client, reading the whole CA bundle (~80 ms of CPU); the clients metis makes
    share one already (``metis.transport.stage.default_tls_context``), and this does the same
    for the clients the tests build themselves, over httpx's transport or the lean one
    (``metis.transport.http1.LeanTransport()``: 14 s of CPU a run, mostly in
    tests/transport/test_lean_vs_httpx.py)."""
    import httpx
    import httpx._transports.default as httpx_transports

    from .tls_sharing import LateSharing, shared_default_contexts

    global _late_tls_sharing
    with shared_default_contexts(httpx_transports), shared_default_contexts(httpx):
        _late_tls_sharing = LateSharing()  # httpx2's, once imported (pytest_runtest_setup)
        _late_tls_sharing.share()
        try:
            yield
        finally:
            _late_tls_sharing.close()
            _late_tls_sharing = None


_late_tls_sharing: Any = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Each test starts with no session already warned (tests reuse session ids), and shares
    the event loop of the tests of its backend and file just before it (``SharedRunner``), and
    the TLS contexts of httpx2 once imported (``one_default_tls_context``). Hooks, not
    an autouse fixture: a fixture's setup and teardown cost ~0.2 ms of CPU a test."""
    _forget_session_warnings()
    if _late_tls_sharing is not None:
        _late_tls_sharing.share()
    callspec = getattr(item, "callspec", None)
    backend = callspec.params.get("anyio_backend") if callspec is not None else None
    _shared_runner.use(backend, item.path)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    try:
        return (yield)
    finally:
        _forget_session_warnings()
        _unfreezes.freeze_again()


def _forget_session_warnings() -> None:
    """Clears the record of warned sessions (metis.pipeline.warned), when a test loaded it."""
    warned = sys.modules.get("metis.pipeline.warned")
    if warned is not None:
        warned.session_warnings.clear()


class Waits(list[float]):
    """The backoff waits the retry stage asked for, in order (none of them slept)."""


@pytest.fixture
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> Waits:
    """Every retry stage built while the test runs records its waits instead of sleeping
    (Retry-After and backoff are still computed, and the deadline still bounds them). The one
    way the tests skip backoff: request it as an argument, or with
    ``pytest.mark.usefixtures("no_backoff")`` on a module."""
    from metis.stages.control.retry import Retry

    waits = Waits()

    async def record(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr(Retry, "sleep", staticmethod(record))
    return waits


# A provider emulator on a free loopback port, per test module (metis.testing.emulator).
from .emulator_fixture import emulator, emulator_server  # noqa: E402, F401
