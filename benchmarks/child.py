"""One measurement in a fresh process: ``python -m benchmarks.child '<json job>'``.

Each column runs in its own interpreter so that one library's imports (LiteLLM's are large,
and a larger heap makes every garbage collection dearer) never tax another's numbers. The job
says what to run; the result is printed as one ``RESULT {json}`` line.

CPU is ``time.process_time()`` of this process around each call: the server is elsewhere.
"""

from __future__ import annotations

import gc
import json
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from functools import cache
from pathlib import Path
from typing import Any

from benchmarks import formats, workload
from benchmarks.clients import Client, Outcome, make_client
from benchmarks.workload import Scenario


def verify(client: str, outcome: Outcome, scenario: Scenario, provider: str, stream: bool) -> str:
    """Why ``outcome`` is not the full reply, or "" when it is."""
    if client.startswith("floor"):
        if not stream:
            return ""
        expected = _wire_events(scenario, provider)
        return "" if outcome.events == expected else f"{outcome.events} events, not {expected}"
    text, tool_input = _expected(scenario)
    if outcome.text_chars != text:
        return f"{outcome.text_chars} text chars, not {text}"
    if outcome.tool_input != tool_input:
        return "tool input differs"
    return ""


@cache
def _expected(scenario: Scenario) -> tuple[int, dict[str, Any]]:
    return len("".join(scenario.words())), scenario.tool_input()


@cache
def _wire_events(scenario: Scenario, provider: str) -> int:
    if provider == "anthropic":
        return len(workload.anthropic_stream_events(scenario))
    if provider == "responses":
        return len(formats.responses_stream_events(scenario))
    if provider == "gemini":
        return len(formats.gemini_stream_events(scenario))
    if provider == "ollama":
        return len(formats.ollama_stream_events(scenario))
    return len(workload.openai_stream_events(scenario, include_usage=True)) - 1  # [DONE]


def rss_kib() -> tuple[int, int]:
    """(current, peak) resident set size of this process, in KiB."""
    now = peak = 0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                now = int(line.split()[1])
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1])
    except OSError:
        import resource

        peak = now = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return now, peak


def reset_peak_rss() -> bool:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs``), so VmHWM measures from now."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


async def timed(
    call: Callable[[], Awaitable[Outcome]], warmup: int, runs: int, check: Callable[[Outcome], str]
) -> dict[str, Any]:
    for _ in range(warmup):
        problem = check(await call())
        if problem:
            return {"error": problem}
    cpu: list[float] = []
    wall: list[float] = []
    problem = ""
    for _ in range(runs):
        gc.collect()
        c0, w0 = time.process_time(), time.perf_counter()
        outcome = await call()
        cpu.append(time.process_time() - c0)
        wall.append(time.perf_counter() - w0)
        problem = problem or check(outcome)
    return {"cpu": cpu, "wall": wall, "error": problem or None}


async def job_stream(job: dict[str, Any], client: Client) -> dict[str, Any]:
    scenario = Scenario.parse(job["scenario"])
    return await timed(
        lambda: client.stream(scenario),
        job["warmup"],
        job["runs"],
        lambda o: verify(client.name, o, scenario, client.provider, True),
    )


async def job_complete(job: dict[str, Any], client: Client) -> dict[str, Any]:
    scenario = Scenario.parse(job["scenario"])
    turns = workload.history(job["messages"], images=job.get("images", 0))
    return await timed(
        lambda: client.complete(scenario, turns),
        job["warmup"],
        job["runs"],
        lambda o: verify(client.name, o, scenario, client.provider, False),
    )


async def job_scale_stream(job: dict[str, Any], client: Client) -> dict[str, Any]:
    out = []
    for n in job["sizes"]:
        scenario = Scenario(n, max(1, n // 10))
        runs = max(job["min_runs"], min(job["runs"], job["budget"] // n))
        result = await timed(
            lambda s=scenario: client.stream(s),
            1,
            runs,
            lambda o, s=scenario: verify(client.name, o, s, client.provider, True),
        )
        out.append({"size": n, **result})
    return {"points": out}


async def job_scale_history(job: dict[str, Any], client: Client) -> dict[str, Any]:
    scenario = Scenario.parse(job["scenario"])
    out = []
    for n in job["sizes"]:
        turns = workload.history(n, images=0)
        runs = max(job["min_runs"], min(job["runs"], job["budget"] // n))
        result = await timed(
            lambda t=turns: client.complete(scenario, t),
            2,
            runs,
            lambda o: verify(client.name, o, scenario, client.provider, False),
        )
        out.append({"size": n, **result})
    return {"points": out}


async def job_concurrency(job: dict[str, Any], client: Client) -> dict[str, Any]:
    import anyio

    scenario = Scenario.parse(job["scenario"])
    n = job["n"]
    for _ in range(3):  # warm-up: imports, first connection, caches
        await client.stream(scenario)
    gc.collect()
    base_rss, _ = rss_kib()
    peak_reset = reset_peak_rss()
    errors: list[str] = []
    arrived = 0
    most_in_flight = 0
    gate = anyio.Event()

    async def first() -> None:
        # Every stream holds its first event until all have one (or the barrier times out),
        # so the 1,000 are truly in flight together when memory peaks.
        nonlocal arrived, most_in_flight
        arrived += 1
        most_in_flight = max(most_in_flight, arrived)
        if arrived >= n:
            gate.set()
        with anyio.move_on_after(job["barrier_timeout"]):
            await gate.wait()

    async def one() -> None:
        try:
            outcome = await client.stream(scenario, first)
            problem = verify(client.name, outcome, scenario, client.provider, True)
            if problem:
                errors.append(problem)
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}"[:300])

    c0, w0 = time.process_time(), time.perf_counter()
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(one)
    wall = time.perf_counter() - w0
    cpu = time.process_time() - c0
    _, peak = rss_kib()
    return {
        "n": n,
        "wall": wall,
        "cpu": cpu,
        "errors": len(errors),
        "first_errors": sorted(set(errors))[:3],
        "in_flight": most_in_flight,
        "base_rss_kib": base_rss,
        "peak_rss_kib": peak,
        "peak_reset": peak_reset,
        "kib_per_stream": (peak - base_rss) / n,
    }


JOBS = {
    "stream": job_stream,
    "complete": job_complete,
    "scale-stream": job_scale_stream,
    "scale-history": job_scale_history,
    "concurrency": job_concurrency,
}


def run_job(job: dict[str, Any]) -> dict[str, Any]:
    import anyio

    warnings.simplefilter("ignore")  # the SDKs warn about model names; not our business here

    async def main() -> dict[str, Any]:
        client = make_client(
            job["client"], job["provider"], job["url"], job.get("max_connections", 1000)
        )
        try:
            return await JOBS[job["kind"]](job, client)
        finally:
            await client.aclose()

    return anyio.run(main, backend=job.get("backend", "asyncio"))


def main() -> None:
    job = json.loads(sys.argv[1])
    try:
        result = run_job(job)
    except Exception as exc:  # reported as the column's error, not a crash of the run
        result = {"error": f"{type(exc).__name__}: {exc}"[:500]}
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
