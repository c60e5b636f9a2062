"""A 20-tool-call agent loop over HTTP and over WebSocket against the emulator (docs/websocket.md).

    python -m benchmarks.websocket_loop [--calls 20] [--runs 5]

The emulator runs in its own process (its CPU is not the client's), answering with a function
model: a tool call per step until ``--calls`` results came back, then a text answer. Each
column runs ``Session.run`` of that loop with one tool (a plain function, answered at once):

- ``http``: ``openai_responses`` (``store: true``: each turn continues the stored reply with
  ``previous_response_id`` and the new items, as metis's ``continuation`` stage does);
- ``http-zdr``: the same with ``store: false``: every turn sends the whole transcript;
- ``ws``: ``openai_responses_ws``: one connection, each turn only the new items;
- ``ws-zdr``: the same with ``store: false`` (the connection holds the reply).

Measured per run: the bytes the client sent per model call (HTTP: request line, headers and
body; WebSocket: the upgrade request and every frame), the client's CPU
(``time.process_time()``) and the wall time; the median of the runs after a warm-up.
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx

import metis
from metis.testing.emulator import Emulator, Prompt, Reply, text, tools
from metis.transport.ws_stage import WebSocketTransport

COLUMNS = {
    "http": ("openai_responses", True),
    "http-zdr": ("openai_responses", False),
    "ws": ("openai_responses_ws", True),
    "ws-zdr": ("openai_responses_ws", False),
}


def loop_model(prompt: Prompt) -> Reply:
    """A tool call per step until ``CALLS`` results came back, then the answer."""
    done = sum(len(turn.results) for turn in prompt.turns)
    if done < CALLS:
        return tools(("read_file", {"path": f"src/module_{done}.py"}))
    return text(f"Read {done} files; the bug is in module 7.")


CALLS = 20


def serve(calls: int, ports: Any, stop: Any) -> None:
    global CALLS
    CALLS = calls
    with Emulator(model=loop_model, models="any") as emulator:
        ports.put(emulator.port)
        stop.wait()


def read_file(path: str) -> str:
    """The text of a file of the project."""
    return f"# {path}\n" + "def handler(event):\n    return event\n" * 20


def stack_file(folder: Path, stack: str, store: bool) -> str | Path:
    if store:
        return stack
    path = folder / f"{stack}_zdr.yaml"
    path.write_text(f"name: {stack}_zdr\nextends: {stack}\ncodec_settings: {{store: false}}\n")
    return path


async def one_run(url: str, stack: str | Path, calls: int) -> tuple[int, int, float, float]:
    """(bytes sent, model calls, CPU seconds, wall seconds) of one loop."""
    sent = 0

    async def count(request: httpx.Request) -> None:
        nonlocal sent
        head = sum(len(k) + len(v) + 4 for k, v in request.headers.raw)
        sent += len(request.method) + len(request.url.raw_path) + 12 + head
        sent += len(request.content)

    client = httpx.AsyncClient(event_hooks={"request": [count]})
    adapter = metis.build_adapter(stack, api_key="k", base_url=url, http_client=client)
    name = adapter.name
    tool = metis.tool(read_file)
    async with client, adapter:
        session = metis.Session(f"{name}:gpt-5", adapters={name: adapter}, tools=[tool])
        cpu, wall = time.process_time(), time.perf_counter()
        result = await session.arun("Find the bug in src/.", max_steps=calls + 2)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        assert result.reason == "complete" and result.steps == calls + 1, result.reason
        transport = (
            adapter.pipeline.provider.part("transport") if adapter.pipeline.provider else None
        )
        if isinstance(transport, WebSocketTransport):
            sent += transport.bytes_sent(session.session_id)
        await session.aclose()
    return sent, result.steps, cpu, wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    context = multiprocessing.get_context("spawn")
    ports, stop = context.Queue(), context.Event()
    server = context.Process(target=serve, args=(args.calls, ports, stop), daemon=True)
    server.start()
    url = f"http://127.0.0.1:{ports.get(timeout=60)}"
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        for column, (stack, store) in COLUMNS.items():
            path = stack_file(Path(folder), stack, store)
            runs = [anyio.run(one_run, url, path, args.calls) for _ in range(args.runs + 1)][1:]
            sent = statistics.median(r[0] / r[1] for r in runs)
            cpu = statistics.median(r[2] for r in runs) * 1000
            wall = statistics.median(r[3] for r in runs) * 1000
            rows.append((column, runs[0][1], sent, cpu, wall))
    stop.set()
    server.join(timeout=10)
    print(f"{args.calls}-tool-call loop, median of {args.runs} runs")
    print("| column | model calls | bytes sent per call | client CPU ms | wall ms |")
    print("|---|---:|---:|---:|---:|")
    for column, steps, sent, cpu, wall in rows:
        print(f"| {column} | {steps} | {sent:,.0f} | {cpu:.1f} | {wall:.1f} |")


if __name__ == "__main__":
    main()
