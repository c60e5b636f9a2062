"""The benchmark (benchmarks/) at a tiny size, so that it cannot rot unnoticed.

It runs every section against the loopback server, for the floor and metis (and, where they
are installed, the anchors' streaming columns), and checks that the report is well formed:
every column ran, every stream was read whole, the tables have their rows. No timing is
asserted: these sizes measure nothing.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import pytest

from benchmarks import run

pytestmark = pytest.mark.slow  # real benchmark runs: half a minute

PROVIDERS = ("anthropic", "openai")  # the non-streamed, concurrency and scaling sections
FORMATS = ("anthropic", "openai", "responses", "gemini", "ollama")  # the streaming section
COLUMNS = ("floor", "floor-fast", "metis")


def _table_ok(table: str) -> None:
    lines = [line for line in table.splitlines() if line.startswith("|")]
    assert len(lines) >= 3, table  # header, rule, at least one row
    widths = {line.count("|") for line in lines}
    assert len(widths) == 1, table


def _positive(value: Any) -> bool:
    return isinstance(value, float) and math.isfinite(value) and value > 0


def test_tiny_run_writes_a_well_formed_report(tmp_path: Path) -> None:
    out, md = tmp_path / "bench.json", tmp_path / "bench.md"
    run.main(["--tiny", "--json", str(out), "--markdown", str(md)])

    report = json.loads(out.read_text())  # strict JSON: no NaN
    assert report["machine"]["python"]
    assert report["machine"]["cores"]
    sections = report["sections"]
    assert set(sections) == set(run.SECTIONS)
    for section in sections.values():
        for table in section["table"].split("\n\n"):
            _table_ok(table)

    expected_rows = {
        "stream": {(reads, p, c) for reads in (0, 16384) for p in FORMATS for c in COLUMNS},
        "complete": {(0, p, c) for p in PROVIDERS for c in COLUMNS},
    }
    for name, expected in expected_rows.items():
        rows = sections[name]["rows"]
        assert {(r["read_size"], r["provider"], r["client"]) for r in rows} == expected
        for r in rows:
            assert r["errors"] == [], r
            assert r["runs"] == 2
            assert _positive(r["median_cpu_s"])
            assert _positive(r["ratio_to_floor"])
            assert _positive(r["ratio_to_floor_fast"])
            if r["client"] == "floor":
                assert r["ratio_to_floor"] == 1.0
    assert set(sections["stream"]["target"]["met"]) == {
        f"{p}/{reads}" for p in FORMATS for reads in ("1 event", "16 KiB")
    }

    imports = {r["what"]: r for r in sections["import"]["rows"]}
    for what in ("python (nothing)", "metis's dependencies", "metis + anthropic adapter"):
        assert imports[what]["error"] is None
        assert imports[what]["runs"] == 1
        assert imports[what]["peak_rss_mib"] > 0

    concurrency = sections["concurrency"]["rows"]
    assert {(r["backend"], r["client"]) for r in concurrency} == {
        (b, c) for b in ("asyncio", "trio") for c in ("floor", "metis")
    }
    for r in concurrency:
        assert r["errors"] == 0, r
        assert r["n"] == r["in_flight"] == 5

    curves = sections["scaling"]["curves"]
    assert len(curves) == 2 * len(PROVIDERS) * 2  # two kinds, two clients
    for curve in curves:
        assert curve["error"] is None
        assert [p["size"] for p in curve["points"]] == (
            [10, 40] if curve["kind"] == "stream length" else [1, 8]
        )
        assert all(p["error"] is None and _positive(p["median_cpu_s"]) for p in curve["points"])

    text = md.read_text()
    assert "Machine:" in text
    assert text.count("### ") == len(run.SECTIONS)


ANCHORS = [c for c, module in run.ANCHORS.items() if importlib.util.find_spec(module)]


@pytest.mark.skipif(not ANCHORS, reason="no anchor installed (pip install -e '.[bench]')")
def test_tiny_run_of_the_installed_anchors(tmp_path: Path) -> None:
    out = tmp_path / "bench.json"
    run.main(["--tiny", "--sections", "stream", "--clients", ",".join(ANCHORS), "--json", str(out)])
    rows = json.loads(out.read_text())["sections"]["stream"]["rows"]
    ran = {r["client"] for r in rows}
    assert ran == {"floor", "floor-fast", *ANCHORS}
    for r in rows:
        assert r["errors"] == [], r
        assert _positive(r["median_cpu_s"])


def test_the_websocket_loop_runs_over_http_and_websocket(tmp_path: Path) -> None:
    import anyio

    from benchmarks import websocket_loop
    from metis.testing.emulator import Emulator

    with Emulator(model=websocket_loop.loop_model, models="any") as server:
        for stack, store in websocket_loop.COLUMNS.values():
            path = websocket_loop.stack_file(tmp_path, stack, store)
            sent, steps, cpu, wall = anyio.run(websocket_loop.one_run, server.url, path, 20)
            assert steps == 21 and sent > 0 and cpu > 0 and wall > 0
        websockets = {r.websocket for r in server.requests if r.method == "POST"}
        assert 0 in websockets and len(websockets) == 3  # HTTP, and one connection per ws run


def test_the_gateway_section_runs_metis_and_litellm_where_installed(tmp_path: Path) -> None:
    from benchmarks import gateway

    litellm = gateway.parse_args([]).litellm  # the executable, when LiteLLM is installed
    targets = ["metis", "litellm"] if litellm else ["metis"]
    out, md = tmp_path / "gateway.json", tmp_path / "gateway.md"
    argv = ["--concurrency", "1,3", "--requests", "4", "--targets", ",".join(targets)]
    argv += ["--routes", "translated,same-chat", "--json", str(out), "--markdown", str(md)]
    cells = gateway.main(argv)

    ran = {(c.route, c.concurrency, c.target) for c in cells}
    assert ran == {
        (route, n, target)
        for route in ("translated", "same-chat")
        for n in (1, 3)
        for target in ("upstream", *targets)
    }
    for cell in cells:
        assert cell.errors == 0, cell.result["errors"]
        assert cell.done == 4 and cell.result["server_cpu"] >= 0
    tables = [part for part in md.read_text().split("\n\n") if part.startswith("|")]
    assert len(tables) == 3  # one per route, then metis beside LiteLLM
    for table in tables:
        _table_ok(table)
    again = gateway.main(["--report-from", str(out)])
    assert [c.summary() for c in again] == [c.summary() for c in cells]


def test_the_in_process_benchmark_runs_and_reports_a_ratio(tmp_path: Path) -> None:
    from benchmarks import inprocess

    out = tmp_path / "rows.json"
    argv = ["--sections", "stream,complete", "--providers", "anthropic", "--reads", "16384"]
    rows = inprocess.main([*argv, "--runs", "1", "--warmup", "0", "--json", str(out)])
    assert [(r["kind"], r["provider"]) for r in rows] == [
        ("stream", "anthropic"),
        ("complete", "anthropic"),
    ]
    assert all(_positive(r["ratio"]) for r in rows)
    assert json.loads(out.read_text()) == rows


def test_the_import_section_interleaves_a_baseline_tree(tmp_path: Path) -> None:
    import shutil

    from benchmarks import inprocess

    baseline = tmp_path / "old"
    shutil.copytree(
        Path(inprocess.ROOT) / "metis",
        baseline / "metis",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    rows = inprocess.main(
        ["--sections", "import", "--import-runs", "1", "--import-baseline", str(baseline)]
    )
    labels = [r["what"] for r in rows]
    assert "metis + anthropic" in labels and "baseline: metis + anthropic" in labels
    assert "baseline: deps + one model" not in labels
    assert all(_positive(r["ratio"]) and _positive(r["ratio_min"]) for r in rows)


def test_the_above_http_comparison_reads_every_format(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/above_http.py: the floor and metis over the same in-memory bytes, every
    format, each metis stream checked for the whole tool input."""
    from benchmarks import above_http

    above_http.main(["--rounds", "1", "--reads", "16384"])
    rows = capsys.readouterr().out.splitlines()
    assert [row.split()[0] for row in rows] == list(FORMATS)
    assert all(" x" in row for row in rows)


def test_the_gateway_report_takes_a_cpu_figure_under_the_clock_tick() -> None:
    """A tiny run can measure 0 ms of CPU a request (the clock counts in ticks): the report
    shows a dash where it would divide by it (a ZeroDivisionError once failed a smoke run)."""
    from benchmarks.gateway_report import Cell, markdown

    def cell(target: str, cpu: float) -> Cell:
        result: dict[str, Any] = {
            "latencies": [0.002, 0.003],
            "firsts": [0.001, 0.001],
            "server_cpu": cpu,
            "wall": 0.01,
            "errors": [],
            "load_average": 1.0,
            "upstream_ms": {"0.5": 0.5, "0.99": 0.6},
            "upstream_first_ms": {"0.5": 0.5, "0.99": 0.6},
        }
        return Cell("same-chat", "Chat in, Chat upstream", "same API", target, 3, result)

    text = markdown([cell("metis", 0.0), cell("litellm", 0.0)], workers=1)
    assert "| 3 | metis | 2 |" in text and "—" in text
