"""Whole pytest runs over a small test tree with the default run's xdist plumbing
(tests/xdist_setup.py): each worker collects only its share of the files once the cache knows
them, and every selection runs the same tests, with the same outcomes, as without workers and
as with every worker collecting everything (``-p no:metis-shares``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # each case is several whole pytest runs, each of four processes

REPO = Path(__file__).parents[2]
TREE_CONFTEST = """
import json, os
from pathlib import Path

import pytest

from tests.xdist_setup import configure, make_scheduler

GROUPS = {"t/test_g1.py": "g", "t/test_g2.py": "g"}


def pytest_configure(config):
    configure(config, GROUPS)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    return make_scheduler(config, log, GROUPS)


def pytest_collection_finish(session):
    worker = getattr(session.config, "workerinput", None)
    if worker is not None:
        files = sorted({item.nodeid.split("::")[0] for item in session.items})
        out = Path(os.environ["TREE_OUT"], "collected-" + worker["workerid"] + ".json")
        out.write_text(json.dumps({"files": files, "share": worker.get("metis_share")}))


def pytest_runtest_logreport(report):
    in_worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not in_worker and (report.when == "call" or report.outcome != "passed"):
        with open(Path(os.environ["TREE_OUT"], "outcomes.txt"), "a") as out:
            out.write(report.nodeid + " " + report.outcome + "\\n")
"""
PARAMETRIZED = """
import pytest


@pytest.mark.parametrize("n", range(3))
def test_p(n):
    pass
"""
CRASHING = """
import os
from pathlib import Path


def test_dies_once():
    marker = Path(os.environ["TREE_OUT"], "died")
    if os.environ.get("PYTEST_XDIST_WORKER") and not marker.exists():
        marker.write_text("")
        os._exit(1)
