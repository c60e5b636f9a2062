"""``metis serve`` as a user runs it: a process that says where it listens only once it does."""

from __future__ import annotations

import re
import select
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import yaml

pytest.importorskip("uvicorn")

CONFIG = {
    "adapters": {"anthropic": {"type": "anthropic", "api_key_env": "UP_KEY"}},
    "models": {"anthropic:claude-sonnet-4-5": {"adapter": "anthropic", "aliases": ["sonnet"]}},
    "gateway": {"host": "127.0.0.1"},
}


def _first_line(process: subprocess.Popen[str], bound: float = 120) -> str:
    """The process's first line of output (a bound on a process that never writes one)."""
    assert process.stdout is not None
    ready, _, _ = select.select([process.stdout], [], [], bound)
    assert ready, "metis serve wrote nothing"
    return process.stdout.readline()


@pytest.mark.skipif(sys.platform == "win32", reason="select on a pipe")
def test_serve_says_it_listens_once_bound_with_the_port_it_was_given(tmp_path: Path) -> None:
    """``--port 0``: the line names the port the system chose, and a request sent as soon as
    the line is read is answered (it was written before the socket was bound, naming port 0)."""
    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    command = [sys.executable, "-m", "metis.cli", "serve", "--config", str(config), "--port", "0"]
    with open(tmp_path / "stderr", "w") as stderr:
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env={"UP_KEY": "sk-upstream", "PATH": "/usr/bin:/bin"},
        )
    try:
        line = _first_line(process)
        found = re.match(r"metis serve listening on (http://127\.0\.0\.1:(\d+))  \(", line)
        assert found is not None, line + (tmp_path / "stderr").read_text()
        assert int(found[2]) != 0
        assert httpx.get(found[1] + "/health").status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=60)


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(("flag", "logged"), [([], False), (["--access-log"], True)])
def test_the_access_log_is_off_unless_asked_for(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, workers: str, flag: list[str], logged: bool
) -> None:
    """uvicorn's line per request costs CPU on every request: ``--access-log`` turns it on."""
    import uvicorn

    from metis.cli import main
    from metis.cli import serve as serve_command

    given: dict[str, object] = {}

    class Served:
        started = True

        def run(self) -> None:
            pass

    def config(app: object, **options: object) -> None:
        given.update(options)

    def run(app: object, **options: object) -> None:
        given.update(options)

    monkeypatch.setattr(uvicorn, "Config", config)
    monkeypatch.setattr(uvicorn, "run", run)
    monkeypatch.setattr(serve_command, "_announcing_server", lambda *_: Served())
    monkeypatch.setenv("UP_KEY", "sk-upstream")
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(CONFIG))
    assert main(["serve", "--config", str(path), "--workers", workers, *flag]) == 0
    assert given["access_log"] is logged


@pytest.mark.parametrize("workers", ["1", "2"])
@pytest.mark.parametrize(
    ("gateway", "flag", "seconds"),
    [
        ({}, [], 5),
        ({"keep_alive_seconds": 75}, [], 75),
        ({"keep_alive_seconds": 75}, ["--timeout-keep-alive", "120"], 120),
    ],
)
def test_the_keep_alive_timeout_is_the_configurations_or_the_flags(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    workers: str,
    gateway: dict[str, int],
    flag: list[str],
    seconds: int,
) -> None:
    """A load balancer reusing an idle connection the server is closing gets a 502: the
    server's keep-alive timeout is set longer than the balancer's idle timeout."""
    import uvicorn

    from metis.cli import main
    from metis.cli import serve as serve_command

    given: dict[str, object] = {}

    class Served:
        started = True

        def run(self) -> None:
            pass

    monkeypatch.setattr(uvicorn, "Config", lambda app, **options: given.update(options))
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: given.update(options))
    monkeypatch.setattr(serve_command, "_announcing_server", lambda *_: Served())
    monkeypatch.setenv("UP_KEY", "sk-upstream")
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "gateway": {**CONFIG["gateway"], **gateway}}))
    assert main(["serve", "--config", str(path), "--workers", workers, *flag]) == 0
    assert given["timeout_keep_alive"] == seconds


