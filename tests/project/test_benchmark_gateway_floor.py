"""The open-loop gateway benchmark beside the floor (benchmarks/gateway_floor.py: a bare
uvicorn + httpx proxy), at a tiny size, so that the comparison cannot rot unnoticed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # three servers and a load generator: seconds


def test_the_floor_relays_the_same_route_and_sits_out_the_translated_one(tmp_path: Path) -> None:
    from benchmarks import gateway_open

    out = tmp_path / "open.json"
    argv = ["--rate", "10", "--requests", "10", "--connections", "10", "--pace", "5"]
    argv += ["--targets", "floor,metis", "--routes", "same-chat,translated", "--json", str(out)]
    gateway_open.main(argv)
    cells = json.loads(out.read_text())
    assert set(cells) == {
        "same-chat upstream",
        "same-chat floor",
        "same-chat metis",
        "translated upstream",
        "translated metis",
    }
    for name, cell in cells.items():
        assert cell["errors"] == [], name
        assert len(cell["latencies"]) == 10, name
        if not name.endswith("upstream"):
            assert cell["server_cpu"] > 0, name  # the gateway's own process was measured


def test_the_probe_measures_each_gateway_s_cpu_per_request(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from benchmarks import gateway_probe

    gateway_probe.main(["--pace", "0,5", "--targets", "floor,metis", "--requests", "3"])
    lines = capsys.readouterr().out.splitlines()
    rows = [line for line in lines if line.startswith("| ") and not line.startswith("| target")]
    assert [row.split(" | ")[:2] for row in rows] == [
        ["| floor", "0"],
        ["| metis", "0"],
        ["| floor", "5"],
        ["| metis", "5"],
    ]
    for row in rows:
        cpu, chunks = (float(cell) for cell in row.split(" | ")[2:4])
        assert cpu >= 0 and chunks >= 1
