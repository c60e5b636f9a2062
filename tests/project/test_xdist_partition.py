"""The default run's partition of the test files among xdist's workers, each collecting only
its share (tests/xdist_partition.py), and the scheduler over their collections
(tests/xdist_schedule.py ``Partitioned``)."""

from __future__ import annotations

import json
import random
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from ..xdist_partition import (
    NO_SHARE,
    PARTITION,
    SEED,
    SHARE,
    SHARED,
    OwnShare,
    Shares,
    known_seconds,
    split,
    write_seed,
)
from ..xdist_schedule import LongestFirst, Partitioned


def loads(shares: dict[str, int], seconds: dict[str, float], workers: int) -> list[float]:
    totals = [0.0] * workers
    for file, share in shares.items():
        totals[share] += seconds.get(file, 0.0)
    return totals


def test_the_longest_file_goes_first_to_the_share_with_least_so_far() -> None:
    seconds = {"a.py": 10.0, "b.py": 6.0, "c.py": 5.0, "d.py": 4.0, "e.py": 1.0}
    shares = split(seconds, {}, 2)
    assert shares == {"a.py": 0, "b.py": 1, "c.py": 1, "d.py": 0, "e.py": 1}
    assert loads(shares, seconds, 2) == [14.0, 12.0]


def test_every_file_is_in_one_share_and_the_shares_are_balanced() -> None:
    for seed in range(50):
        rng = random.Random(seed)
        seconds = {f"t{i}.py": rng.expovariate(1.0) for i in range(rng.randint(3, 60))}
        workers = rng.randint(2, 3)
        shares = split(seconds, {}, workers)
        assert set(shares) == set(seconds)
        assert set(shares.values()) <= set(range(workers))
        totals = loads(shares, seconds, workers)
        # the greedy's bound: the share with most exceeds the one with least by one file at most
        assert max(totals) - min(totals) <= max(seconds.values()) + 1e-9


def test_a_group_shares_one_worker_even_its_files_the_cache_does_not_know() -> None:
    seconds = {"a.py": 5.0, "b.py": 4.0, "sdk1.py": 3.0, "sdk2.py": 3.0, "c.py": 1.0}
    groups = {"sdk1.py": "sdk", "sdk2.py": "sdk", "sdk3.py": "sdk"}
    shares = split(seconds, groups, 3)
    assert shares["sdk1.py"] == shares["sdk2.py"] == shares["sdk3.py"]
    assert shares["sdk1.py"] == 0  # the group weighs 6, the most: it goes first
    assert set(shares) == set(seconds) | set(groups)


def test_no_partition_for_fewer_units_than_workers_or_a_single_worker() -> None:
    assert split({"a.py": 1.0, "b.py": 2.0}, {}, 3) == {}
    assert split({"a.py": 1.0, "b.py": 1.0, "c.py": 1.0}, {"a.py": "g", "b.py": "g"}, 3) == {}
    assert split({"a.py": 1.0, "b.py": 2.0}, {}, 1) == {}
    assert split({}, {}, 2) == {}


def test_a_worker_leaves_out_only_the_files_of_other_shares(tmp_path: Path) -> None:
    config = SimpleNamespace(
        rootpath=tmp_path,
        workerinput={SHARE: 1, PARTITION: {"t/a.py": 0, "t/b.py": 1}},
    )
    own = OwnShare(config)  # type: ignore[arg-type]
    assert own.pytest_ignore_collect(tmp_path / "t" / "a.py") is True
    assert own.pytest_ignore_collect(tmp_path / "t" / "b.py") is None
    assert own.pytest_ignore_collect(tmp_path / "t" / "new.py") is None  # every worker's
    assert own.pytest_ignore_collect(tmp_path / "t") is None  # folders are walked
    assert own.pytest_ignore_collect(tmp_path / "t" / "data.json") is None
    assert own.pytest_ignore_collect(tmp_path.parent / "elsewhere.py") is None


class Cache:
    def __init__(self, tables: dict[str, Any]) -> None:
        self.tables = tables

    def get(self, key: str, default: Any) -> Any:
        return self.tables.get(key, default)