def test_a_keep_alive_timeout_below_a_second_is_refused_naming_it() -> None:
    from metis.errors import ConfigError
    from metis.gateway.config import GatewayConfig

    with pytest.raises(ConfigError, match=r"gateway\.keep_alive_seconds"):
        GatewayConfig.from_dict({**CONFIG, "gateway": {"keep_alive_seconds": 0}})


@pytest.mark.parametrize(
    ("gateway", "host", "said"),
    [
        ({"host": "127.0.0.1"}, [], "any client is served, with this server's provider keys\n"),
        ({}, ["--host", "0.0.0.0"], "it listens on 0.0.0.0, which other machines can reach"),
        ({"api_key_env": "GW_KEY"}, ["--host", "0.0.0.0"], None),
    ],
)
def test_a_gateway_without_keys_says_any_client_is_served(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    gateway: dict[str, str],
    host: list[str],
    said: str | None,
) -> None:
    """A models.yaml with no gateway key (no ``gateway:`` section at all, say) serves every
    client that reaches it with the server's provider keys: it says so as it starts."""
    import uvicorn

    from metis.cli import main
    from metis.cli import serve as serve_command

    class Served:
        started = True

        def run(self) -> None:
            pass

    monkeypatch.setattr(uvicorn, "Config", lambda app, **options: None)
    monkeypatch.setattr(serve_command, "_announcing_server", lambda *_: Served())
    monkeypatch.setenv("UP_KEY", "sk-upstream")
    monkeypatch.setenv("GW_KEY", "gw-key")
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "gateway": gateway}))
    assert main(["serve", "--config", str(path), *host]) == 0
    err = capsys.readouterr().err
    if said is None:
        assert "warning" not in err
    else:
        assert "metis: warning: " in err and "names no gateway key" in err
        assert said in err


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_port_in_use_is_one_error_line_saying_what_to_do(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    workers: str,
) -> None:
    """With ``--workers 2`` too, where uvicorn binds the socket itself and exited with its
    own status and no word of metis's."""
    import socket

    from metis.cli import main

    config = tmp_path / "gateway.yaml"
    config.write_text(yaml.safe_dump(CONFIG))
    monkeypatch.setenv("UP_KEY", "sk-upstream")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        given = ["--port", str(port), "--workers", workers]
        assert main(["serve", "--config", str(config), *given]) == 1
    said = capsys.readouterr().err
    assert f"metis: error: the gateway did not start on 127.0.0.1:{port}" in said
    assert "--port N" in said


@pytest.mark.parametrize(("redis", "warned"), [(None, True), ("redis://127.0.0.1:6379", False)])
def test_workers_without_a_redis_are_told_they_keep_their_own_state(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    redis: str | None,
    warned: bool,
) -> None:
    """Each worker of ``--workers 2`` without ``redis_url`` keeps its own limits, spend and
    stored Responses: a key gets twice its budget, and a previous_response_id that reaches
    the other worker is a 400. The operator is told as it starts."""
    import uvicorn

    from metis.cli import main

    if redis is not None:
        pytest.importorskip("coredis")
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: None)
    monkeypatch.setenv("UP_KEY", "sk-upstream")
    monkeypatch.setenv("GW_KEY", "gw-key")
    gateway = {"api_key_env": "GW_KEY", **({"redis_url": redis} if redis else {})}
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump({**CONFIG, "gateway": gateway}))
    assert main(["serve", "--config", str(path), "--workers", "2"]) == 0
    err = capsys.readouterr().err
    assert ("names no gateway.redis_url: each of the 2 workers" in err) is warned
    assert ("a previous_response_id another worker stored is a 400" in err) is warned


