"""The gateway beside LiteLLM's proxy: added latency, gateway CPU per request and requests per
second, at several numbers of concurrent streams, for a same-API and a translated route
(benchmarks/README.md, "The gateway").

    python -m benchmarks.gateway                      # 1, 100 and 1,000 streams, every route
    python -m benchmarks.gateway --concurrency 1,100 --routes translated --requests 500
    python -m benchmarks.gateway --litellm .venv-litellm/bin/litellm --markdown out.md

One upstream (``benchmarks.server``, pre-built OpenAI Chat and Anthropic Messages streams, in
a process of its own), and each gateway in a process of its own over it: ``metis serve`` and,
when its executable is found, ``litellm`` (installed apart: ``python -m venv .venv-litellm &&
.venv-litellm/bin/pip install 'litellm[proxy]'``). The load generator
(``benchmarks.gateway_load``) is a third process. Each cell runs the same requests straight to
the upstream and through each gateway: the added latency is the gateway's percentile minus the
upstream's, the CPU per request is the gateway process's own CPU time (``/proc``) over the
timed requests.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from benchmarks import workload
from benchmarks.gateway_report import Cell, load_cells, markdown
from benchmarks.server import ServerProcess

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = "t50-f10"
"""50 text deltas, then a tool call in 10 fragments: a short agent turn."""
GATEWAY_KEY = "sk-bench-gateway"
"""The key clients give either gateway (LiteLLM's master key; metis's ``api_key_env``)."""
ENVIRONMENT = {"BENCH_UPSTREAM_KEY": "sk-upstream", "BENCH_GATEWAY_KEY": GATEWAY_KEY}
MODELS = {"chat": "bench-chat", "messages": "bench-messages"}


@dataclass(frozen=True)
class Route:
    """A request in one API, to a model whose upstream speaks ``upstream``."""

    name: str
    api: str  # "chat" or "messages": what the client sends
    upstream: str  # the same: what the upstream speaks

    @property
    def kind(self) -> str:
        return "same API" if self.api == self.upstream else "translated"


ROUTES = {
    "same-chat": Route("Chat in, Chat upstream", "chat", "chat"),
    "translated": Route("Messages in, Chat upstream", "messages", "chat"),
    "same-messages": Route("Messages in, Messages upstream", "messages", "messages"),
}
PATHS = {"chat": "/v1/chat/completions", "messages": "/v1/messages"}
MARKERS = {"chat": "[DONE]", "messages": "message_stop"}
HEADERS = {
    "chat": [f"authorization: Bearer {GATEWAY_KEY}"],
    "messages": [f"x-api-key: {GATEWAY_KEY}"],
}
HEADERS["messages"].append("anthropic-version: 2023-06-01")


def request_body(api: str, model: str) -> bytes:
    """A streamed request with a system prompt, one question and one tool."""
    if api == "responses":
        return responses_body(model)
    if api == "chat":
        body: dict[str, Any] = {
            "model": model,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_tokens": 1024,
            "messages": [
                {"role": "system", "content": workload.SYSTEM},
                {"role": "user", "content": workload.QUESTION},
            ],
            "tools": workload.openai_tools(),
        }
    else:
        body = {
            "model": model,
            "stream": True,
            "max_tokens": 1024,
            "system": workload.SYSTEM,
            "messages": [{"role": "user", "content": workload.QUESTION}],
            "tools": workload.anthropic_tools(),
        }
    return json.dumps(body).encode()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def upstream_base(upstream: str, scenario: str, pace_ms: int = 0) -> str:
    """The upstream's base URL for ``scenario``; ``pace_ms``: its events that far apart."""
    return f"{upstream}{f'/p{pace_ms}' if pace_ms else ''}/s/{scenario}"


