"""Which xdist worker runs which test file, and in what order (``--dist loadfile``, the default
in pyproject.toml): the files that took longest in the last run go first, so the last file a
worker starts is a short one and neither worker waits long for the other at the end. xdist's
own order (most tests first) sent files of a few slow tests (the official SDKs through the
gateway) last, to run alone while the other worker idled.

Each run keeps every file's seconds per test in pytest's cache; a file the cache does not know
counts as its number of tests times the median, so a first run keeps xdist's order. The files
of a group in ``SHARED`` run on one worker, one after the other: they share a cost a worker
pays once (importing an official SDK takes a second or two of CPU).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from typing import Any

import pytest
from xdist.scheduler import LoadFileScheduling

CACHE_KEY = "metis/seconds-per-test"
SHARED = {  # every test file that imports an official SDK (anthropic's takes 4 s of CPU)
    file: "official SDKs"
    for file in (
        "tests/gateway/test_gateway_compaction.py",
        "tests/gateway/test_gateway_legacy_functions.py",
        "tests/gateway/test_gateway_openai_tools.py",
        "tests/gateway/test_gateway_passthrough.py",
        "tests/gateway/test_gateway_passthrough_responses.py",
        "tests/gateway/test_gateway_passthrough_routes.py",
        "tests/gateway/test_gateway_pydantic_ai.py",
        "tests/gateway/test_gateway_reasoning_carried.py",
        "tests/gateway/test_gateway_responses_owners.py",
        "tests/gateway/test_gateway_sdk_helpers.py",
        "tests/gateway/test_gateway_sdks.py",
        "tests/testing/test_emulator_clients.py",
        "tests/testing/test_emulator_cloud_clients.py",
    )
}
_DEFAULT_SECONDS = 0.03


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class LongestFirst(LoadFileScheduling):
    """``loadfile`` scheduling, the longest work first."""

    def __init__(self, config: pytest.Config, log: Any = None) -> None:
        super().__init__(config, log)
        cache = getattr(config, "cache", None)  # none with -p no:cacheprovider
        known = cache.get(CACHE_KEY, {}) if cache is not None else {}
        self.per_test: dict[str, float] = known if isinstance(known, dict) else {}
        self.ordered = False

    def _split_scope(self, nodeid: str) -> str:
        file = file_of(nodeid)
        return SHARED.get(file, file)

    def _assign_work_unit(self, node: Any) -> None:
        if not self.ordered:  # the first assignment: the queue holds every unit
            self.ordered = True
            units = sorted(self.workqueue.items(), key=lambda unit: -self.expected(unit[1]))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)

    def expected(self, tests: dict[str, bool]) -> float:
        fallback = statistics.median(self.per_test.values()) if self.per_test else 0.0
        return sum(
            self.per_test.get(file_of(nodeid), fallback or _DEFAULT_SECONDS) for nodeid in tests
        )


class FileSeconds:
    """Adds up the seconds each file's tests took (setup, call, teardown) in the controller,
    and keeps them per test in the cache when the run ends."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        file = file_of(report.nodeid)
        self.seconds[file] += report.duration
        self.tests[file].add(report.nodeid)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        cache = getattr(session.config, "cache", None)
        if cache is None or not self.tests:
            return
        known = cache.get(CACHE_KEY, {})
        known = known if isinstance(known, dict) else {}
        for file, seconds in self.seconds.items():
            known[file] = round(seconds / len(self.tests[file]), 4)
        cache.set(CACHE_KEY, known)
