"""The benchmark upstream's paced replies (``/p<ms>/`` before the path): the same bytes as the
unpaced reply, its events sent one after another (benchmarks/README.md, "Paced")."""

from __future__ import annotations

import httpx

from benchmarks import server


def test_the_prefix_names_the_interval_and_is_taken_off() -> None:
    assert server.paced("/p5/s/t3-f1/v1/messages") == (0.005, "/s/t3-f1/v1/messages")
    assert server.paced("/s/t3-f1/v1/messages") == (0.0, "/s/t3-f1/v1/messages")
    assert server.paced("/px/s/t3-f1/v1/messages") == (0.0, "/px/s/t3-f1/v1/messages")


def test_a_reply_splits_into_its_head_and_framed_chunks() -> None:
    reply = server.route("/s/t3-f1/v1/messages", b'{"stream": true}')
    head, frames = server._frames(reply)
    assert head.startswith(b"HTTP/1.1 200 OK") and head.endswith(b"\r\n\r\n")
    assert head + b"".join(frames) == reply
    assert frames[-1] == b"0\r\n\r\n" and len(frames) > 3


def test_a_paced_stream_carries_the_unpaced_bytes() -> None:
    body = {"stream": True, "stream_options": {"include_usage": True}}
    with server.ServerProcess() as url:
        for path in ("/s/t3-f1/v1/chat/completions", "/s/t3-f1/v1/messages"):
            whole = httpx.post(url + path, json=body).content
            paced = httpx.post(url + "/p1" + path, json=body).content
            assert paced == whole and whole.strip()