def test_a_file_with_no_models_is_said_as_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The wrong file given (an empty one, a gateway: section alone): a gateway that would
    answer every request 404 says so."""
    import uvicorn

    from metis.cli import main
    from metis.cli import serve as serve_command

    class Served:
        started = True

        def run(self) -> None:
            pass

    monkeypatch.setattr(uvicorn, "Config", lambda app, **options: None)
    monkeypatch.setattr(serve_command, "_announcing_server", lambda *_: Served())
    monkeypatch.setenv("GW_KEY", "gw-key")
    for data, warned in (({"gateway": {"api_key_env": "GW_KEY"}}, True), (CONFIG, False)):
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump(data))
        assert main(["serve", "--config", str(path)]) == 0
        err = capsys.readouterr().err
        assert ("names no models: every request is a 404" in err) is warned


def test_a_workers_log_lines_are_written_as_one_process_writes_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each worker of ``--workers N`` builds its application with ``worker_app``, which writes
    the gateway's records as ``metis serve`` does with one (level and event named), not bare
    by Python's last-resort handler (``left out of the request for flash: n``)."""
    import gc
    import logging

    from metis.cli.serve import worker_app

    config = tmp_path / "models.yaml"
    config.write_text("adapters: {}\nmodels: {}\n")
    monkeypatch.setenv("METIS_GATEWAY_CONFIG", str(config))
    loggers = [logging.getLogger("metis"), logging.getLogger("metis.gateway")]
    before = [(list(logger.handlers), logger.level) for logger in loggers]
    try:
        worker_app()
        record = {"event": "metis.gateway.dropped"}
        logging.getLogger("metis.gateway").warning("left out: n", extra=record)
    finally:
        for logger, (handlers, level) in zip(loggers, before, strict=True):
            logger.handlers[:] = handlers
            logger.setLevel(level)
        gc.unfreeze()
    assert capsys.readouterr().err == "metis: warning: [metis.gateway.dropped] left out: n\n"


@pytest.mark.parametrize("on", [True, False])
def test_each_worker_writes_the_access_lines_unless_turned_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], on: bool
) -> None:
    """``gateway.access_log`` (on by default): each worker writes the gateway's line per
    request (INFO) beside its warnings; off, it writes none."""
    import gc
    import logging

    from metis.cli.serve import worker_app

    config = tmp_path / "models.yaml"
    config.write_text(f"adapters: {{}}\nmodels: {{}}\ngateway: {{access_log: {str(on).lower()}}}\n")
    monkeypatch.setenv("METIS_GATEWAY_CONFIG", str(config))
    loggers = [logging.getLogger("metis"), logging.getLogger("metis.gateway")]
    before = [(list(logger.handlers), logger.level) for logger in loggers]
    try:
        worker_app()
        gateway = logging.getLogger("metis.gateway")
        gateway.info("GET /health status=200", extra={"event": "metis.gateway.access"})
        gateway.warning("left out: n", extra={"event": "metis.gateway.dropped"})
    finally:
        for logger, (handlers, level) in zip(loggers, before, strict=True):
            logger.handlers[:] = handlers
            logger.setLevel(level)
        gc.unfreeze()
    access = "metis: info: [metis.gateway.access] GET /health status=200\n" if on else ""
    assert (
        capsys.readouterr().err == access + "metis: warning: [metis.gateway.dropped] left out: n\n"
    )


