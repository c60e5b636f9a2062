"""A loopback HTTP/1.1 server for the benchmarks, run in its own process.

``python -m benchmarks.server`` listens on 127.0.0.1 (an ephemeral port unless ``--port``),
prints ``PORT <n>`` on its first line and serves until stdin closes or it is terminated:

- ``POST /s/<scenario>/v1/messages``          Anthropic Messages, SSE when ``"stream": true``
- ``POST /s/<scenario>/v1/chat/completions``  OpenAI Chat Completions, the same
- ``POST /s/<scenario>/v1/responses``         OpenAI Responses (streamed only)
- ``POST /s/<scenario>/v1beta/models/<m>:streamGenerateContent``  Gemini, SSE
- ``POST /s/<scenario>/api/chat``             Ollama, NDJSON (streamed only)
- ``POST /p<ms>/s/<scenario>/...``             the same, paced: a streamed body's events one
  ``<ms>`` milliseconds after another (the first at once), as a model generating sends them

Bodies are built once per scenario and cached, already framed: every event is one HTTP chunk
(``Transfer-Encoding: chunked``) as the providers send them, or, for a scenario with a read
size (``-r16384``), the same bytes in chunks of that size; connections are kept alive. The
server parses each request's JSON only to read ``stream`` and OpenAI's
``stream_options.include_usage``; its CPU is not the client's and is not measured.
It depends on nothing but the standard library and :mod:`benchmarks.workload`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
from functools import cache
from pathlib import Path

from benchmarks import formats, workload
from benchmarks.workload import Scenario

_STREAM_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\nrequest-id: req_bench\r\nx-request-id: req_bench\r\n"
    b"transfer-encoding: chunked\r\n\r\n"
)
_JSON_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
    b"request-id: req_bench\r\nx-request-id: req_bench\r\ntransfer-encoding: chunked\r\n\r\n"
)


_NDJSON_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
)


def _chunked(parts: list[bytes], read_size: int = 0) -> bytes:
    if read_size:
        body = b"".join(parts)
        parts = [body[i : i + read_size] for i in range(0, len(body), read_size)]
    out = [b"%x\r\n%s\r\n" % (len(part), part) for part in parts if part]
    out.append(b"0\r\n\r\n")
    return b"".join(out)


@cache
def response(provider: str, scenario: str, stream: bool, include_usage: bool) -> bytes:
    """The whole HTTP response (head and chunked body) for one request."""
    sc = Scenario.parse(scenario)
    reads = sc.read_size
    if provider == "anthropic":
        if stream:
            return _STREAM_HEAD + _chunked(workload.anthropic_stream_events(sc), reads)
        return _JSON_HEAD + _chunked([workload.anthropic_json_body(sc)])
    if provider == "responses":
        return _STREAM_HEAD + _chunked(formats.responses_stream_events(sc), reads)
    if provider == "gemini":
        return _STREAM_HEAD + _chunked(formats.gemini_stream_events(sc), reads)
    if provider == "ollama":
        return _NDJSON_HEAD + _chunked(formats.ollama_stream_events(sc), reads)
    if stream:
        return _STREAM_HEAD + _chunked(workload.openai_stream_events(sc, include_usage), reads)
    return _JSON_HEAD + _chunked([workload.openai_json_body(sc)])


def _not_found(why: str) -> bytes:
    body = json.dumps({"error": {"type": "not_found_error", "message": why}}).encode()
    return (
        b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\n"
        b"content-length: %d\r\n\r\n%s" % (len(body), body)
    )


ROUTES = {
    "v1/messages": "anthropic",
    "v1/chat/completions": "openai",
    "v1/responses": "responses",
    "api/chat": "ollama",
}


def route(path: str, body: bytes) -> bytes:
    path = path.split("?", 1)[0]
    parts = path.strip("/").split("/")
    # s/<scenario>/v1/messages | s/<scenario>/v1/chat/completions
    if len(parts) < 4 or parts[0] != "s":
        return _not_found(f"no route {path}")
    scenario, rest = parts[1], "/".join(parts[2:])
    provider = ROUTES.get(rest)
    if rest.startswith("v1beta/models/") and rest.endswith(":streamGenerateContent"):
        provider = "gemini"
    if provider is None:
        return _not_found(f"no route {path}")
    try:
        request = json.loads(body) if body else {}
        Scenario.parse(scenario)
    except ValueError as exc:
        return _not_found(str(exc))
    stream = provider == "gemini" or bool(request.get("stream", provider == "ollama"))
    include_usage = bool((request.get("stream_options") or {}).get("include_usage"))
    return response(provider, scenario, stream, include_usage)


def paced(path: str) -> tuple[float, str]:
    """``/p<ms>/...``: the seconds between events, and the path without the prefix."""
    first, _, rest = path.lstrip("/").partition("/")
    if len(first) > 1 and first[0] == "p" and first[1:].isdigit():
        return int(first[1:]) / 1000, "/" + rest
    return 0.0, path


def _frames(reply: bytes) -> tuple[bytes, list[bytes]]:
    """A chunked response's head and its chunks, each still framed (the last is ``0``)."""
    at = reply.index(b"\r\n\r\n") + 4
    head, frames = reply[:at], []
    while at < len(reply):
        size = int(reply[at : reply.index(b"\r\n", at)], 16)
        end = reply.index(b"\r\n", at) + 2 + size + 2
        frames.append(reply[at:end])
        at = end
    return head, frames


