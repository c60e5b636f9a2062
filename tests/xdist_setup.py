"""The default run's xdist plumbing, wired in one place: tests/conftest.py calls these, and so
does the small test tree tests/project/test_xdist_partition.py runs pytest over."""

from __future__ import annotations

from typing import Any

import pytest

SHARES = "metis-shares"  # `-p no:metis-shares`: every worker collects every file, as before


def configure(config: pytest.Config, groups: dict[str, str]) -> None:
    """In xdist's controller: the per-file seconds kept in the cache, the partition of the
    files (tests/xdist_partition.py), one message per test (tests/xdist_batch.py); in a
    worker, its side of both."""
    if config.pluginmanager.hasplugin("xdist") and not hasattr(config, "workerinput"):
        from .xdist_batch import unpack_batches_in_controller
        from .xdist_partition import Shares, show_whole_collection
        from .xdist_schedule import FileSeconds

        config.pluginmanager.register(FileSeconds(), "metis-file-seconds")
        shares = Shares(config, groups)
        if config.pluginmanager.register(shares, SHARES) is not None:
            show_whole_collection(shares)
        unpack_batches_in_controller()
    if hasattr(config, "workerinput"):
        from .xdist_batch import batch_worker_events
        from .xdist_partition import in_worker

        batch_worker_events(config)
        in_worker(config)


def make_scheduler(config: pytest.Config, log: Any, groups: dict[str, str]) -> Any:
    """``--dist loadfile`` with the longest files first (tests/xdist_schedule.py), each worker
    having collected only the files it runs when they could be shared out among the workers;
    None (xdist's own) for another ``--dist``."""
    if config.getvalue("dist") != "loadfile":
        return None
    from .xdist_schedule import LongestFirst, Partitioned

    shares = config.pluginmanager.get_plugin(SHARES)
    if shares is not None and shares.active:
        return Partitioned(config, log, shares, groups)
    return LongestFirst(config, log, groups)
