"""Each xdist worker collects only the test files it will run (``--dist loadfile``, the default).

Collecting is a worker's largest fixed cost (importing the test modules, building their
items): when every worker collected every file, three workers on two cores paid it three
times before any test ran. Instead, the controller splits the files it knows from the last
runs (pytest's cache: the seconds each file took to collect and run) into one share per
worker, balanced by those seconds, a group of ``SHARED`` files in one share; it hands each
worker its share (``workerinput``), and the worker leaves the files of other shares out of its
collection. A file the cache does not know, and a file named on the command line (pytest
collects those whatever a plugin says), is collected by every worker and runs on whichever
is free. The union of the workers' collections is the run (``Partitioned`` in
tests/xdist_schedule.py). A worker that dies hands its share to the worker replacing it.

A checkout that never ran (CI's fresh clone) has no cache: its controller reads the same
tables from the seed the project keeps (``SEED``, written from a cache by running this
module); a file the seed does not know is one every worker collects, and a file it names that
is gone is no one's. No partition, every worker collecting everything as before: without the
cache provider or with fewer known files than workers, for ``--lf`` and ``--sw`` (their choice
of tests depends on the whole collection a worker sees), and for a scheduling other than
``loadfile``.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

SHARE = "metis_share"  # workerinput: this worker's share, an index
PARTITION = "metis_partition"  # workerinput: {file: share} of every partitioned file
COLLECT_SECONDS = "metis_collect_seconds"  # workeroutput: {file: seconds to collect it}
FILE_SECONDS_KEY = "metis/seconds-per-file"  # then the -m expression, one table each
SEED = "tests/xdist_seconds.json"  # the tables of a recent run: python -m tests.xdist_partition
NO_SHARE = -1  # a worker with no share of its own (only files every worker collects)
SHARED = {  # every test file that imports an official SDK (anthropic's takes 1 s of CPU, and
    # each worker that imports it pays it: tests/project/test_xdist_partition.py checks the list)
    file: "official SDKs"
    for file in (
        "tests/gateway/test_gateway_annotations_dropped.py",
        "tests/gateway/test_gateway_azure.py",
        "tests/gateway/test_gateway_base_url_said.py",
        "tests/gateway/test_gateway_call_signatures.py",
        "tests/gateway/test_gateway_compact.py",
        "tests/gateway/test_gateway_compaction.py",
        "tests/gateway/test_gateway_counting.py",
        "tests/gateway/test_gateway_effort_on_chat.py",
        "tests/gateway/test_gateway_embeddings.py",
        "tests/gateway/test_gateway_failure_metrics.py",
        "tests/gateway/test_gateway_faults_answers.py",
        "tests/gateway/test_gateway_faults_stages.py",
        "tests/gateway/test_gateway_gemini_signatures.py",
        "tests/gateway/test_gateway_held_elsewhere.py",
        "tests/gateway/test_gateway_input_tokens.py",
        "tests/gateway/test_gateway_item_ids.py",
        "tests/gateway/test_gateway_key_limits_sdks.py",
        "tests/gateway/test_gateway_legacy_functions.py",
        "tests/gateway/test_gateway_metrics_endpoints.py",
        "tests/gateway/test_gateway_openai_refusal.py",
        "tests/gateway/test_gateway_openai_tools.py",
        "tests/gateway/test_gateway_passthrough.py",
        "tests/gateway/test_gateway_passthrough_responses.py",
        "tests/gateway/test_gateway_passthrough_routes.py",
        "tests/gateway/test_gateway_provider_key.py",
        "tests/gateway/test_gateway_provider_param.py",
        "tests/gateway/test_gateway_pydantic_ai.py",
        "tests/gateway/test_gateway_reasoning_carried.py",
        "tests/gateway/test_gateway_reasoning_followed.py",
        "tests/gateway/test_gateway_refusal_explained.py",
        "tests/gateway/test_gateway_responses_failed.py",
        "tests/gateway/test_gateway_responses_kept.py",
        "tests/gateway/test_gateway_responses_owners.py",
        "tests/gateway/test_gateway_sampling.py",
        "tests/gateway/test_gateway_sdk_helpers.py",
        "tests/gateway/test_gateway_sdk_resilience.py",
        "tests/gateway/test_gateway_sdks.py",
        "tests/gateway/test_gateway_server_history_responses.py",
        "tests/gateway/test_gateway_server_tool_budget.py",
        "tests/gateway/test_gateway_service_tier.py",
        "tests/gateway/test_gateway_stop_sequence.py",
        "tests/gateway/test_gateway_unread.py",
        "tests/testing/test_emulator_clients.py",
        "tests/testing/test_emulator_cloud_clients.py",
    )
}


def split(seconds: dict[str, float], groups: dict[str, str], workers: int) -> dict[str, int]:
    """``{file: share}``: the known files (and every grouped one) in ``workers`` shares, the
    longest work first to the share with the least so far; the files of a group go together.
    Empty when there are fewer units of work than workers."""
    units: dict[str, list[str]] = {}
    for file in sorted(set(seconds) | set(groups)):
        units.setdefault(groups.get(file, file), []).append(file)
    if workers < 2 or len(units) < workers:
        return {}
    weight = {unit: sum(seconds.get(file, 0.0) for file in files) for unit, files in units.items()}
    loads = [0.0] * workers
    shares: dict[str, int] = {}
    for unit in sorted(units, key=lambda unit: (-weight[unit], unit)):
        share = loads.index(min(loads))
        loads[share] += weight[unit]
        shares.update(dict.fromkeys(units[unit], share))
    return shares


def table_key(config: pytest.Config) -> str:
    """The cache key of the per-file seconds of runs with this ``-m`` expression (a default
    run and a run of the slow tests time different tests of the same files)."""
    markers = re.sub(r"[^A-Za-z0-9]+", "_", config.getoption("markexpr", "") or "").strip("_")
    return f"{FILE_SECONDS_KEY}/{markers or 'all'}"


def known_seconds(config: pytest.Config) -> dict[str, float]:
    """The per-file seconds of the last runs (pytest's cache), or, on a checkout that has
    never run (CI's fresh clone), the project's seed of them (``SEED``)."""
    cache = getattr(config, "cache", None)  # none with -p no:cacheprovider
    if cache is None:
        return {}
    known = cache.get(table_key(config), None)
    if known is None:
        known = seed_seconds(config.rootpath / SEED).get(table_key(config).rsplit("/", 1)[1], {})
    return known if isinstance(known, dict) else {}


def seed_seconds(path: Path) -> dict[str, Any]:
    """``{table: {file: seconds}}`` of ``path``, {} when it is absent or unreadable."""
    try:
        seed = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return seed if isinstance(seed, dict) else {}


def write_seed(root: Path) -> Path:
    """Writes ``SEED`` under ``root`` from the cache's tables of per-file seconds; a table the
    cache does not have (the slow tests', in a checkout that ran only the default run) keeps
    the seed's."""
    tables = root / ".pytest_cache" / "v" / FILE_SECONDS_KEY
    path = root / SEED
    seed = seed_seconds(path)
    seed.update({table.name: json.loads(table.read_text()) for table in tables.iterdir()})
    seed = dict(sorted(seed.items()))
    path.write_text(json.dumps(seed, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return path


def selected_directories(config: pytest.Config) -> list[str] | None:
    """The folders the arguments name, relative to the root (``""`` for the root itself);
    None when one is outside it. A file argument names no folder: every worker collects it."""
    folders = []
    for arg in config.args:
        path = (config.invocation_params.dir / arg.split("::", 1)[0]).resolve()
        if path.is_dir():
            try:
                folders.append(path.relative_to(config.rootpath).as_posix())
            except ValueError:
                return None
    return folders


def _within(file: str, folders: list[str]) -> bool:
    return any(not folder or folder == "." or file.startswith(folder + "/") for folder in folders)


def plan(config: pytest.Config, workers: int, groups: dict[str, str]) -> dict[str, int]:
    """The partition for this run, or ``{}`` for none (this module's docstring)."""
    if config.getvalue("dist") != "loadfile" or config.getoption("lf", False):
        return {}
    if config.getoption("stepwise", False) or config.getoption("stepwise_skip", False):
        return {}
    folders = selected_directories(config)
    if not folders:
        return {}
    seconds = {file: s for file, s in known_seconds(config).items() if _within(file, folders)}
    if not seconds:
        return {}
    return split(seconds, {f: g for f, g in groups.items() if _within(f, folders)}, workers)


class Shares:
    """In xdist's controller: gives each worker its share as it starts, and a crashed worker's
    share to the one replacing it (``release``, called by the scheduler)."""

    def __init__(self, config: pytest.Config, groups: dict[str, str]) -> None:
        self.config = config
        self.groups = groups
        self.partition: dict[str, int] | None = None  # decided when the first worker starts
        self.handed = 0
        self.released: list[int] = []
        self.collected: int | None = None  # the tests of the whole run, once all have collected
        self.session: pytest.Session | None = None

    @property
    def active(self) -> bool:
        return bool(self.partition)

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node: Any) -> None:
        if self.partition is None:
            self.partition = plan(self.config, int(node.workerinput["workercount"]), self.groups)
        if not self.partition:
            return
        if self.released:
            share = self.released.pop(0)
        elif self.handed < int(node.workerinput["workercount"]):
            share, self.handed = self.handed, self.handed + 1
        else:
            share = NO_SHARE
        node.workerinput[SHARE] = share
        node.workerinput[PARTITION] = self.partition

    def release(self, node: Any) -> None:
        """A worker that died: its share goes to the next worker to start."""
        share = getattr(node, "workerinput", {}).get(SHARE, NO_SHARE)
        if share != NO_SHARE:
            self.released.append(share)


class OwnShare:
    """In a worker: leaves out of its collection the files of the other workers' shares."""

    def __init__(self, config: pytest.Config) -> None:
        self.root = config.rootpath
        self.share: int = config.workerinput[SHARE]  # type: ignore[attr-defined]
        self.partition: dict[str, int] = config.workerinput[PARTITION]  # type: ignore[attr-defined]

    @pytest.hookimpl(tryfirst=True)
    def pytest_ignore_collect(self, collection_path: Path) -> bool | None:
        if collection_path.suffix != ".py":
            return None
        try:
            file = collection_path.relative_to(self.root).as_posix()
        except ValueError:
            return None
        share = self.partition.get(file, self.share)
        return True if share != self.share else None


class CollectSeconds:
    """In a worker: the seconds each test file took to collect (importing it, building its
    tests), sent to the controller when the worker finishes (``COLLECT_SECONDS``). The first
    file a worker collects is left out: it imports what every worker imports (metis, the
    conftest's fixtures), a cost that is not the file's."""

    def __init__(self, config: pytest.Config) -> None:
        self.seconds: dict[str, float] = config.workeroutput.setdefault(COLLECT_SECONDS, {})  # type: ignore[attr-defined]
        self.first: str | None = None

    @pytest.hookimpl(wrapper=True)
    def pytest_make_collect_report(self, collector: pytest.Collector) -> Iterator[None]:
        if not isinstance(collector, pytest.Module | pytest.Class):
            return (yield)
        file = collector.nodeid.split("::", 1)[0]
        self.first = self.first or file
        start = time.perf_counter()
        try:
            return (yield)
        finally:
            if file != self.first:
                self.seconds[file] = self.seconds.get(file, 0.0) + time.perf_counter() - start


def in_worker(config: pytest.Config) -> None:
    """A worker's plugins: its share, if the controller gave it one, and the timing."""
    workerinput: dict[str, Any] = config.workerinput  # type: ignore[attr-defined]
    if PARTITION in workerinput:
        config.pluginmanager.register(OwnShare(config), "metis-own-share")
    config.pluginmanager.register(CollectSeconds(config), "metis-collect-seconds")


def show_whole_collection(shares: Shares) -> None:
    """xdist's status line ("3 workers [N items]") counts the tests of the first worker, which
    were the run's when every worker collected everything: it counts the whole run's."""
    import xdist.dsession as dsession

    status_line = dsession.get_workers_status_line
    status_line = getattr(status_line, "__wrapped__", status_line)

    def whole(status_and_items: Any) -> str:
        if shares.collected is not None:
            status_and_items = [(status, shares.collected) for status, _ in status_and_items]
        return str(status_line(status_and_items))

    whole.__wrapped__ = status_line  # type: ignore[attr-defined]
    dsession.get_workers_status_line = whole


if __name__ == "__main__":
    print(write_seed(Path(__file__).resolve().parents[1]))