async def _send_paced(writer: asyncio.StreamWriter, reply: bytes, interval: float) -> None:
    """``reply``'s events one ``interval`` apart, on a fixed schedule from the first."""
    head, frames = _frames(reply)
    loop = asyncio.get_running_loop()
    start = loop.time()
    writer.write(head + frames[0])
    for n, frame in enumerate(frames[1:-1], 1):
        await asyncio.sleep(max(0.0, start + n * interval - loop.time()))
        writer.write(frame + (frames[-1] if n == len(frames) - 2 else b""))
    if len(frames) < 3:
        writer.write(b"".join(frames[1:]))


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts = []
    while True:
        size = int((await reader.readline()).split(b";")[0], 16)
        if size == 0:
            while (await reader.readline()) not in (b"\r\n", b""):
                pass
            return b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
                return
            lines = head.decode("latin-1").split("\r\n")
            method, path, _ = lines[0].split(" ", 2)
            headers = {}
            for line in lines[1:]:
                if ":" in line:
                    key, value = line.split(":", 1)
                    headers[key.strip().lower()] = value.strip()
            if headers.get("transfer-encoding", "").lower() == "chunked":
                body = await _read_chunked(reader)
            else:
                body = await reader.readexactly(int(headers.get("content-length", "0")))
            if headers.get("expect", "").lower() == "100-continue":
                writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
            interval, path = paced(path)
            reply = route(path, body) if method == "POST" else _not_found(method)
            if interval and reply.startswith(_STREAM_HEAD):
                await _send_paced(writer, reply, interval)
            else:
                writer.write(reply)
            await writer.drain()
            if headers.get("connection", "").lower() == "close":
                return
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
        return  # a client went away, or the server is stopping
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def serve(port: int) -> None:
    server = await asyncio.start_server(handle, "127.0.0.1", port, backlog=4096, limit=1 << 24)
    sock = server.sockets[0]
    print(f"PORT {sock.getsockname()[1]}", flush=True)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Stop when the parent goes away (its end of our stdin closes).
    if not sys.stdin.isatty():
        with contextlib.suppress(Exception):
            loop.add_reader(
                sys.stdin.fileno(), lambda: stop.set() if not os.read(0, 4096) else None
            )
    async with server:
        await stop.wait()


class ServerProcess:
    """``with ServerProcess() as url:`` runs this server in a child process for the block."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[str] | None = None
        self.url = ""

    def __enter__(self) -> str:
        root = Path(__file__).resolve().parent.parent
        self.process = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.server"],
            cwd=root,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.__exit__()
            raise RuntimeError(f"benchmark server did not start: {line!r}")
        self.url = f"http://127.0.0.1:{int(line.split()[1])}"
        return self.url

    def __exit__(self, *exc: object) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        with contextlib.suppress(Exception):
            assert process.stdin is not None
            process.stdin.close()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.terminate()
            process.wait(timeout=5)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    asyncio.run(serve(args.port))


if __name__ == "__main__":
    main()
