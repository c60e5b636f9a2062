"""Which xdist worker runs which test file, and in what order (``--dist loadfile``, the default
in pyproject.toml): the files that took longest in the last run go first, so the last file a
worker starts is a short one and neither worker waits long for the other at the end. xdist's
own order (most tests first) sent files of a few slow tests (the official SDKs through the
gateway) last, to run alone while the other worker idled.

Each run keeps every file's seconds per test in pytest's cache. A file it does not know counts
as its seconds in the table the partition reads (tests/xdist_partition.py: the cache's, or on a
checkout that never ran, CI's fresh clone, the project's seed), so a first run orders the files
as the last one did; a file neither knows (one added since the seed was written) goes before
every known file, in xdist's order among them: what no one timed may be long, and it is no
tail then. The files
of a group in ``SHARED`` (tests/xdist_partition.py) run on one worker, one after the other:
they share a cost a worker pays once (importing an official SDK takes a second or two of CPU).
When each worker collected only its share of the files (tests/xdist_partition.py),
``Partitioned`` sends a file only to a worker that collected it.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

import pytest
from xdist.report import report_collection_diff
from xdist.scheduler import LoadFileScheduling

from .xdist_partition import COLLECT_SECONDS, SHARED, known_seconds, table_key

CACHE_KEY = "metis/seconds-per-test"
UNKNOWN_SECONDS = 1e6
"""What a file no table knows is expected to take: more than any file, so it goes first."""


def file_of(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]


class LongestFirst(LoadFileScheduling):
    """``loadfile`` scheduling, the longest work first."""

    def __init__(self, config: pytest.Config, log: Any = None, groups: dict[str, str] = SHARED):
        super().__init__(config, log)
        self.groups = groups
        cache = getattr(config, "cache", None)  # none with -p no:cacheprovider
        known = cache.get(CACHE_KEY, {}) if cache is not None else {}
        self.per_test: dict[str, float] = known if isinstance(known, dict) else {}
        self.per_file: dict[str, float] = known_seconds(config) if cache is not None else {}
        self.ordered = False

    def _split_scope(self, nodeid: str) -> str:
        file = file_of(nodeid)
        return self.groups.get(file, file)

    def _assign_work_unit(self, node: Any) -> None:
        if not self.ordered:  # the first assignment: the queue holds every unit
            self.ordered = True
            units = sorted(self.workqueue.items(), key=lambda unit: -self.expected(unit[1]))
            self.workqueue.clear()
            self.workqueue.update(units)
        super()._assign_work_unit(node)

    def expected(self, tests: Iterable[str]) -> float:
        """The seconds a unit's tests are expected to take (the module's docstring)."""
        total = 0.0
        for file, count in Counter(file_of(nodeid) for nodeid in tests).items():
            if file in self.per_test:
                total += self.per_test[file] * count
            elif file in self.per_file:
                total += self.per_file[file]
            else:
                total += UNKNOWN_SECONDS + count  # the most tests first among them, as xdist
        return total

    def remove_node(self, node: Any) -> str | None:
        """xdist's, but of a worker that died only the tests it had not run go to another:
        xdist queued its finished files again, sent them to a worker as empty batches, and
        waited for ever for their end. The test it died in is reported failed (xdist's
        DSession), not run again (a test that kills its worker would kill the next one)."""
        workload = self.assigned_work.pop(node)
        left = {unit: tests for unit, tests in workload.items() if not all(tests.values())}
        if not left:
            return None
        crashitem = next(
            nodeid for tests in left.values() for nodeid, done in tests.items() if not done
        )
        left[self._split_scope(crashitem)][crashitem] = True
        self.workqueue.update(
            (unit, tests) for unit, tests in left.items() if not all(tests.values())
        )
        for other in self.assigned_work:
            self._reschedule(other)
        return crashitem


class FileSeconds:
    """Adds up the seconds each file's tests took (setup, call, teardown) in the controller,
    and keeps them per test in the cache when the run ends; and, for the partition of the
    next run's files among the workers (tests/xdist_partition.py), each file's seconds to
    collect and run, when the run ran whole files (no ``-k``, ``--lf``, test ids)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)
        self.collecting: dict[str, float] = defaultdict(float)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        file = file_of(report.nodeid)
        self.seconds[file] += report.duration
        self.tests[file].add(report.nodeid)

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        for file, seconds in getattr(node, "workeroutput", {}).get(COLLECT_SECONDS, {}).items():
            self.collecting[file] += seconds

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        cache = getattr(session.config, "cache", None)
        if cache is None or not self.tests:
            return
        known = cache.get(CACHE_KEY, {})
        known = known if isinstance(known, dict) else {}
        for file, seconds in self.seconds.items():
            known[file] = round(seconds / len(self.tests[file]), 4)
        cache.set(CACHE_KEY, known)
        finished = exitstatus in (pytest.ExitCode.OK, pytest.ExitCode.TESTS_FAILED)
        if finished and whole_files(session.config):
            self.keep_file_seconds(session.config)

    def keep_file_seconds(self, config: pytest.Config) -> None:
        key = table_key(config)
        known = config.cache.get(key, {})  # type: ignore[union-attr]
        known = {
            file: seconds
            for file, seconds in (known.items() if isinstance(known, dict) else ())
            if (config.rootpath / file).is_file()
        }
        for file in set(self.seconds) | set(self.collecting):
            known[file] = round(self.seconds.get(file, 0.0) + self.collecting.get(file, 0.0), 3)
        config.cache.set(key, known)  # type: ignore[union-attr]