@pytest.mark.slow  # it waits out a stalled stream
@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM and select on a pipe")
def test_sigterm_drains_a_stream_and_closes_the_port_at_once(tmp_path: Path) -> None:
    """As docs/gateway.md says under "Shutdown": the stream in flight when ``metis serve``
    gets SIGTERM runs to its end, no new connection finds a listener from then on (what a
    readiness probe meets), and the process ends by the signal."""
    import signal
    import threading

    from metis.testing.emulator import Emulator

    with Emulator(faults="stall=8:1.0") as upstream:  # 8 s without a byte after the first event
        adapter = {"type": "openai", "api_key_env": "UP_KEY", "base_url": upstream.url + "/v1"}
        config = {
            "adapters": {"openai": adapter},
            "models": {"openai:gpt-4o": {"adapter": "openai", "aliases": ["gpt"]}},
            "gateway": {"host": "127.0.0.1", "drain_seconds": 60},
        }
        path = tmp_path / "gateway.yaml"
        path.write_text(yaml.safe_dump(config))
        command = [sys.executable, "-m", "metis.cli", "serve", "--config", str(path), "--port", "0"]
        env = {"UP_KEY": "sk-upstream", "PATH": "/usr/bin:/bin"}
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
        )
        try:
            found = re.match(r"metis serve listening on (http://[\d.:]+)", _first_line(process))
            assert found is not None
            url = found[1]
            assert httpx.get(url + "/ready").status_code == 200
            lines: list[str] = []
            first = threading.Event()

            def stream() -> None:
                said = {
                    "model": "gpt",
                    "messages": [{"role": "user", "content": "Hi"}],
                    "stream": True,
                }
                with httpx.stream("POST", url + "/v1/chat/completions", json=said, timeout=60) as r:
                    for line in r.iter_lines():
                        lines.append(line)
                        first.set()

            reader = threading.Thread(target=stream)
            reader.start()
            assert first.wait(60)
            process.send_signal(signal.SIGTERM)
            refused = False
            while not refused and process.poll() is None:
                try:
                    httpx.get(url + "/ready", timeout=1)
                except (httpx.ConnectError, httpx.RemoteProtocolError, httpx.ReadError):
                    refused = True  # no listener, or one closing (or resetting) as it took it
                except httpx.TimeoutException:
                    pass
            assert refused and "data: [DONE]" not in lines  # closed while the stream went on
            assert process.wait(timeout=60) == -signal.SIGTERM
            reader.join(60)
            assert "data: [DONE]" in lines
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=60)


STAGE_MODULE = """
from metis.model import CanonicalRequest
from metis.pipeline import Call, RequestStage, register_stage


@register_stage
class ServedMark(RequestStage[CanonicalRequest]):
    name = "served_mark"

    def rewrite(self, request: CanonicalRequest, call: Call) -> CanonicalRequest:
        return request
"""


def _custom_gateway(tmp_path: Path) -> Path:
    (tmp_path / "mine.yaml").write_text(
        "extends: anthropic\nstages:\n  insert_after: {tool_ids: [served_mark]}\n"
    )
    config = {
        "adapters": {"mine": {"type": "./mine.yaml", "api_key_env": "UP_KEY"}},
        "models": {"mine:claude-sonnet-4-5": {"adapter": "mine", "aliases": ["sonnet"]}},
        "gateway": {"host": "127.0.0.1"},
    }
    path = tmp_path / "gateway.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def test_a_stack_with_a_stage_of_ones_own_is_served_with_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A gateway user's stack with a stage of their own: metis serve could not import its
    module (metis stack has --import), and the unknown stage was a traceback of the
    application's startup. It is one line naming --import, before anything listens, and
    --import MODULE (repeatable; each worker imports it too) serves it."""
    import uvicorn

    from metis.cli import main
    from metis.cli import serve as serve_command

    class Served:
        started = True

        def run(self) -> None:
            pass

    monkeypatch.setattr(uvicorn, "Config", lambda app, **options: None)
    monkeypatch.setattr(uvicorn, "run", lambda app, **options: None)
    monkeypatch.setattr(serve_command, "_announcing_server", lambda *_: Served())
    monkeypatch.setenv("UP_KEY", "k")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv(serve_command.IMPORTS_VARIABLE, raising=False)
    path = _custom_gateway(tmp_path)
    assert main(["serve", "--config", str(path)]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("metis: error: ") and "unknown stage 'served_mark'" in err
    assert err.endswith("(a stage of your own? --import the module that registers it)")
    assert "Traceback" not in err
    (tmp_path / "my_served_stages.py").write_text(STAGE_MODULE)
    assert main(["serve", "--config", str(path), "--import", "my_served_stages"]) == 0
    assert (
        main(["serve", "--config", str(path), "--import", "my_served_stages", "--workers", "2"])
        == 0
    )
    assert serve_command.os.environ[serve_command.IMPORTS_VARIABLE] == "my_served_stages"
    assert main(["serve", "--config", str(path), "--import", "no_such_module_here"]) == 1
    assert "--import no_such_module_here: No module named" in capsys.readouterr().err