def seeded_config(root: Path, tables: dict[str, Any]) -> Any:
    config = SimpleNamespace(rootpath=root, cache=Cache(tables))
    config.getoption = lambda name, default=None: "not slow" if name == "markexpr" else default
    return config


def test_a_checkout_that_never_ran_reads_the_seed_and_a_cache_table_wins(tmp_path: Path) -> None:
    assert known_seconds(seeded_config(tmp_path, {})) == {}  # no seed either: no partition
    (tmp_path / "tests").mkdir()
    (tmp_path / SEED).write_text('{"not_slow": {"t/a.py": 2.0}, "slow": {"t/b.py": 1.0}}')
    assert known_seconds(seeded_config(tmp_path, {})) == {"t/a.py": 2.0}
    ran = {"metis/seconds-per-file/not_slow": {"t/c.py": 3.0}}
    assert known_seconds(seeded_config(tmp_path, ran)) == {"t/c.py": 3.0}
    (tmp_path / SEED).write_text("{not json")
    assert known_seconds(seeded_config(tmp_path, {})) == {}


def test_the_seed_is_written_from_the_caches_tables(tmp_path: Path) -> None:
    tables = tmp_path / ".pytest_cache" / "v" / "metis" / "seconds-per-file"
    tables.mkdir(parents=True)
    (tables / "not_slow").write_text('{"t/a.py": 2.5}')
    (tables / "slow_or_hypothesis").write_text('{"t/b.py": 9.0}')
    (tmp_path / "tests").mkdir()
    (tmp_path / SEED).write_text('{"not_slow": {"t/old.py": 1.0}, "slow": {"t/s.py": 4.0}}')
    write_seed(tmp_path)
    config = seeded_config(tmp_path, {})
    assert known_seconds(config) == {"t/a.py": 2.5}
    seed = json.loads((tmp_path / SEED).read_text())
    assert seed["slow"] == {"t/s.py": 4.0}  # a table the cache does not have is kept
    assert seed["slow_or_hypothesis"] == {"t/b.py": 9.0}


def test_the_projects_seed_names_test_files_of_the_default_run() -> None:
    root = Path(__file__).resolve().parents[2]
    config = seeded_config(root, {})
    seeded = known_seconds(config)
    present = [file for file in seeded if (root / file).is_file()]
    assert len(present) >= 0.8 * len(seeded) > 0  # a few may have been renamed since


_SDK = r"(anthropic|openai|google\.genai)"
USES_AN_SDK = re.compile(
    rf'ImportOnUse\("{_SDK}"\)|importorskip\("{_SDK}"\)|^ *(import|from) {_SDK}\b'
    r"|^from \.conftest import .*\b(anthropic|openai)\b"
    r"|def test_\w+\([^)]*\b(claude|oai)\b[:,)]",
    re.MULTILINE,
)


def test_every_file_that_uses_an_official_sdk_is_in_their_group() -> None:
    """Each worker that imports an official SDK pays for it (anthropic's 1 s of CPU): the
    files that use one run on one worker (tests/xdist_partition.py ``SHARED``)."""
    root = Path(__file__).resolve().parents[2]
    users = {
        path.relative_to(root).as_posix()
        for path in (root / "tests").rglob("test_*.py")
        if USES_AN_SDK.search(path.read_text(encoding="utf-8"))
    }
    assert "tests/gateway/test_gateway_sdks.py" in users  # the pattern finds them
    slow = {file for file in users if "pytestmark = pytest.mark.slow" in (root / file).read_text()}
    assert sorted(users - slow - set(SHARED)) == []


class Node:
    """What the scheduler uses of xdist's WorkerController."""

    def __init__(self, name: str, share: int = NO_SHARE) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.workerinput: dict[str, Any] = {"workercount": 3, SHARE: share}
        self.shutting_down = False
        self.queue: list[int] = []

    def send_runtest_some(self, indices: list[int]) -> None:
        self.queue += indices

    def shutdown(self) -> None:
        self.shutting_down = True


