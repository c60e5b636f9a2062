"""Micro-benchmark of the SSE decoder: 10,000 OpenAI-like events fed in 4 KiB chunks.

Run from the repository root: ``python benchmarks/sse_decoder_bench.py``. Not a test.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from metis.wire.framing.sse import SSEDecoder

EVENTS = 10_000
CHUNK = 4096
ROUNDS = 20


def make_stream() -> bytes:
    parts = []
    for i in range(EVENTS):
        chunk = {
            "id": "chatcmpl-AbCdEf0123456789",
            "object": "chat.completion.chunk",
            "created": 1727000000,
            "model": "gpt-4o-mini-2024-07-18",
            "system_fingerprint": "fp_0123456789",
            "choices": [
                {
                    "index": 0,
                    "delta": {"content": f" token{i} é"},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
        }
        parts.append(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def run(chunks: list[bytes]) -> int:
    decoder = SSEDecoder()
    n = 0
    for chunk in chunks:
        n += len(decoder.feed(chunk))
    return n + len(decoder.close())


def main() -> None:
    stream = make_stream()
    chunks = [stream[i : i + CHUNK] for i in range(0, len(stream), CHUNK)]
    assert run(chunks) == EVENTS + 1
    best = float("inf")
    for _ in range(ROUNDS):
        start = time.perf_counter()
        run(chunks)
        best = min(best, time.perf_counter() - start)
    per_event = best / (EVENTS + 1) * 1e6
    print(
        f"{EVENTS + 1} events, {len(stream) / 1024:.0f} KiB in {len(chunks)} chunks of "
        f"{CHUNK} B: best of {ROUNDS} = {best * 1e3:.2f} ms, {per_event:.2f} µs/event"
    )


if __name__ == "__main__":
    main()