"""


def make_tree(root: Path) -> None:
    (root / "pytest.ini").write_text("[pytest]\n")
    (root / "conftest.py").write_text(TREE_CONFTEST)
    folder = root / "t"
    (folder / "sub").mkdir(parents=True)
    for i, name in enumerate("abcdefgh"):
        tests = "".join(f"def test_{n}():\n    pass\n\n" for n in range(i + 1))
        (folder / f"test_{name}.py").write_text(tests)
    for name in ("test_g1", "test_g2", "sub/test_x", "sub/test_y", "sub/test_z"):
        (folder / f"{name}.py").write_text(PARAMETRIZED)
    (folder / "test_fails.py").write_text(
        "import os\n\ndef test_ok():\n    pass\n\n"
        "def test_maybe():\n    assert not os.environ.get('TREE_FAIL')\n"
    )


class Tree:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.out = root / "out"
        make_tree(root)

    def run(self, *args: str, workers: int = 3, fail: bool = False) -> Counter[str]:
        """The outcomes of a run (``nodeid outcome``, counted)."""
        self.out.mkdir(exist_ok=True)
        for old in self.out.glob("*"):
            old.unlink()
        # not a worker of the run this test is in: xdist's PYTEST_XDIST_* variables left out
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTEST_", "TREE_"))}
        env |= {"TREE_OUT": str(self.out), "PYTHONPATH": str(REPO)}
        if fail:
            env["TREE_FAIL"] = "1"
        plugins = ["-p", "no:langsmith_plugin", "-p", "no:respx", "-p", "no:anyio"]
        command = [sys.executable, "-m", "pytest", "-q", "-n", str(workers), *plugins, *args]
        if workers:
            command += ["--dist", "loadfile"]
        done = subprocess.run(
            command, cwd=self.root, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode in (0, 1), done.stdout + done.stderr
        outcomes = self.out / "outcomes.txt"
        lines = outcomes.read_text().splitlines() if outcomes.exists() else []
        return Counter(lines)

    def collected(self) -> dict[str, list[str]]:
        """The files each worker collected, by worker id."""
        return {
            path.stem.removeprefix("collected-"): json.loads(path.read_text())["files"]
            for path in self.out.glob("collected-*.json")
        }


def every_file_once(collected: dict[str, list[str]]) -> bool:
    files = [file for files in collected.values() for file in files]
    return len(files) == len(set(files))


@pytest.fixture
def tree(tmp_path: Path) -> Tree:
    return Tree(tmp_path)


def test_once_the_cache_knows_the_files_each_worker_collects_only_its_share(tree: Tree) -> None:
    first = tree.run()  # no cache: every worker collects everything
    assert all(len(files) == 14 for files in tree.collected().values())
    alone = tree.run(workers=0)
    shared_out = tree.run()
    collected = tree.collected()
    assert every_file_once(collected) and sum(map(len, collected.values())) == 14
    assert all(files for files in collected.values())
    (group,) = [files for files in collected.values() if "t/test_g1.py" in files]
    assert "t/test_g2.py" in group
    assert alone == first == shared_out
    assert sum(alone.values()) == 8 * 9 // 2 + 5 * 3 + 2
    assert tree.run("-p", "no:metis-shares") == alone
    assert all(len(files) == 14 for files in tree.collected().values())


def test_a_checkout_that_never_ran_partitions_by_the_seed(tree: Tree) -> None:
    alone = tree.run(workers=0)
    for old in (tree.root / ".pytest_cache").rglob("seconds-per-file/*"):
        old.unlink()  # the cache as in a fresh clone: no table of per-file seconds
    seeded = {f"t/test_{name}.py": float(i + 1) for i, name in enumerate("abcdefgh")}
    seeded["t/test_gone.py"] = 5.0  # renamed since the seed was written
    (tree.root / "tests").mkdir()
    (tree.root / "tests" / "xdist_seconds.json").write_text(json.dumps({"all": seeded}))
    assert tree.run() == alone
    collected = tree.collected()
    assert all(files for files in collected.values())
    grouped = {"t/test_g1.py", "t/test_g2.py"}  # partitioned with the seeded files
    unseeded = {"t/test_fails.py", "t/sub/test_x.py", "t/sub/test_y.py", "t/sub/test_z.py"}
    assert all(unseeded <= set(files) for files in collected.values())  # every worker's
    assert sum(map(len, collected.values())) == 8 + len(grouped) + 3 * len(unseeded)


def test_selections_run_the_same_tests_as_without_workers(tree: Tree) -> None:
    tree.run()  # fills the cache
    for args in (["-k", "test_1 or test_p"], ["t/sub"], ["t/sub", "t/test_c.py"], ["t"]):
        shared_out = tree.run(*args)
        assert shared_out == tree.run(*args, workers=0), args
        assert shared_out == tree.run(*args, "-p", "no:metis-shares"), args
    tree.run("t/sub", "t/test_c.py")
    collected = tree.collected()
    assert sum("t/test_c.py" in files for files in collected.values()) == 3  # named: everyone's
    assert sum("t/sub/test_x.py" in files for files in collected.values()) == 1
    tree.run("t/test_c.py::test_1")
    assert all(files == ["t/test_c.py"] for files in tree.collected().values())


def test_last_failed_runs_the_same_tests_with_every_worker_collecting(tree: Tree) -> None:
    tree.run()
    failing = tree.run(fail=True)
    assert failing["t/test_fails.py::test_maybe failed"] == 1
    rerun = tree.run("--lf")
    assert rerun == Counter(["t/test_fails.py::test_maybe passed"])
    tree.run(fail=True)
    assert tree.run("--lf", workers=0) == rerun
    tree.run(fail=True)
    tree.run("--lf")
    assert all(files == ["t/test_fails.py"] for files in tree.collected().values())


def test_a_crashed_workers_tests_are_reported_as_without_the_partition(tree: Tree) -> None:
    """A worker dies in a test (once a run): that test is reported failed, and the worker
    xdist starts in its place collects the same share and runs the rest of its files."""
    (tree.root / "t" / "test_crash.py").write_text(CRASHING)
    before = tree.run("-p", "no:metis-shares")  # the cache learns the files
    assert (tree.out / "died").exists()
    assert before["t/test_crash.py::test_dies_once failed"] == 1
    assert sum(before.values()) == 8 * 9 // 2 + 5 * 3 + 2 + 1
    shared_out = tree.run()
    assert (tree.out / "died").exists()
    collected = tree.collected()
    replacement = collected.pop("gw3")
    assert every_file_once(collected)
    assert replacement in collected.values()
    assert shared_out == before