class Hook:
    def __init__(self) -> None:
        self.reports: list[pytest.CollectReport] = []

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.reports.append(report)


def scheduler(groups: dict[str, str] | None = None) -> tuple[Partitioned, Shares]:
    config: Any = SimpleNamespace(getvalue=lambda name: ["3*popen"], hook=Hook(), cache=None)
    config.getoption = lambda name, default=None: None
    shares = Shares(config, groups or {})
    shares.session = SimpleNamespace(testscollected=0)  # type: ignore[assignment]
    return Partitioned(config, None, shares, groups or {}), shares


def collect(sched: Partitioned, node: Node, nodeids: list[str]) -> None:
    sched.add_node(node)
    sched.add_node_collection(node, nodeids)


def run(sched: Partitioned, nodes: list[Node]) -> dict[str, list[str]]:
    """Each node runs what it was sent, a test at a time, until none has any left; the count
    of each node's pending tests the scheduler keeps is xdist's count over its whole work."""
    ran: dict[str, list[str]] = {}
    while any(node.queue for node in nodes):
        for node in nodes:
            if node.queue:
                index = node.queue.pop(0)
                ran.setdefault(sched.registered_collections[node][index], []).append(
                    str(node.gateway.id)
                )
                sched.mark_test_complete(node, index)
                for each in nodes:
                    work = sched.assigned_work.get(each, {})
                    assert sched.pending.get(each, 0) == sched._pending_of(work)
    return ran


OWN = {
    "gw0": ["a.py::t1", "a.py::t2", "pool.py::t1"],
    "gw1": ["b.py::t1", "pool.py::t1", "sdk1.py::t1", "sdk2.py::t1"],
    "gw2": ["c.py::t1", "c.py::t2", "c.py::t3", "pool.py::t1"],
}


def test_the_run_is_the_union_and_each_file_runs_once_on_a_worker_that_collected_it() -> None:
    sched, shares = scheduler({"sdk1.py": "sdk", "sdk2.py": "sdk"})
    nodes = [Node(name, share) for share, name in enumerate(OWN)]
    for node in nodes:
        collect(sched, node, OWN[str(node.gateway.id)])
    assert sched.collection_is_completed
    assert shares.collected == 9 and shares.session.testscollected == 9  # type: ignore[union-attr]
    sched.schedule()
    ran = run(sched, nodes)
    union = {nodeid for collection in OWN.values() for nodeid in collection}
    assert set(ran) == union
    assert all(len(workers) == 1 for workers in ran.values())  # once each
    for nodeid, (worker,) in ran.items():
        assert nodeid in OWN[worker]
    assert ran["sdk1.py::t1"] == ran["sdk2.py::t1"]
    assert sched.tests_finished
    assert all(node.shutting_down for node in nodes)


def test_the_longest_unit_a_worker_collected_goes_first() -> None:
    sched, _ = scheduler()
    sched.per_test = {"short.py": 0.01, "long.py": 1.0}
    node = Node("gw0", 0)
    collect(sched, node, ["short.py::t1", "long.py::t1", "long.py::t2"])
    for name in ("gw1", "gw2"):
        collect(sched, Node(name), [])
    sched.schedule()
    assert [sched.registered_collections[node][i] for i in node.queue[:2]] == [
        "long.py::t1",
        "long.py::t2",
    ]


def test_a_first_run_orders_by_the_seed_and_a_file_no_table_knows_goes_first() -> None:
    """A fresh clone has no seconds per test: it ordered every file by its number of tests,
    so a new file of a few long tests (a socket test waiting out deadlines) ran last, alone,
    while the other workers idled."""
    sched, _ = scheduler()
    sched.per_test = {"timed.py": 0.5}
    sched.per_file = {"long.py": 9.0, "short.py": 0.1}
    many = [f"many.py::t{n}" for n in range(40)]
    node = Node("gw0", 0)
    collection = [*many, "short.py::t1", "long.py::t1", "new.py::t1", "timed.py::t1"]
    collect(sched, node, collection)
    for name in ("gw1", "gw2"):
        collect(sched, Node(name), [])
    assert sched.expected(["long.py::t1"]) == 9.0
    assert sched.expected(["timed.py::t1", "timed.py::t2"]) == 1.0
    sched.schedule()
    units = sorted(sched.units, key=lambda unit: -sched.expected(sched.units[unit]))
    assert units == ["many.py", "new.py", "long.py", "timed.py", "short.py"]


