"""Real redis-servers for tests, on free loopback ports: plain, with a password, over TLS, a
Sentinel watching a primary, and a Cluster; each can be killed and started again."""

from __future__ import annotations

import shutil
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def redis_server_path() -> str:
    exe = shutil.which("redis-server")
    if exe is None:
        pytest.skip(
            "redis-server is not on PATH (apt-get install redis-server, "
            "or set METIS_REDIS_URL to use a running server)"
        )
    return exe


@dataclass
class RedisProcess:
    """One redis-server (or sentinel) on ``port``; ``kill`` and ``start`` it at will."""

    port: int
    workdir: Path
    args: list[str]
    ready_marker: str = "Ready to accept connections"
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def log(self) -> Path:
        return self.workdir / "redis.log"

    def start(self) -> RedisProcess:
        ready_before = self._ready_count()
        self.proc = subprocess.Popen(
            self.args, cwd=self.workdir, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + 15
        while self._ready_count() <= ready_before or not self._accepts():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                tail = self.log.read_text()[-2000:] if self.log.exists() else ""
                pytest.fail(f"redis-server on port {self.port} did not start:\n{tail}")
            time.sleep(0.02)
        return self

    def kill(self) -> None:
        """SIGKILL: the server is gone at once, its connections cut."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()

    def _ready_count(self) -> int:
        if not self.log.exists():
            return 0
        return self.log.read_text(errors="replace").count(self.ready_marker)

    def _accepts(self) -> bool:
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                return True
        except OSError:
            return False


class RedisFactory:
    """Starts servers; stops them all and removes their files at the end."""

    def __init__(self) -> None:
        self.started: list[RedisProcess] = []

    def server(self, *extra: str, port: int | None = None, sentinel: str = "") -> RedisProcess:
        exe = redis_server_path()
        workdir = Path(tempfile.mkdtemp(prefix="metis-redis-"))
        port = port or free_port()
        args = [exe]
        if sentinel:
            (workdir / "sentinel.conf").write_text(sentinel)
            args += [str(workdir / "sentinel.conf"), "--sentinel"]
        args += ["--port", str(port), "--bind", "127.0.0.1", "--dir", str(workdir)]
        if not sentinel:
            args += ["--save", "", "--appendonly", "no"]
        args += ["--daemonize", "no", "--logfile", str(workdir / "redis.log"), *extra]
        marker = "Sentinel ID is" if sentinel else "Ready to accept connections"
        process = RedisProcess(port, workdir, args, marker)
        self.started.append(process)
        return process.start()

    def close(self) -> None:
        for process in self.started:
            process.stop()
            shutil.rmtree(process.workdir, ignore_errors=True)


@dataclass(frozen=True)
class Certificates:
    ca: Path
    cert: Path
    key: Path


def make_certificates(directory: Path) -> Certificates:
    """A throwaway CA and a certificate it signed for 127.0.0.1 and localhost."""
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("openssl is not on PATH: no certificates for the TLS test")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=directory, check=True, capture_output=True)

    run("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=metis-ca",
        "-keyout", "ca.key", "-out", "ca.crt")  # fmt: skip
    run("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", "server.key", "-out", "server.csr")  # fmt: skip
    (directory / "san.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    run("x509", "-req", "-in", "server.csr", "-CA", "ca.crt", "-CAkey", "ca.key",
        "-CAcreateserial", "-days", "1", "-extfile", "san.ext", "-out", "server.crt")  # fmt: skip
    return Certificates(directory / "ca.crt", directory / "server.crt", directory / "server.key")
