"""benchmarks/http_clients.py at a tiny size, so that it cannot rot unnoticed: every
(backend, client) pair runs every workload, each call checked. No timing is asserted."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import http_clients

pytestmark = pytest.mark.slow  # real benchmark runs over loopback


def test_a_tiny_run_measures_every_pair_and_workload(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "runs.json"
    http_clients.main(["--quick", "--runs", "1", "--warmup", "0", "--json", str(out)])
    report = json.loads(out.read_text())
    assert set(report["versions"]) == set(http_clients.PACKAGES)
    pairs = {f"{b}/{p}" for b in http_clients.BACKENDS for p in http_clients.PACKAGES}
    assert set(report["runs"]) == pairs
    for runs in report["runs"].values():
        assert set(runs) == set(http_clients.WORKLOADS)
        assert all(len(r["cpu_ms"]) == 1 and r["cpu_ms"][0] > 0 for r in runs.values())
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert len(rows) == 1 + len(pairs) * len(http_clients.WORKLOADS)  # header and rows