def metis_config(upstream: str, scenario: str, pass_through: bool = True, pace_ms: int = 0) -> str:
    base = upstream_base(upstream, scenario, pace_ms)
    keyed = "api_key_env: BENCH_UPSTREAM_KEY, max_retries: 0"
    return (
        "adapters:\n"
        f"  up-chat: {{type: openai, base_url: '{base}', {keyed}}}\n"
        f"  up-messages: {{type: anthropic, base_url: '{base}', {keyed}}}\n"
        "models:\n"
        f"  openai:gpt-4o: {{adapter: up-chat, aliases: [{MODELS['chat']}]}}\n"
        "  anthropic:claude-sonnet-4-5: "
        f"{{adapter: up-messages, aliases: [{MODELS['messages']}]}}\n"
        f"gateway: {{api_key_env: BENCH_GATEWAY_KEY, pass_through: {str(pass_through).lower()}}}\n"
    )


def with_connect_timeout(work: Path, seconds: float) -> None:
    """metis's two adapters on stacks of their own whose transport gives a connection
    ``seconds`` to open (the default is 10 s): a shorter one shows, at any load, whether a
    connect the upstream accepted at once outlives its timer while the gateway is busy."""
    config = work / "metis.yaml"
    text = config.read_text()
    for stack in ("openai", "anthropic"):
        (work / f"bench_{stack}.yaml").write_text(
            f"name: bench_{stack}\nextends: {stack}\n"
            f"stages:\n  options: {{transport: {{connect_timeout: {seconds}}}}}\n"
        )
        text = text.replace(f"{{type: {stack},", f"{{type: ./bench_{stack}.yaml,")
    config.write_text(text)


def litellm_config(upstream: str, scenario: str, pace_ms: int = 0) -> str:
    base = upstream_base(upstream, scenario, pace_ms)
    return (
        "model_list:\n"
        f"  - model_name: {MODELS['chat']}\n"
        "    litellm_params: {model: openai/gpt-4o, "
        f"api_base: '{base}/v1', api_key: sk-upstream}}\n"
        f"  - model_name: {MODELS['messages']}\n"
        "    litellm_params: {model: anthropic/claude-sonnet-4-5, "
        f"api_base: '{base}/v1/messages', api_key: sk-upstream}}\n"
        f"general_settings: {{master_key: {GATEWAY_KEY}}}\n"
    )


