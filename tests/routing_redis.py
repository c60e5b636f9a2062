"""A real redis-server on a free loopback port, for the routing tests' shared state.

redis-server cannot choose its own port (``--port 0`` turns TCP off), so the port is one the
kernel just handed out and let go of: another suite running beside this one may be handed it
too. A server that cannot bind exits and is started again on another port; the server that
answers is checked to be this one (its process id), never the other suite's."""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serving_pid(port: int) -> int | None:
    """The process id of the redis-server answering on ``port``, None when none answers."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
            reply = sock.recv(65536)
            if reply.startswith(b"$"):  # a bulk string: its length, then the text
                length, _, reply = reply[1:].partition(b"\r\n")
                while len(reply) < int(length) and (data := sock.recv(65536)):
                    reply += data
    except (OSError, ValueError):
        return None
    found = re.search(rb"process_id:(\d+)", reply)
    return int(found.group(1)) if found else None


def _started(exe: str, workdir: Path) -> tuple[subprocess.Popen[bytes], int] | None:
    """A redis-server on a free port and the port, once it answers; None when it exited
    (the port was taken after all)."""
    port = _free_port()
    args = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
    args += ["--dir", str(workdir), "--daemonize", "no", "--logfile", str(workdir / "log")]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30  # a bound on a hang
    while _serving_pid(port) != proc.pid:
        if proc.poll() is not None:
            return None
        if time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"redis-server did not start on port {port}")
        time.sleep(0.02)
    return proc, port


@pytest.fixture(scope="module")
def redis_port() -> Iterator[int]:
    exe = shutil.which("redis-server") or "/usr/bin/redis-server"
    if not Path(exe).exists():
        pytest.skip("redis-server is not installed")
    workdir = Path(tempfile.mkdtemp(prefix="metis-routing-redis-"))
    for _ in range(5):
        started = _started(exe, workdir)
        if started is not None:
            break
    else:
        log = (workdir / "log").read_text(errors="replace")[-2000:]
        pytest.fail(f"redis-server exited at start on five free ports:\n{log}")
    proc, port = started
    try:
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        shutil.rmtree(workdir, ignore_errors=True)


@pytest.fixture
def redis_prefix() -> str:
    return f"test:{uuid.uuid4().hex[:12]}:"