def whole_files(config: pytest.Config) -> bool:
    """Whether the run's tests of each file are all those the ``-m`` expression selects."""
    narrowed = config.getoption("keyword", "") or config.getoption("lf", False)
    narrowed = narrowed or config.getoption("deselect", None)
    return not narrowed and not any("::" in arg for arg in config.args)


class Partitioned(LongestFirst):
    """``LongestFirst`` over workers that each collected only their share of the files
    (tests/xdist_partition.py): the run is the union of their collections, and a unit of work
    goes only to a worker that collected it, the longest first. A unit several workers
    collected (a file the cache did not know, or one named on the command line) goes to
    whichever is free first, and must hold the same tests in each, as in xdist."""

    def __init__(self, config: pytest.Config, log: Any, shares: Any, groups: dict[str, str]):
        super().__init__(config, log, groups)
        self.shares = shares
        self.units: dict[str, list[str]] = {}  # the run's units and their tests, in order
        self.first: dict[str, str] = {}  # the worker whose collection set each unit's tests
        self.differences: list[tuple[str, list[str], Any]] = []
        self.runs: dict[Any, set[str]] = {}  # the units each worker can run
        self.index: dict[Any, dict[str, int]] = {}  # each worker's tests by nodeid
        self.pending: dict[Any, int] = {}  # each worker's tests sent and not yet reported
        self.started = False

    def add_node_collection(self, node: Any, collection: Sequence[str]) -> None:
        assert node in self.assigned_work
        self.registered_collections[node] = list(collection)
        self.index[node] = {nodeid: i for i, nodeid in enumerate(collection)}
        if self.started:  # a worker replacing one that died: what only it has joins the run
            known = set(self.units)
            self.runs[node] = self._runnable(node)
            for unit in self.runs[node] - known:
                self.workqueue[unit] = dict.fromkeys(self.units[unit], False)
            for unit, tests, other in self.differences:
                self._report_difference(unit, tests, other)
            self.differences.clear()
        elif self.collection_is_completed:
            for each in sorted(self.assigned_work, key=lambda each: str(each.gateway.id)):
                self.runs[each] = self._runnable(each)
        else:
            return
        self.shares.collected = sum(len(tests) for tests in self.units.values())
        if self.shares.session is not None:  # xdist counted the last worker's tests alone
            self.shares.session.testscollected = self.shares.collected

    def _runnable(self, node: Any) -> set[str]:
        """The units ``node`` collected as the run has them (the first worker to collect a
        unit sets its tests; a worker that collected it otherwise is a collection error)."""
        units: dict[str, list[str]] = {}
        for nodeid in self.registered_collections.get(node, ()):
            units.setdefault(self._split_scope(nodeid), []).append(nodeid)
        runnable = set()
        for unit, tests in units.items():
            if self.units.setdefault(unit, tests) == tests:
                self.first.setdefault(unit, str(node.gateway.id))
                runnable.add(unit)
            else:
                self.differences.append((unit, tests, node))
        return runnable

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.started:
            for node in self.nodes:
                self._reschedule(node)
            return
        self.started = True
        if self.differences:
            for unit, tests, node in self.differences:
                self._report_difference(unit, tests, node)
            self.log("**Different tests collected, aborting run**")
            return
        self.collection = [nodeid for tests in self.units.values() for nodeid in tests]
        longest_first = sorted(self.units, key=lambda unit: -self.expected(self.units[unit]))
        for unit in longest_first:
            self.workqueue[unit] = dict.fromkeys(self.units[unit], False)
        for node in self.nodes:
            if self._next_unit(node) is not None:
                self._assign_work_unit(node)
        for node in self.nodes:
            self._reschedule(node)

    def _report_difference(self, unit: str, tests: list[str], node: Any) -> None:
        message = report_collection_diff(self.units[unit], tests, self.first[unit], node.gateway.id)
        self.log(message)
        report = pytest.CollectReport(nodeid=unit, outcome="failed", longrepr=message, result=[])
        self.config.hook.pytest_collectreport(report=report)

    def _next_unit(self, node: Any) -> str | None:
        runnable = self.runs.get(node, set())
        return next((unit for unit in self.workqueue if unit in runnable), None)

    def _assign_work_unit(self, node: Any) -> None:
        unit = self._next_unit(node)
        assert unit is not None
        tests = self.workqueue.pop(unit)
        self.assigned_work[node][unit] = tests
        index = self.index[node]
        indices = [index[nodeid] for nodeid, done in tests.items() if not done]
        self.pending[node] = self.pending.get(node, 0) + len(indices)
        node.send_runtest_some(indices)

    def mark_test_complete(self, node: Any, item_index: int, duration: float = 0) -> None:
        """xdist's, counting the worker's pending tests down: xdist counted them again over
        every unit the worker was ever sent, at each test (a second of the controller's CPU)."""
        nodeid = self.registered_collections[node][item_index]
        if not self.assigned_work[node][self._split_scope(nodeid)][nodeid]:
            self.pending[node] -= 1
        super().mark_test_complete(node, item_index, duration)

    def _reschedule(self, node: Any) -> None:
        if node.shutting_down:
            return
        if self._next_unit(node) is None:
            node.shutdown()
        elif self.pending.get(node, 0) <= 2:
            self._assign_work_unit(node)

    def remove_node(self, node: Any) -> str | None:
        """A worker that died (it sent no ``workerfinished``) hands its share to the worker
        xdist starts in its place; its unfinished units wait for that one."""
        if not hasattr(node, "workeroutput"):
            self.shares.release(node)
        self.runs.pop(node, None)
        self.pending.pop(node, None)
        return super().remove_node(node)