@contextlib.contextmanager
def gateway_process(
    command: list[str], url: str, health: str, env: dict[str, str]
) -> Iterator[int]:
    """``command`` running until its ``health`` path answers; its pid."""
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env={**os.environ, **env},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"{command[0]} exited with {process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(url + health, timeout=2).status_code == 200:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not become healthy")
            time.sleep(0.5)
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@contextlib.contextmanager
def throttled(pid: int, share: float) -> Iterator[None]:
    """Process ``pid`` (its group: uvicorn's workers too) running ``share`` of each 100 ms
    and stopped the rest, as a process gets a fifth of a core at load 18 on two cores: a
    loaded machine's scheduler, reproduced on a quiet one. ``share`` 1: untouched."""
    if share >= 1:
        yield
        return
    done = threading.Event()

    def cycle() -> None:
        while not done.is_set():
            os.killpg(pid, signal.SIGCONT)
            time.sleep(0.1 * share)
            os.killpg(pid, signal.SIGSTOP)
            done.wait(0.1 * (1 - share))
        os.killpg(pid, signal.SIGCONT)

    thread = threading.Thread(target=cycle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


def metis_serve(config: Path, workers: int) -> tuple[list[str], str, str]:
    port = free_port()
    code = "import sys; from metis.cli import main; sys.exit(main(sys.argv[1:]))"
    command = [sys.executable, "-c", code, "serve", "--config", str(config)]
    command += ["--port", str(port), "--workers", str(workers)]
    return command, f"http://127.0.0.1:{port}", "/health"


def floor_serve(upstream: str) -> tuple[list[str], str, str, dict[str, str]]:
    """The bare proxy of ``benchmarks.gateway_floor`` over ``upstream`` (a same-API route
    only: it translates nothing); its command, URL, health path and environment."""
    port = free_port()
    command = [sys.executable, "-m", "uvicorn", "benchmarks.gateway_floor:app"]
    command += ["--port", str(port), "--log-level", "warning", "--no-access-log"]
    return command, f"http://127.0.0.1:{port}", "/health", {"FLOOR_UPSTREAM": upstream}


def target_serve(
    target: str, work: Path, direct: str, litellm: str
) -> tuple[list[str], str, str, dict[str, str]]:
    """How to start ``target`` (``metis``, ``floor`` or ``litellm``) over the configurations in
    ``work`` (``metis.yaml``, ``litellm.yaml``) and the upstream at ``direct``: its command,
    URL, health path and environment."""
    if target == "metis":
        return (*metis_serve(work / "metis.yaml", 1), dict(ENVIRONMENT))
    if target == "floor":
        command, url, health, extra = floor_serve(direct)
        return command, url, health, {**ENVIRONMENT, **extra}
    return (*litellm_serve(litellm, work / "litellm.yaml", 1), dict(ENVIRONMENT))


def litellm_serve(executable: str, config: Path, workers: int) -> tuple[list[str], str, str]:
    port = free_port()
    command = [executable, "--config", str(config), "--port", str(port), "--host", "127.0.0.1"]
    command += ["--num_workers", str(workers)]
    return command, f"http://127.0.0.1:{port}", "/health/liveliness"


def load(
    url: str, path: str, body: Path, api: str, concurrency: int, requests: int, pid: int
) -> dict[str, Any]:
    """One cell's run of the load generator, in its own process."""
    command = [sys.executable, "-m", "benchmarks.gateway_load", "--url", url, "--path", path]
    command += ["--body", str(body), "--marker", MARKERS[api], "--pid", str(pid)]
    command += ["--concurrency", str(concurrency), "--requests", str(requests)]
    for header in HEADERS[api]:
        command += ["--header", header]
    load_before = os.getloadavg()[0]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(f"load generator failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    result["load_average"] = (load_before + os.getloadavg()[0]) / 2
    return result


def requests_for(concurrency: int, args: argparse.Namespace) -> int:
    return max(args.requests, concurrency)


def run_cells(args: argparse.Namespace, work: Path, upstream: str) -> list[Cell]:
    bodies = {}
    for api in PATHS:
        for target in MODELS:
            bodies[api, target] = work / f"{api}-{target}.json"
            bodies[api, target].write_bytes(request_body(api, MODELS[target]))
    gateways = {}
    if "metis" in args.targets:
        gateways["metis"] = metis_serve(work / "metis.yaml", args.workers)
    if args.litellm and "litellm" in args.targets:
        gateways["litellm"] = litellm_serve(args.litellm, work / "litellm.yaml", args.workers)
    cells: list[Cell] = []
    with contextlib.ExitStack() as stack:
        pids = {}
        for name, (command, url, health) in gateways.items():
            pids[name] = stack.enter_context(gateway_process(command, url, health, ENVIRONMENT))
            stack.enter_context(throttled(pids[name], args.cpu_share))
        direct = upstream_base(upstream, args.scenario, args.pace)
        for key in args.routes:
            route = ROUTES[key]
            for concurrency in args.concurrency:
                n = requests_for(concurrency, args)
                body = bodies[route.upstream, route.upstream]
                up = load(direct, PATHS[route.upstream], body, route.upstream, concurrency, n, 0)
                straight = Cell(key, route.name, route.kind, "upstream", concurrency, up)
                cells.append(straight)
                for name, (_, url, _) in gateways.items():
                    body = bodies[route.api, route.upstream]
                    result = load(
                        url, PATHS[route.api], body, route.api, concurrency, n, pids[name]
                    )
                    cells.append(Cell(key, route.name, route.kind, name, concurrency, result))
                    cells[-1].against(straight)
                    print(cells[-1].line(straight), file=sys.stderr, flush=True)
    return cells


# The Responses API in and upstream (metis passes it through) ---------------------------------


def add_responses_route() -> None:
    """The route ``same-responses``: a Responses request to a model of an
    ``openai_responses`` stack, the upstream's ``/v1/responses``."""
    ROUTES["same-responses"] = Route("Responses in, Responses upstream", "responses", "responses")
    PATHS["responses"] = "/v1/responses"
    MARKERS["responses"] = '"total_tokens"'  # the usage of response.completed, its last bytes
    HEADERS["responses"] = [f"authorization: Bearer {GATEWAY_KEY}"]
    MODELS["responses"] = "bench-responses"


def responses_body(model: str) -> bytes:
    """The streamed Responses request: instructions, one question, one tool."""
    tools = [{"type": "function", **t["function"]} for t in workload.openai_tools()]
    body = {
        "model": model,
        "stream": True,
        "max_output_tokens": 1024,
        "instructions": workload.SYSTEM,
        "input": workload.QUESTION,
        "tools": tools,
    }
    return json.dumps(body).encode()


def with_responses_model(work: Path, upstream: str, scenario: str, pace_ms: int = 0) -> None:
    """Each gateway's configuration in ``work`` given the Responses model."""
    import yaml

    base = upstream_base(upstream, scenario, pace_ms)
    metis = yaml.safe_load((work / "metis.yaml").read_text())
    metis["adapters"]["up-responses"] = {
        "type": "openai_responses",
        "base_url": base,
        "api_key_env": "BENCH_UPSTREAM_KEY",
        "max_retries": 0,
    }
    metis["models"]["openai_responses:gpt-5"] = {
        "adapter": "up-responses",
        "aliases": [MODELS["responses"]],
    }
    (work / "metis.yaml").write_text(yaml.safe_dump(metis))
    litellm = yaml.safe_load((work / "litellm.yaml").read_text())
    params = {"model": "openai/gpt-5", "api_base": f"{base}/v1", "api_key": "sk-upstream"}
    litellm["model_list"].append({"model_name": MODELS["responses"], "litellm_params": params})
    (work / "litellm.yaml").write_text(yaml.safe_dump(litellm))


add_responses_route()


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", default="1,100,1000")
    parser.add_argument("--routes", default=",".join(ROUTES), help=", ".join(ROUTES))
    parser.add_argument("--requests", type=int, default=300, help="per cell, at least N")
    parser.add_argument("--targets", default="metis,litellm", help="the gateways measured")
    parser.add_argument("--scenario", default=SCENARIO)
    parser.add_argument(
        "--pace",
        type=int,
        default=0,
        help="ms between the upstream's events (0: each reply sent whole, at once)",
    )
    parser.add_argument(
        "--pass-through",
        choices=("on", "off"),
        default="on",
        help="metis's same-API routes pass through (its default) or are translated",
    )
    parser.add_argument("--workers", type=int, default=1, help="gateway worker processes")
    parser.add_argument(
        "--connect-timeout", type=float, default=0, help="metis's upstream connect timeout, s"
    )
    parser.add_argument(
        "--cpu-share",
        type=float,
        default=1.0,
        help="the gateway runs this share of the time (0.2: a fifth of a core, as at load 18)",
    )
    default = ROOT / ".venv-litellm" / "bin" / "litellm"
    found = str(default) if default.exists() else shutil.which("litellm")
    parser.add_argument("--litellm", default=found, help="the litellm executable; '' skips it")
    parser.add_argument("--json", help="write every cell's figures here")
    parser.add_argument("--markdown", help="write the tables here")
    parser.add_argument("--report-from", help="no run: the tables of these --json files")
    args = parser.parse_args(argv)
    args.concurrency = [int(n) for n in args.concurrency.split(",")]
    args.targets = args.targets.split(",")
    args.routes = [r for r in args.routes.split(",") if r]
    if unknown := set(args.routes) - set(ROUTES):
        parser.error(f"unknown routes: {', '.join(sorted(unknown))}")
    return args


def main(argv: list[str] | None = None) -> list[Cell]:
    args = parse_args(argv)
    if args.report_from:
        cells = load_cells(args.report_from.split(","))
    else:
        with ServerProcess() as upstream, tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            (work / "metis.yaml").write_text(
                metis_config(upstream, args.scenario, args.pass_through == "on", args.pace)
            )
            if args.connect_timeout:
                with_connect_timeout(work, args.connect_timeout)
            (work / "litellm.yaml").write_text(litellm_config(upstream, args.scenario, args.pace))
            with_responses_model(work, upstream, args.scenario, args.pace)
            cells = run_cells(args, work, upstream)
    text = markdown(cells, args.workers)
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    if args.json:
        Path(args.json).write_text(json.dumps([c.saved() for c in cells]))
    return cells


if __name__ == "__main__":
    main()
