"""The event loop consecutive async tests share (tests/conftest.py ``SharedRunner``): one per
backend and test file, so what a file leaves running never runs inside another file's tests."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from ..conftest import SharedRunner

A, B = Path("tests/a/test_a.py"), Path("tests/b/test_b.py")


def test_a_files_tests_share_a_loop_and_the_next_file_starts_on_its_own() -> None:
    happened: list[str] = []

    async def left_running() -> None:
        try:
            await asyncio.Future()
        except asyncio.CancelledError:
            happened.append("cancelled as file a ended")
            raise

    async def first_test() -> asyncio.AbstractEventLoop:
        asyncio.get_running_loop().create_task(left_running())
        return asyncio.get_running_loop()

    async def loop_and_others_tasks() -> tuple[asyncio.AbstractEventLoop, set[Any]]:
        await asyncio.sleep(0)
        me = asyncio.current_task()
        return asyncio.get_running_loop(), {t for t in asyncio.all_tasks() if t is not me}

    shared = SharedRunner()
    try:
        shared.use("asyncio", A)
        a_loop = shared.runner.run_fixture(first_test, {})
        shared.use("asyncio", A)  # the file's next test: the same loop, the task still there
        a_again, tasks = shared.runner.run_fixture(loop_and_others_tasks, {})
        assert a_again is a_loop and [t for t in tasks if "left_running" in repr(t.get_coro())]
        assert happened == []
        shared.use("asyncio", B)
        assert happened == ["cancelled as file a ended"] and a_loop.is_closed()
        b_loop, tasks = shared.runner.run_fixture(loop_and_others_tasks, {})
        assert b_loop is not a_loop
        assert not [t for t in tasks if "left_running" in repr(t.get_coro())]
        shared.use(None, B)  # a sync test closes the loop too
        assert shared.runner is None and b_loop.is_closed()
    finally:
        shared.release()


def test_each_backend_has_its_own_loop_within_one_file() -> None:
    shared = SharedRunner()
    try:
        shared.use("asyncio", A)
        asyncio_runner = shared.runner
        shared.use("trio", A)
        assert shared.runner is not asyncio_runner and shared.scope == ("trio", A)
    finally:
        shared.release()
    assert shared.runner is None and shared.scope is None