def test_a_file_collected_differently_by_two_workers_is_a_collection_error() -> None:
    sched, _ = scheduler()
    nodes = [Node(name) for name in ("gw0", "gw1", "gw2")]
    collect(sched, nodes[0], ["pool.py::t1", "pool.py::t2"])
    collect(sched, nodes[1], ["pool.py::t1"])
    collect(sched, nodes[2], [])
    sched.schedule()
    (report,) = sched.config.hook.reports
    assert report.failed and "Different tests were collected" in str(report.longrepr)
    assert not any(node.queue for node in nodes)  # the run is aborted, as xdist does


def test_a_crashed_workers_share_goes_to_its_replacement_which_runs_what_was_left() -> None:
    sched, shares = scheduler()
    nodes = []
    for name in OWN:
        node = Node(name)
        shares.pytest_configure_node(node)  # no partition planned here: set by hand below
        nodes.append(node)
    shares.partition, shares.handed = {"a.py": 0, "b.py": 1, "c.py": 2}, 3
    for share, node in enumerate(nodes):
        node.workerinput[SHARE] = share
        collect(sched, node, OWN[str(node.gateway.id)])
    sched.schedule()
    crashed = nodes[2]  # it dies in its first test; it sent no workerfinished
    crashitem = sched.remove_node(crashed)
    assert crashitem == sched.registered_collections[crashed][crashed.queue[0]]
    assert shares.released == [2]

    clone = Node("gw3")
    clone.workerinput = {"workercount": 3}
    shares.pytest_configure_node(clone)
    assert clone.workerinput[SHARE] == 2 and clone.workerinput[PARTITION] == shares.partition
    collect(sched, clone, OWN["gw2"])
    sched.schedule()
    ran = run(sched, [nodes[0], nodes[1], clone])
    assert crashitem == "c.py::t1" and crashitem not in ran  # xdist reports it failed
    assert {nodeid for nodeid, workers in ran.items() if workers == ["gw3"]} >= {
        "c.py::t2",
        "c.py::t3",
    }
    every = {nodeid for collection in OWN.values() for nodeid in collection}
    assert set(ran) == every - {crashitem}
    assert all(len(workers) == 1 for workers in ran.values())
    assert sched.tests_finished


def test_a_worker_that_finishes_keeps_its_share_and_a_late_one_gets_none() -> None:
    sched, shares = scheduler()
    shares.partition, shares.handed = {"a.py": 0}, 3
    done = Node("gw0", 0)
    done.workeroutput = {}  # type: ignore[attr-defined]
    collect(sched, done, [])
    sched.remove_node(done)
    assert shares.released == []
    late = Node("gw4")
    late.workerinput = {"workercount": 3}
    shares.pytest_configure_node(late)
    assert late.workerinput[SHARE] == NO_SHARE


def test_a_dead_workers_finished_files_and_the_test_it_died_in_are_not_sent_again() -> None:
    config: Any = SimpleNamespace(getvalue=lambda name: ["2*popen"], cache=None)
    sched = LongestFirst(config)
    dead, other = Node("gw0"), Node("gw1")
    collection = ["a.py::t1", "b.py::t1", "b.py::t2", "b.py::t3"]
    for node in (dead, other):
        sched.add_node(node)
        sched.add_node_collection(node, collection)
    sched.assigned_work[dead] = {
        "a.py": {"a.py::t1": True},
        "b.py": {"b.py::t1": True, "b.py::t2": False, "b.py::t3": False},
    }
    assert sched.remove_node(dead) == "b.py::t2"
    assert other.queue == [3]  # b.py::t3 alone; xdist sent a.py again, as an empty batch
    assert not sched.workqueue
